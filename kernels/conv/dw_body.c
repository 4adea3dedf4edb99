/* The depthwise variant body, compiled once per ISA over
 * kernels/common/vec.h (kernels.cmake). A chunk of output rows first
 * stages the input rows it reads: zero-padded and, for stride_w > 1, split
 * into stride phases (phase q holds padded columns q, q + sw, ...), so the
 * output columns ow .. ow + HV_W - 1 read HV_W consecutive floats at every
 * tap. Each output row then accumulates 4 vectors of columns at a time
 * over the R x S taps (one broadcast weight per 4 FMAs), the bias as the
 * starting value, and applies the epilogue (+ residual, ReLU) before one
 * store; the row's last vector masks its store. 3x3, 5x5 and 7x7 filters
 * run with the tap loops unrolled at compile time. */
#include <string.h>
#include "../common/vec.h"
#include "conv_internal.h"
#include "dw_impl.h"

/* Output vectors per register block: 4 accumulators, 1 weight and the
 * loads fit AVX2's 16 registers; more only adds loads in flight, as every
 * FMA reads a fresh input vector from L1 anyway. */
#define U 4

/* One staged row (p->phases x p->wq floats) of input row xr, NULL: a row
 * of the padding. */
static void stage_row(const hwt_dwconv_plan *p, const float *xr, float *dst) {
  const int sw = p->phases, wq = p->wq, pl = p->d.pad_w, W = p->d.W;
  if (!xr) {
    memset(dst, 0, sizeof(float) * (size_t)sw * (size_t)wq);
    return;
  }
  for (int q = 0; q < sw; q++) {
    float *o = dst + (long)q * wq;
    /* o[j] = x[q + j * sw - pl] where that column exists: j in [j0, j1). */
    int j0 = pl > q ? (pl - q + sw - 1) / sw : 0;
    long j1 = ((long)W - 1 + pl - q) / sw + 1;
    if ((long)W - 1 + pl - q < 0) j1 = 0;
    if (j0 > wq) j0 = wq;
    if (j1 > wq) j1 = wq;
    if (j1 < j0) j1 = j0;
    for (int j = 0; j < j0; j++) o[j] = 0.0f;
    const float *src = xr + q - pl;
    if (sw == 1)
      memcpy(o + j0, src + j0, sizeof(float) * (size_t)(j1 - j0));
    else
      for (long j = j0; j < j1; j++) o[j] = src[j * sw];
    for (long j = j1; j < wq; j++) o[j] = 0.0f;
  }
}

HV_AI hv_f32 epilogue(hv_f32 acc, const float *res, long at, hv_mask m, int full, int relu) {
  if (res) acc = hv_add(acc, full ? hv_load(res + at) : hv_load_mask(res + at, m));
  /* max(0, acc): NaN stays NaN, as the numpy reference's np.maximum. */
  return relu ? hv_max(hv_zero(), acc) : acc;
}

/* Output row y (OW floats) from the staged rows st (kernel row r at
 * st + r * dil_h * row floats). */
HV_AI void row_out(const hwt_dwconv_plan *p, const float *st, const float *w, float bias,
                   const float *res, float *y, const int R, const int S) {
  const int OW = p->OW, wq = p->wq, sw = p->phases, relu = p->d.relu;
  const long rstep = (long)p->d.dil_h * sw * wq;
  long off[64];  /* float offset of tap s in a staged row; S <= 64 checked by rows() */
  for (int s = 0; s < S; s++) {
    const int t = s * p->d.dil_w;
    off[s] = (long)(t % sw) * wq + t / sw;
  }
  const hv_f32 bv = hv_set1(bias);
  const hv_mask all = hv_first(HV_W);
  int ow = 0;
  for (; ow + U * HV_W <= OW; ow += U * HV_W) {
    hv_f32 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
    for (int r = 0; r < R; r++) {
      const float *in = st + r * rstep + ow;
      for (int s = 0; s < S; s++) {
        const hv_f32 wv = hv_set1(w[r * S + s]);
        const float *q = in + off[s];
        a0 = hv_fmadd(hv_load(q), wv, a0);
        a1 = hv_fmadd(hv_load(q + HV_W), wv, a1);
        a2 = hv_fmadd(hv_load(q + 2 * HV_W), wv, a2);
        a3 = hv_fmadd(hv_load(q + 3 * HV_W), wv, a3);
      }
    }
    hv_store(y + ow, epilogue(a0, res, ow, all, 1, relu));
    hv_store(y + ow + HV_W, epilogue(a1, res, ow + HV_W, all, 1, relu));
    hv_store(y + ow + 2 * HV_W, epilogue(a2, res, ow + 2 * HV_W, all, 1, relu));
    hv_store(y + ow + 3 * HV_W, epilogue(a3, res, ow + 3 * HV_W, all, 1, relu));
  }
  for (; ow < OW; ow += HV_W) {
    hv_f32 a = bv;
    for (int r = 0; r < R; r++) {
      const float *in = st + r * rstep + ow;
      for (int s = 0; s < S; s++) a = hv_fmadd(hv_load(in + off[s]), hv_set1(w[r * S + s]), a);
    }
    const int full = OW - ow >= HV_W;
    const hv_mask m = hv_first(OW - ow);
    a = epilogue(a, res, ow, m, full, relu);
    if (full)
      hv_store(y + ow, a);
    else
      hv_store_mask(y + ow, m, a);
  }
}

static void rows(const hwt_dwconv_plan *p, const float *x, const float *w, float bias,
                 const float *res, float *y, int oa, int ob, float *ws) {
  const hwt_conv_desc *d = &p->d;
  const long row = (long)p->phases * p->wq;
  if (d->S > 64) return;  /* the driver's plan never makes one (hwt_dwconv_plan_make) */
  for (int o0 = oa; o0 < ob; o0 += p->chunk) {
    const int o1 = ob < o0 + p->chunk ? ob : o0 + p->chunk;
    const long span = hwt_dwconv_span(p, o1 - o0), ih0 = (long)o0 * d->stride_h - d->pad_h;
    for (long i = 0; i < span; i++) {
      const long ih = ih0 + i;
      stage_row(p, ih >= 0 && ih < d->H ? x + ih * d->W : NULL, ws + i * row);
    }
    for (int oh = o0; oh < o1; oh++) {
      const float *st = ws + (long)(oh - o0) * d->stride_h * row;
      const float *rr = res ? res + (long)oh * p->OW : NULL;
      float *yr = y + (long)oh * p->OW;
      if (d->R == 3 && d->S == 3)
        row_out(p, st, w, bias, rr, yr, 3, 3);
      else if (d->R == 5 && d->S == 5)
        row_out(p, st, w, bias, rr, yr, 5, 5);
      else if (d->R == 7 && d->S == 7)
        row_out(p, st, w, bias, rr, yr, 7, 7);
      else
        row_out(p, st, w, bias, rr, yr, d->R, d->S);
    }
  }
}

const hwt_dwconv_variant HWT_VARIANT(hwt_dwconv_variant) = {rows};
