/* LSTM cell driver: work items, and one item as a short chain of the
 * element-wise kernels (hwtune/eltwise.h, SIMD per ISA) over L1-resident
 * chunks. An item is `chunk` hidden units of one row: its four gate
 * sub-blocks are summed (gates + x_gates + bias) into z, activated into s,
 * and combined into c and h while all of it is still in L1, instead of the
 * unfused graph's eleven ops that each stream a [B, H] or [B, 4H] tensor
 * through memory. */
#include <string.h>
#include "hwtune/eltwise.h"
#include "hwtune/gemm.h"
#include "hwtune/rnn.h"

/* Floats of workspace per hidden unit of an item: z (4 gates) + s (4
 * activated gates). */
#define WS_PER_UNIT 8
/* The item's z and s take half of L1d (the other half holds the c_prev, c
 * and h lines and the gate rows streaming in): 32 KiB L1d gives 512 units,
 * all of H = 512 in one item. Fallback when L1d is unknown: 32 KiB. */
#define FALLBACK_L1D (32L << 10)
/* Chunks are whole 64-byte lines of h and c, so that two threads never write
 * one line (given H % 16 == 0; otherwise rows themselves share lines). */
#define UNIT_ALIGN 16

static size_t align16(size_t n) { return (n + 15) / 16 * 16; }

int hwt_lstm_cell_plan_make(const hwt_lstm_cell_desc *d, int nth, hwt_lstm_cell_plan *out) {
  if (!d || !out || nth < 1 || d->batch < 1 || d->hidden < 1) return HWT_EINVAL;
  hwt_eltwise_desc probe = {.op = HWT_EW_SIGMOID, .isa = d->isa};
  int st = hwt_eltwise_check(&probe);
  if (st != HWT_OK) return st;
  memset(out, 0, sizeof *out);
  out->d = *d;
  hwt_cache_sizes cs;
  hwt_cache_sizes_host(&cs);
  long l1 = cs.l1d > 0 ? cs.l1d : FALLBACK_L1D;
  long cap = l1 / 2 / (WS_PER_UNIT * (long)sizeof(float)) / UNIT_ALIGN * UNIT_ALIGN;
  if (cap < UNIT_ALIGN) cap = UNIT_ALIGN;
  const int H = d->hidden;
  /* Fewest chunks under the cap, then more while B rows x chunks leave a
     thread without an item (batch-1 serving on many cores). */
  int chunks = (int)((H + cap - 1) / cap);
  int max_chunks = (H + UNIT_ALIGN - 1) / UNIT_ALIGN;
  while ((long)d->batch * chunks < nth && chunks < max_chunks) chunks++;
  int chunk = (H + chunks - 1) / chunks;
  chunk = (chunk + UNIT_ALIGN - 1) / UNIT_ALIGN * UNIT_ALIGN;
  out->chunk = chunk < H ? chunk : H;
  out->ws_floats = align16((size_t)WS_PER_UNIT * (size_t)out->chunk);
  return HWT_OK;
}

static void ew(hwt_ew_op op, hwt_isa isa, size_t n, const float *a, const float *b,
               const float *c, float *out) {
  hwt_eltwise_desc d = {.op = op, .isa = isa, .n = n};
  hwt_eltwise_run_part(&d, a, b, c, out, 0, 1);
}

/* Units [u0, u0 + n) of row r. */
static void item(const hwt_lstm_cell_plan *p, int r, int u0, int n, const float *gates,
                 const float *x_gates, const float *bias, const float *c_prev, float *h,
                 float *c, float *ws) {
  const hwt_lstm_cell_desc *d = &p->d;
  const hwt_isa isa = d->isa;
  const size_t H = (size_t)d->hidden, row = (size_t)r * 4 * H + (size_t)u0;
  const size_t cell = (size_t)r * H + (size_t)u0, un = (size_t)n;
  float *z = ws, *s = ws + 4 * un;
  const float *src[4];
  for (int k = 0; k < 4; k++) {
    const float *g = gates + row + (size_t)k * H;
    if (!d->has_x_gates && !d->has_bias) {
      src[k] = g;
      continue;
    }
    float *zk = z + (size_t)k * un;
    if (d->has_x_gates && d->has_bias) {
      ew(HWT_EW_ADD, isa, un, g, x_gates + row + (size_t)k * H, NULL, zk);
      ew(HWT_EW_ADD, isa, un, zk, bias + (size_t)u0 + (size_t)k * H, NULL, zk);
    } else {
      ew(HWT_EW_ADD, isa, un, g, d->has_x_gates ? x_gates + row + (size_t)k * H
                                                : bias + (size_t)u0 + (size_t)k * H,
         NULL, zk);
    }
    src[k] = zk;
  }
  float *si = s, *sf = s + un, *tg = s + 2 * un, *so = s + 3 * un;
  if (src[1] == src[0] + un) { /* i and f adjacent (z): one call */
    ew(HWT_EW_SIGMOID, isa, 2 * un, src[0], NULL, NULL, si);
  } else {
    ew(HWT_EW_SIGMOID, isa, un, src[0], NULL, NULL, si);
    ew(HWT_EW_SIGMOID, isa, un, src[1], NULL, NULL, sf);
  }
  ew(HWT_EW_TANH, isa, un, src[2], NULL, NULL, tg);
  ew(HWT_EW_SIGMOID, isa, un, src[3], NULL, NULL, so);
  float *t = z; /* z is dead now */
  ew(HWT_EW_MUL, isa, un, si, tg, NULL, t);
  ew(HWT_EW_FMA, isa, un, sf, c_prev + cell, t, c + cell);
  ew(HWT_EW_TANH, isa, un, c + cell, NULL, NULL, t);
  ew(HWT_EW_MUL, isa, un, so, t, NULL, h + cell);
}

void hwt_lstm_cell_run_part(const hwt_lstm_cell_plan *p, const float *gates,
                            const float *x_gates, const float *bias, const float *c_prev,
                            float *h, float *c, float *ws, int tid, int nth) {
  if (!p || nth < 1 || tid < 0 || tid >= nth) return;
  const int H = p->d.hidden, chunk = p->chunk;
  const int per_row = (H + chunk - 1) / chunk;
  const long items = (long)p->d.batch * per_row;
  /* Items in row-major order, a contiguous range per thread. */
  long lo = items * tid / nth, hi = items * (tid + 1) / nth;
  for (long it = lo; it < hi; it++) {
    int r = (int)(it / per_row), u0 = (int)(it % per_row) * chunk;
    int n = H - u0 < chunk ? H - u0 : chunk;
    item(p, r, u0, n, gates, x_gates, bias, c_prev, h, c, ws);
  }
}
