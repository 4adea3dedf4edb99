/* LSTM cell driver: work items, each a row's chunk of hidden units run by
 * the ISA's fused body (cell_body.c): the gate sums, activations, c and h
 * in one pass, instead of the unfused graph's eleven ops that each stream
 * a [B, H] or [B, 4H] tensor through memory. */
#include <string.h>
#include "hwtune/eltwise.h"
#include "hwtune/rnn.h"
#include "cell_impl.h"

/* Chunks are whole 64-byte lines of h and c, so that two threads never write
 * one line (given H % 16 == 0; otherwise rows themselves share lines). */
#define UNIT_ALIGN 16

int hwt_lstm_cell_plan_make(const hwt_lstm_cell_desc *d, int nth, hwt_lstm_cell_plan *out) {
  if (!d || !out || nth < 1 || d->batch < 1 || d->hidden < 1) return HWT_EINVAL;
  hwt_eltwise_desc probe = {.op = HWT_EW_SIGMOID, .isa = d->isa};
  int st = hwt_eltwise_check(&probe);
  if (st != HWT_OK) return st;
  memset(out, 0, sizeof *out);
  out->d = *d;
  const int H = d->hidden;
  /* A row per item, cut into more chunks only while B rows alone would
     leave a thread without an item (batch-1 serving on many cores). */
  int chunks = 1;
  int max_chunks = (H + UNIT_ALIGN - 1) / UNIT_ALIGN;
  while ((long)d->batch * chunks < nth && chunks < max_chunks) chunks++;
  int chunk = (H + chunks - 1) / chunks;
  chunk = (chunk + UNIT_ALIGN - 1) / UNIT_ALIGN * UNIT_ALIGN;
  out->chunk = chunk < H ? chunk : H;
  out->ws_floats = 0; /* the body keeps everything in registers */
  return HWT_OK;
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
  const hwt_lstm_units_fn units = hwt_lstm_variant_for(p->d.isa)->units;
  const size_t HH = (size_t)H;
  (void)ws;
  for (long it = lo; it < hi; it++) {
    int r = (int)(it / per_row), u0 = (int)(it % per_row) * chunk;
    int n = H - u0 < chunk ? H - u0 : chunk;
    const size_t row = (size_t)r * 4 * HH + (size_t)u0, cell = (size_t)r * HH + (size_t)u0;
    units(gates + row, p->d.has_x_gates ? x_gates + row : NULL,
          p->d.has_bias ? bias + u0 : NULL, c_prev + cell, h + cell, c + cell, (size_t)n, HH);
  }
}
