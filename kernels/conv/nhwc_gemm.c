/* A 1x1 stride-1 unpadded CONV in NCHW[x]c with ic_bn = C and oc_bn = K:
 * one block of channels, so the tensors are channels-last (NHWC) and the
 * CONV is one GEMM per image, y[n] (OH*OW x K) = x[n] (H*W x C) . B, with
 * B (C x K) the blocked weights OIHW[C]i[K]o read as they are. The
 * weights are B, packed once into the GEMM's micro-panels; the GEMM adds
 * the bias per column (output channel), and each thread then runs the
 * epilogue (residual, ReLU, SiLU / HardSwish) on the tiles it computed.
 *
 * Why: a chain of 1x1 CONVs held so, with the depthwise CONVs between
 * them in the same block, runs a mobile CNN without layout transforms.
 * What it buys was measured, not assumed: the depthwise kernel alone runs
 * within 3-15% across NCHW, NCHW16c and channels-last input
 * (benchmarks/dw_shapes.c), and held so by default in whole models it did
 * not pay (benchmarks/channels_last.py; engine/workloads.py's
 * channels_last_point says by how much), so the tuner measures it per
 * workload and the layout DP chooses it where it wins. */
#include <string.h>
#include "conv_internal.h"
#include "../gemm/gemm_internal.h"

int hwt_conv_nhwc_gemm_ok(const hwt_conv_desc *d, const hwt_conv_params *p) {
  return p->ic_bn == d->C && p->oc_bn == d->K && !p->winograd && d->R == 1 && d->S == 1 &&
         d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 && d->pad_w == 0 &&
         d->pad_h_end == 0 && d->pad_w_end == 0;
}

static void desc_of(const hwt_conv_plan *p, hwt_gemm_desc *g) {
  memset(g, 0, sizeof *g);
  g->M = p->OH * p->OW;
  g->N = p->d.K;
  g->K = p->d.C;
  g->lda = p->d.C;
  g->ldb = p->d.K;
  g->ldc = p->d.K;
}

int hwt_conv_nhwc_gemm_plan(hwt_conv_plan *out) {
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(out, &g);
  out->nhwc_gemm = 1;
  out->copy_input = 0;
  out->rows_outer = 0;
  if (hwt_gemm_plan_make(&g, out->isa, out->nth, &gp) != HWT_OK) return HWT_EINVAL;
  out->w_floats = gp.packed_b_floats;
  /* run_part plans the GEMM for the nth it is given, which may be below
   * the plan's (conv.c's NCHW GEMM path says why): the largest workspace
   * of any count up to nth. */
  out->ws_floats = hwt_gemm_ws_floats_upto(&g, out->isa, out->nth);
  return HWT_OK;
}

int hwt_conv_nhwc_gemm_pack(const hwt_conv_plan *p, const float *w_blocked, float *w_packed) {
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(p, &g);
  if (hwt_gemm_plan_make(&g, p->isa, 1, &gp) != HWT_OK) return HWT_EINVAL;
  return hwt_gemm_pack_b(&gp, w_blocked, w_packed);
}

void hwt_conv_nhwc_gemm_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                                 const float *bias, const float *res, float *y, float *ws,
                                 int tid, int nth) {
  const hwt_conv_desc *d = &p->d;
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(p, &g);
  if (hwt_gemm_plan_make(&g, p->isa, nth, &gp) != HWT_OK) return;
  const hwt_gemm_share sh =
      hwt_gemm_share_of(hwt_gemm_variant_get(p->isa), g.M, g.N, g.K, tid, nth);
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  const int epi = res || d->relu || d->act;
  const long hw = (long)p->OH * p->OW;
  for (int n = 0; n < d->N; n++) {
    const size_t xo = (size_t)n * hw * d->C, yo = (size_t)n * hw * d->K;
    hwt_gemm_run_part_packed(&gp, x + xo, w, y + yo, bias, ws, tid, nth);
    if (!epi || sh.i0 >= sh.i1 || sh.j0 >= sh.j1) continue;
    if (sh.j0 == 0 && sh.j1 == d->K) { /* whole rows: one contiguous run */
      const size_t at = yo + (size_t)sh.i0 * d->K;
      v->epilogue(y + at, res ? res + at : NULL, (long)(sh.i1 - sh.i0) * d->K, 0.0f, d->relu,
                  d->relu_max, d->act);
      continue;
    }
    for (int i = sh.i0; i < sh.i1; i++) {
      const size_t at = yo + (size_t)i * d->K + (size_t)sh.j0;
      v->epilogue(y + at, res ? res + at : NULL, sh.j1 - sh.j0, 0.0f, d->relu, d->relu_max,
                  d->act);
    }
  }
}
