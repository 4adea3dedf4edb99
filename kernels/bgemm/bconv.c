/* bf16 convolution driver (hwtune/bconv.h): per thread, chunks of output
 * pixels are gathered as im2col rows, rounded to bf16 pairs straight into
 * B panels of nr pixels, then every weight tile (A, packed at prepare) runs
 * against them; the epilogue writes each channel's pixels contiguously. */
#include <stdlib.h>
#include <string.h>
#include "../common/share.h"
#include "../conv/conv_internal.h"
#include "bgemm_internal.h"
#include "hwtune/bconv.h"

/* Gathered B bytes of one pixel chunk: the bf16 GEMM's B block budget
 * (BGEMM_L2_BUDGET, 512 KiB of Zen 4's 1 MiB L2), leaving room for the
 * weight tile streaming through and the rows being gathered. */
#define BCONV_B_BUDGET (512 * 1024)
/* At most this many pixels per chunk: a 64-channel 1x1 conv (Kq 32) would
 * otherwise take 4096 pixels per chunk, too few chunks to share out. */
#define BCONV_NC_MAX 512

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

int hwt_bconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_bconv_plan *out) {
  if (!d || !out || d->N < 1 || d->C < 1 || d->H < 1 || d->W < 1 || d->K < 1 || d->R < 1 ||
      d->S < 1 || d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 ||
      d->pad_h < 0 || d->pad_w < 0 || d->pad_h_end < 0 || d->pad_w_end < 0)
    return HWT_EINVAL;
  int OH = 0, OW = 0;
  if (hwt_conv_out_dims(d, &OH, &OW) < 0 || OH < 1 || OW < 1) return HWT_EINVAL;
  const long long P = (long long)d->N * OH * OW, Kg = (long long)d->C * d->R * d->S;
  if (P > 0x7fffffff || Kg > 0x7fffffff || P * d->K > 0x7fffffffLL) return HWT_EINVAL;
  memset(out, 0, sizeof *out);
  const hwt_bgemm_desc bd = {d->K, (int)P, (int)Kg, (int)Kg, 0};
  const int st = hwt_bgemm_plan_make(&bd, isa, &out->g);
  if (st < 0) return st;
  out->d = *d;
  out->OH = OH;
  out->OW = OW;
  const int mr = out->g.mr, nr = out->g.nr, Kq = out->g.Kq;
  int panels = (int)(BCONV_B_BUDGET / ((size_t)Kq * (size_t)nr * 4));
  if (panels < 1) panels = 1;
  if (panels * nr > BCONV_NC_MAX) panels = BCONV_NC_MAX / nr;
  const int pn = (int)((P + nr - 1) / nr);
  out->nc = (panels < pn ? panels : pn) * nr;
  out->packed_w_bytes = align64((size_t)((d->K + mr - 1) / mr) * Kq * mr * 4);
  out->ws_bytes = align64((size_t)out->nc * Kq * 4) + 2 * align64((size_t)out->nc * 4) +
                  align64((size_t)mr * nr * 4);
  return HWT_OK;
}

int hwt_bconv_pack_w(const hwt_bconv_plan *p, const float *w, void *packed) {
  if (!w || !packed) return HWT_EINVAL;
  /* OIHW is [K][C*R*S]: A row-major. Tile t: entry [q][i] for channel
   * t * mr + i, zero past K. */
  const int mr = p->g.mr, Kq = p->g.Kq, Kg = p->g.d.K, K = p->d.K;
  uint32_t *dst = packed;
  for (int k0 = 0; k0 < K; k0 += mr)
    for (int q = 0; q < Kq; q++)
      for (int i = 0; i < mr; i++) {
        const float *row = w + (size_t)(k0 + i) * Kg;
        const uint32_t lo = k0 + i < K ? hwt_bf16_rne(row[2 * q]) : 0;
        const uint32_t hi = k0 + i < K && 2 * q + 1 < Kg ? hwt_bf16_rne(row[2 * q + 1]) : 0;
        *dst++ = lo | hi << 16;
      }
  return HWT_OK;
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

void hwt_bgemm_pair_generic(const float *lo, const float *hi, int tiles, int width,
                            size_t stride, uint32_t *dst) {
  const uint32_t *l = (const uint32_t *)(const void *)lo, *h = (const uint32_t *)(const void *)hi;
  for (int t = 0; t < tiles; t++, dst += stride, l += width, h += width)
    for (int i = 0; i < width; i++) dst[i] = rne_bits(l[i]) | rne_bits(h[i]) << 16;
}

/* B panels of pixels [m0, m0 + cnt): panel t holds entry [q][j] for pixel
 * m0 + t * nr + j (zero past cnt). */
static void pack_chunk(const hwt_bconv_plan *p, const hwt_bgemm_variant *v, const float *x,
                       int m0, int cnt, float *r0, float *r1, uint32_t *bpanel) {
  const int nr = p->g.nr, Kq = p->g.Kq, Kg = p->g.d.K;
  const int tiles = (cnt + nr - 1) / nr, pad = tiles * nr - cnt;
  memset(r0 + cnt, 0, (size_t)pad * sizeof *r0);
  memset(r1 + cnt, 0, (size_t)pad * sizeof *r1);
  for (int q = 0; q < Kq; q++) {
    gather_row(p, x, 2 * q, m0, cnt, r0);
    if (2 * q + 1 < Kg)
      gather_row(p, x, 2 * q + 1, m0, cnt, r1);
    else
      memset(r1, 0, (size_t)cnt * sizeof *r1);
    v->pair(r0, r1, tiles, nr, (size_t)Kq * nr, bpanel + (size_t)q * nr);
  }
}

/* acc (mb channels from k0 x nb pixels from m, of an mr x nr tile) into
 * NCHW y: each channel's pixels run contiguously within one image. */
static void epilogue(const hwt_bconv_plan *p, const float *acc, int k0, int mb, int m, int nb,
                     const float *bias, const float *res, float *y) {
  const hwt_conv_desc *d = &p->d;
  const int OHW = p->OH * p->OW, nr = p->g.nr;
  const float hi = d->relu && d->relu_max > 0.0f ? d->relu_max : 0.0f;
  for (int j0 = 0; j0 < nb;) {
    /* the run of pixels [j0, j1) in image n */
    const int n = (m + j0) / OHW, pix = (m + j0) % OHW;
    const int j1 = nb - j0 < OHW - pix ? nb : j0 + OHW - pix;
    for (int i = 0; i < mb; i++) {
      const int k = k0 + i;
      const float b = bias ? bias[k] : 0.0f;
      const ptrdiff_t at = ((ptrdiff_t)n * d->K + k) * OHW + pix - j0;
      const float *a = acc + (size_t)i * nr;
      float *o = y + at;
      const float *r = res ? res + at : NULL;
      for (int j = j0; j < j1; j++) {
        float v = a[j] + b;
        if (r) v += r[j];
        if (d->relu) v = v < 0.0f ? 0.0f : v;
        if (hi > 0.0f) v = v > hi ? hi : v;
        o[j] = v;
      }
      hwt_conv_act_rows((hwt_isa)p->g.isa, d->act, o + j0, 0, 1, j1 - j0);
    }
    j0 = j1;
  }
}

void hwt_bconv_run_part(const hwt_bconv_plan *p, const float *x, const void *packed_w,
                        const float *bias, const float *residual, float *y, void *ws, int tid,
                        int nth) {
  const hwt_bgemm_variant *v = hwt_bgemm_variant_get(p->g.isa);
  const int mr = p->g.mr, nr = p->g.nr, Kq = p->g.Kq, K = p->g.d.M, P = p->g.d.N;
  /* Pixel panels are the rows (each thread gathers only its own); channel
   * tiles when there are too few pixel panels to go round twice (7x7
   * outputs: two panels), each thread then gathering every pixel. */
  int m0, m1, k0, k1;
  if (!hwt_tile_share(P, nr, K, mr, tid, nth, &m0, &m1, &k0, &k1)) return;
  uint32_t *bpanel = ws;
  float *row0 = (float *)((char *)ws + align64((size_t)p->nc * Kq * 4));
  float *row1 = (float *)((char *)row0 + align64((size_t)p->nc * 4));
  float *acc = (float *)((char *)row1 + align64((size_t)p->nc * 4));
  const size_t tile = (size_t)Kq * mr, panel = (size_t)Kq * nr;
  for (int mc0 = m0; mc0 < m1; mc0 += p->nc) {
    const int cnt = m1 - mc0 < p->nc ? m1 - mc0 : p->nc, panels = (cnt + nr - 1) / nr;
    pack_chunk(p, v, x, mc0, cnt, row0, row1, bpanel);
    for (int k = k0; k < k1; k += mr) {
      const uint32_t *a = (const uint32_t *)packed_w + (size_t)(k / mr) * tile;
      for (int t = 0; t < panels; t++) {
        const int m = mc0 + t * nr;
        v->ukr(Kq, a, bpanel + (size_t)t * panel, acc);
        epilogue(p, acc, k, k1 - k < mr ? k1 - k : mr, m, mc0 + cnt - m < nr ? mc0 + cnt - m : nr,
                 bias, residual, y);
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
  const int M = p.g.d.N, K = d->K, Kg = p.g.d.K;
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
      y[at] = hwt_conv_act_ref(v, d->act);
    }
  free(row), free(col), free(bt), free(c);
  return st;
}
