/* Strided 1x1 CONVs (ResNet's downsample projections: 1x1, stride 2,
 * unpadded) on NCHW tensors with default params: the stride-1 1x1 CONV of
 * the subsampled input. Each thread copies the pixels it reads,
 * x[c][oh*sh][ow*sw], into its workspace as a dense C x OH*OW image, then
 * runs the stride-1 plan (the GEMM, or the template over the flattened
 * image, whichever conv.c picks for that shape) on it. The copy is C*OH*OW
 * floats against 2*K*C*OH*OW flops (K >= 256 in ResNet-50's three).
 *
 * The template ran these CONVs itself before, staging every input row of
 * each thread's band and reading the staged phase at stride 1: ResNet-50's
 * 256->512 at 56x56, 512->1024 at 28x28 and 1024->2048 at 14x14 reached
 * 52-72% of the FMA peak on AVX-512 and 37-45% on AVX2, where its stride-1
 * 1x1 CONVs (GEMM) reached 80-95% (Zen 4, 1 thread,
 * benchmarks/pointwise_layers.py, under load). */
#include <string.h>
#include "conv_internal.h"
#include "../gemm/gemm_internal.h"

int hwt_conv_pw_strided(const hwt_conv_desc *d) {
  return d->R == 1 && d->S == 1 && (d->stride_h > 1 || d->stride_w > 1) && d->pad_h == 0 &&
         d->pad_w == 0 && d->pad_h_end == 0 && d->pad_w_end == 0;
}

hwt_conv_desc hwt_conv_pw_sub_desc(const hwt_conv_desc *d) {
  hwt_conv_desc s = *d;
  hwt_conv_out_dims(d, &s.H, &s.W);
  s.stride_h = s.stride_w = 1;
  s.N = 1; /* run image by image: the copy holds one */
  return s;
}

int hwt_conv_pw_plan(const hwt_conv_desc *d, hwt_isa isa, int nth, hwt_conv_plan *out) {
  const hwt_conv_desc s = hwt_conv_pw_sub_desc(d);
  int st = hwt_conv_plan_make(&s, HWT_CONV_NCHW, NULL, isa, nth, out);
  if (st != HWT_OK) return st;
  /* The stride-1 plan with the real CONV's shape: its kernels read the
   * copy, laid out as the stride-1 CONV's input. */
  out->d = *d;
  out->x_floats = (size_t)d->N * d->C * d->H * d->W;
  out->y_floats = (size_t)d->N * d->K * out->OH * out->OW;
  out->ws_floats += ALIGN_FLOATS((size_t)d->C * out->OH * out->OW);
  out->sub = 1;
  return HWT_OK;
}

/* Output pixels [j0, j1) of every channel of image x (C x H x W) into xs
 * (C x OH*OW, the same pixels' places). */
static void subsample(const hwt_conv_plan *p, const float *x, float *xs, long j0, long j1) {
  const hwt_conv_desc *d = &p->d;
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  const int sw = d->stride_w, OW = p->OW;
  const long ohw = (long)p->OH * OW;
  for (int c = 0; c < d->C; c++) {
    const float *xc = x + (size_t)c * d->H * d->W;
    float *dc = xs + (size_t)c * ohw;
    for (long j = j0; j < j1;) {
      const int oh = (int)(j / OW), ow = (int)(j % OW);
      const int n = (int)(j1 - j < OW - ow ? j1 - j : OW - ow);
      const float *src = xc + (size_t)oh * d->stride_h * d->W + (size_t)ow * sw;
      float *dst = dc + j;
      if (sw == 1) {
        memcpy(dst, src, (size_t)n * sizeof(float));
      } else {
        /* phase() may read one float past its last element at step 2
         * (a pair at a time): the last one is copied here. */
        if (n > 1) v->phase(src, sw, n - 1, dst);
        dst[n - 1] = src[(long)(n - 1) * sw];
      }
      j += n;
    }
  }
}

void hwt_conv_pw_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                          const float *bias, const float *res, float *y, float *ws, int tid,
                          int nth) {
  const hwt_conv_desc *d = &p->d;
  hwt_conv_plan q = *p; /* the stride-1 plan of one copied image */
  q.d = hwt_conv_pw_sub_desc(d);
  q.sub = 0;
  q.x_floats = (size_t)d->C * p->OH * p->OW;
  q.y_floats = (size_t)d->K * p->OH * p->OW;
  const long ohw = (long)p->OH * p->OW;
  float *xs = ws, *qws = ws + ALIGN_FLOATS((size_t)d->C * ohw);
  q.ws_floats = p->ws_floats - ALIGN_FLOATS((size_t)d->C * ohw);
  /* The GEMM reads only the pixels of its share (its columns; its rows
   * when transposed, pw_t.c); the template's units may read any pixel of
   * the image. */
  long j0 = 0, j1 = ohw;
  if (q.layout == HWT_CONV_NCHW_GEMM) {
    const hwt_gemm_variant *gv = hwt_gemm_variant_get(p->isa);
    const hwt_gemm_share sh = q.gemm_t ? hwt_gemm_share_of(gv, (int)ohw, d->K, d->C, tid, nth)
                                       : hwt_gemm_share_of(gv, d->K, (int)ohw, d->C, tid, nth);
    if (sh.i0 >= sh.i1 || sh.j0 >= sh.j1) return;
    j0 = q.gemm_t ? sh.i0 : sh.j0;
    j1 = q.gemm_t ? sh.i1 : sh.j1;
  }
  for (int n = 0; n < d->N; n++) {
    const size_t yo = (size_t)n * d->K * ohw;
    subsample(p, x + (size_t)n * d->C * d->H * d->W, xs, j0, j1);
    hwt_conv_run_part_res(&q, xs, w, bias, res ? res + yo : NULL, y + yo, qws, tid, nth);
  }
}
