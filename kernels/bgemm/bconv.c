/* bf16 convolution driver (hwtune/bconv.h): per thread, chunks of output
 * pixels are gathered as im2col rows, rounded to bf16 pairs straight into
 * the micro-kernel's A panels, then run against every packed weight panel
 * of the thread's columns; the epilogue writes NCHW. */
#include <stdlib.h>
#include <string.h>
#include "bgemm_internal.h"
#include "hwtune/bconv.h"

/* Packed A bytes of one chunk: with the bf16 GEMM's 512 KiB B block
 * (BGEMM_L2_BUDGET) this keeps both in Zen 4's 1 MiB L2 with room for the
 * output tile and the rows being gathered. */
#define BCONV_A_BUDGET (192 * 1024)
/* At most this many pixels per chunk: a 64-channel 1x1 conv (Kq 32) would
 * otherwise take 1536 pixels per chunk, too few chunks to go round. */
#define BCONV_MC_MAX 512

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

int hwt_bconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_bconv_plan *out) {
  if (!d || !out || d->N < 1 || d->C < 1 || d->H < 1 || d->W < 1 || d->K < 1 || d->R < 1 ||
      d->S < 1 || d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 ||
      d->pad_h < 0 || d->pad_w < 0 || d->pad_h_end < 0 || d->pad_w_end < 0)
    return HWT_EINVAL;
  int OH = 0, OW = 0;
  if (hwt_conv_out_dims(d, &OH, &OW) < 0 || OH < 1 || OW < 1) return HWT_EINVAL;
  const long long M = (long long)d->N * OH * OW, Kg = (long long)d->C * d->R * d->S;
  if (M > 0x7fffffff || Kg > 0x7fffffff || M * d->K > 0x7fffffffLL) return HWT_EINVAL;
  memset(out, 0, sizeof *out);
  const hwt_bgemm_desc bd = {(int)M, d->K, (int)Kg, (int)Kg, 0};
  const int st = hwt_bgemm_plan_make(&bd, isa, &out->g);
  if (st < 0) return st;
  out->d = *d;
  out->OH = OH;
  out->OW = OW;
  const int mr = out->g.mr;
  int tiles = (int)(BCONV_A_BUDGET / ((size_t)out->g.Kq * (size_t)mr * 4));
  if (tiles < 1) tiles = 1;
  if (tiles * mr > BCONV_MC_MAX) tiles = BCONV_MC_MAX / mr;
  const int mtiles = (int)((M + mr - 1) / mr);
  out->mc = (tiles < mtiles ? tiles : mtiles) * mr;
  out->ws_bytes = align64((size_t)out->mc * out->g.Kq * 4) + 2 * align64((size_t)out->mc * 4) +
                  align64((size_t)mr * out->g.nr * 4);
  return HWT_OK;
}

int hwt_bconv_pack_w(const hwt_bconv_plan *p, const float *w, void *packed) {
  /* OIHW is [K][C*R*S]: the GEMM's B stored transposed. */
  return hwt_bgemm_pack_b(&p->g, w, p->g.d.K, 1, packed);
}

/* im2col row k (tap c, r, s) over output pixels [m0, m0 + cnt) into dst. */
static void gather_row(const hwt_bconv_plan *p, const float *x, int k, int m0, int cnt,
                       float *dst) {
  const hwt_conv_desc *d = &p->d;
  const int RS = d->R * d->S, c = k / RS, r = k / d->S % d->R, s = k % d->S;
  const int OHW = p->OH * p->OW, sw = d->stride_w;
  int n = m0 / OHW, oh = m0 % OHW / p->OW, ow = m0 % p->OW;
  for (int i = 0; i < cnt;) {
    const int seg = p->OW - ow < cnt - i ? p->OW - ow : cnt - i;
    const int ih = oh * d->stride_h - d->pad_h + r * d->dil_h;
    float *o = dst + i;
    if (ih < 0 || ih >= d->H) {
      memset(o, 0, (size_t)seg * sizeof *o);
    } else {
      const float *row = x + (((ptrdiff_t)n * d->C + c) * d->H + ih) * d->W;
      const int iw0 = ow * sw - d->pad_w + s * d->dil_w;
      /* taps [lo, hi) of the segment fall inside the row */
      int lo = iw0 < 0 ? (-iw0 + sw - 1) / sw : 0;
      int hi = iw0 <= d->W - 1 ? (d->W - 1 - iw0) / sw + 1 : 0;
      if (lo > seg) lo = seg;
      if (hi > seg) hi = seg;
      if (hi < lo) hi = lo;
      memset(o, 0, (size_t)lo * sizeof *o);
      if (sw == 1)
        memcpy(o + lo, row + iw0 + lo, (size_t)(hi - lo) * sizeof *o);
      else
        for (int t = lo; t < hi; t++) o[t] = row[iw0 + t * sw];
      memset(o + hi, 0, (size_t)(seg - hi) * sizeof *o);
    }
    i += seg;
    ow += seg;
    if (ow == p->OW) {
      ow = 0;
      if (++oh == p->OH) oh = 0, n++;
    }
  }
}

/* hwt_bf16_rne without branches, so that the pair loop vectorises. */
static inline uint32_t rne_bits(uint32_t u) {
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  r = (u & 0x7f800000u) == 0 ? (u >> 16) & 0x8000u : r;
  return (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) & 0xffffu : r;
}

void hwt_bgemm_pair_generic(const float *lo, const float *hi, int tiles, int mr, size_t stride,
                            uint32_t *dst) {
  const uint32_t *l = (const uint32_t *)(const void *)lo, *h = (const uint32_t *)(const void *)hi;
  for (int t = 0; t < tiles; t++, dst += stride, l += mr, h += mr)
    for (int i = 0; i < mr; i++) dst[i] = rne_bits(l[i]) | rne_bits(h[i]) << 16;
}

static void pack_chunk(const hwt_bconv_plan *p, const hwt_bgemm_variant *v, const float *x,
                       int m0, int cnt, float *r0, float *r1, uint32_t *apanel) {
  const int mr = p->g.mr, Kq = p->g.Kq, Kg = p->g.d.K;
  const int tiles = (cnt + mr - 1) / mr, pad = tiles * mr - cnt;
  memset(r0 + cnt, 0, (size_t)pad * sizeof *r0);
  memset(r1 + cnt, 0, (size_t)pad * sizeof *r1);
  for (int q = 0; q < Kq; q++) {
    gather_row(p, x, 2 * q, m0, cnt, r0);
    if (2 * q + 1 < Kg)
      gather_row(p, x, 2 * q + 1, m0, cnt, r1);
    else
      memset(r1, 0, (size_t)cnt * sizeof *r1);
    v->pair(r0, r1, tiles, mr, (size_t)Kq * mr, apanel + (size_t)q * mr);
  }
}

/* acc (mb x nb of an mr x nr tile) for pixels m.., channels j.. into NCHW y. */
static void epilogue(const hwt_bconv_plan *p, const float *acc, int m, int mb, int j, int nb,
                     const float *bias, const float *res, float *y) {
  const hwt_conv_desc *d = &p->d;
  const int OHW = p->OH * p->OW, nr = p->g.nr;
  ptrdiff_t off[64];
  for (int i = 0; i < mb; i++)
    off[i] = (ptrdiff_t)((m + i) / OHW) * d->K * OHW + (m + i) % OHW;
  const float hi = d->relu && d->relu_max > 0.0f ? d->relu_max : 0.0f;
  for (int jj = 0; jj < nb; jj++) {
    const int k = j + jj;
    const float b = bias ? bias[k] : 0.0f;
    for (int i = 0; i < mb; i++) {
      const ptrdiff_t at = off[i] + (ptrdiff_t)k * OHW;
      float v = acc[i * nr + jj] + b;
      if (res) v += res[at];
      if (d->relu) v = v < 0.0f ? 0.0f : v;
      if (hi > 0.0f) v = v > hi ? hi : v;
      y[at] = v;
    }
  }
}

/* [*lo, *hi) of `units` for part idx of parts, balanced. */
static void split(int units, int parts, int idx, int *lo, int *hi) {
  *lo = (int)((long)units * idx / parts);
  *hi = (int)((long)units * (idx + 1) / parts);
}

void hwt_bconv_run_part(const hwt_bconv_plan *p, const float *x, const void *packed_w,
                        const float *bias, const float *residual, float *y, void *ws, int tid,
                        int nth) {
  const hwt_bgemm_variant *v = hwt_bgemm_variant_get(p->g.isa);
  const int mr = p->g.mr, nr = p->g.nr, Kq = p->g.Kq, M = p->g.d.M, N = p->g.d.N;
  const int tm = (M + mr - 1) / mr, tn = (N + nr - 1) / nr;
  /* Pixel tiles first (each thread gathers only its own); channel panels
   * when there are too few pixel tiles to go round twice (7x7 outputs). */
  int gm = nth, gn = 1;
  if (tm < 2 * nth && tn >= nth) gm = 1, gn = nth;
  int r0, r1, c0, c1;
  split(tm, gm, tid / gn, &r0, &r1);
  split(tn, gn, tid % gn, &c0, &c1);
  const int m0 = r0 * mr, m1 = r1 * mr < M ? r1 * mr : M;
  const int n0 = c0 * nr, n1 = c1 * nr < N ? c1 * nr : N;
  if (m0 >= m1 || n0 >= n1) return;
  uint32_t *apanel = ws;
  float *row0 = (float *)((char *)ws + align64((size_t)p->mc * Kq * 4));
  float *row1 = (float *)((char *)row0 + align64((size_t)p->mc * 4));
  float *acc = (float *)((char *)row1 + align64((size_t)p->mc * 4));
  const size_t panel = (size_t)Kq * nr;
  for (int mc0 = m0; mc0 < m1; mc0 += p->mc) {
    const int cnt = m1 - mc0 < p->mc ? m1 - mc0 : p->mc, tiles = (cnt + mr - 1) / mr;
    pack_chunk(p, v, x, mc0, cnt, row0, row1, apanel);
    for (int jb = n0; jb < n1; jb += p->g.nc) {
      const int je = n1 - jb < p->g.nc ? n1 : jb + p->g.nc;
      for (int j = jb; j < je; j += nr) {
        const uint32_t *b = (const uint32_t *)packed_w + (size_t)(j / nr) * panel;
        for (int t = 0; t < tiles; t++) {
          const int m = mc0 + t * mr;
          v->ukr(Kq, apanel + (size_t)t * Kq * mr, b, acc);
          epilogue(p, acc, m, m1 - m < mr ? m1 - m : mr, j, je - j < nr ? je - j : nr, bias,
                   residual, y);
        }
      }
    }
  }
}

int hwt_bconv_ref(const hwt_conv_desc *d, const float *x, const float *w, const float *bias,
                  const float *residual, float *y) {
  hwt_bconv_plan p;
  /* the plan only for its geometry: the portable row exists everywhere */
  int st = hwt_bconv_plan_make(d, HWT_ISA_GENERIC, &p);
  if (st < 0) return st;
  if (!x || !w || !y) return HWT_EINVAL;
  const int M = p.g.d.M, K = d->K, Kg = p.g.d.K;
  float *col = malloc((size_t)M * Kg * sizeof *col), *bt = malloc((size_t)Kg * K * sizeof *bt);
  float *c = malloc((size_t)M * K * sizeof *c);
  if (!col || !bt || !c) {
    free(col), free(bt), free(c);
    return HWT_ENOMEM;
  }
  float *row = malloc((size_t)M * sizeof *row);
  if (!row) {
    free(col), free(bt), free(c);
    return HWT_ENOMEM;
  }
  for (int k = 0; k < Kg; k++) {
    gather_row(&p, x, k, 0, M, row);
    for (int m = 0; m < M; m++) col[(size_t)m * Kg + k] = row[m];
  }
  for (int o = 0; o < K; o++)
    for (int k = 0; k < Kg; k++) bt[(size_t)k * K + o] = w[(size_t)o * Kg + k];
  const hwt_bgemm_desc bd = {M, K, Kg, Kg, 0};
  const hwt_bgemm_epi e = {c, K, NULL, 0};
  st = hwt_bgemm_ref(&bd, col, bt, &e);
  const int OHW = p.OH * p.OW;
  const float hi = d->relu && d->relu_max > 0.0f ? d->relu_max : 0.0f;
  for (int m = 0; st == HWT_OK && m < M; m++)
    for (int o = 0; o < K; o++) {
      const size_t at = ((size_t)(m / OHW) * K + o) * OHW + m % OHW;
      float v = c[(size_t)m * K + o] + (bias ? bias[o] : 0.0f);
      if (residual) v += residual[at];
      if (d->relu) v = v < 0.0f ? 0.0f : v;
      if (hi > 0.0f) v = v > hi ? hi : v;
      y[at] = v;
    }
  free(row), free(col), free(bt), free(c);
  return st;
}
