/* A 1x1 stride-1 unpadded NCHW CONV of a small image as the transposed
 * product: per image y^T (OH*OW x K) = x^T . W^T, the GEMM reading x as
 * its transposed A (packed per run, a micro-panel of pixels per channel
 * row) and the weights as its B, packed once (hwt_conv_pack_weights). Each
 * thread computes its share into its own workspace (pixels x channels, the
 * GEMM adding the bias per column) and writes the same share back as NCHW
 * with the residual and activation (the variant's epilogue_t).
 *
 * Why: as y = W . x (conv.c's NCHW GEMM) the image's pixels are the GEMM's
 * columns, and a 7x7 image's 49 of them fill 7 vectors of 8 (AVX2) where
 * 6.1 would do, its last 16-column tile a 1-column one, and x is packed
 * as B before every run. Transposed, the pixels are the broadcast rows of
 * the 6x16 tile (49 = 8 x 6 + 1, whose last row still runs whole vectors
 * of output channels) and the weights the packed B. Measured against the
 * NCHW GEMM (the build before this file, same ctypes calls): every 7x7
 * 1x1 CONV of MobileNetV2, EfficientNet-B0, ResNet-50 and ResNeXt-50 ran
 * 1.06-1.15x, e.g. 320->1280 1.12x, 1152->320 1.14x, 2048->512 1.15x,
 * 256->1024 1.10x, the epilogue's gathers included (1 thread, Zen 3 AVX2,
 * medians of 41 alternated thread-time samples, load ~0.4:
 * benchmarks/bench_pointwise.py --reps 41 --baseline-lib OLD.so --shapes
 * ...); at 14x14 the transposed product gained 1.0-1.19x but its
 * write-back cost more (0.60-0.96x overall, measured before the padding
 * below), hence the variant's PW_T_MAX_HW. */
#include <string.h>
#include "conv_internal.h"
#include "../gemm/gemm_internal.h"

/* Row stride of the product in the workspace: K + 16 floats, a line more
 * than K. With rows of K floats, K = 1024 put them 4 KiB apart, on one L1
 * set: 256->1024, 512->1024 and 512->2048 at 7x7 ran 0.80-0.93x the NCHW
 * GEMM while 320->1280 and 2048->512 gained 1.05-1.14x; padded, 1.10, 1.11
 * and 1.11x (same measurement as above). */
static int prod_ld(int K) { return K + 16; }

static void desc_of(const hwt_conv_desc *d, int hw, hwt_gemm_desc *g) {
  memset(g, 0, sizeof *g);
  g->M = hw;
  g->N = d->K;
  g->K = d->C;
  g->trans_a = 1; /* x[n] is C x hw: A = x^T */
  g->lda = hw;
  g->trans_b = 1; /* OIHW weights are K x C: B = W^T */
  g->ldb = d->C;
  g->ldc = prod_ld(d->K);
}

int hwt_conv_pw_t_ok(int hw, hwt_isa isa) {
  return hw <= hwt_conv_variant_for(isa)->pw_t_max_hw;
}

int hwt_conv_pw_t_plan(hwt_conv_plan *out) {
  const int hw = out->OH * out->OW;
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(&out->d, hw, &g);
  if (hwt_gemm_plan_make(&g, out->isa, out->nth, &gp) != HWT_OK) return HWT_EINVAL;
  out->gemm_t = 1;
  out->w_floats = gp.packed_b_floats;
  /* run_part plans the GEMM for the nth it is given, which may be below the
   * plan's (conv.c's NCHW GEMM path says why): the largest packing buffer of
   * any count up to nth, after the product's pixels x channels. */
  out->ws_floats = ALIGN_FLOATS((size_t)hw * prod_ld(out->d.K)) +
                   hwt_gemm_ws_floats_upto(&g, out->isa, out->nth);
  return HWT_OK;
}

int hwt_conv_pw_t_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed) {
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(&p->d, p->OH * p->OW, &g);
  if (hwt_gemm_plan_make(&g, p->isa, 1, &gp) != HWT_OK) return HWT_EINVAL;
  return hwt_gemm_pack_b(&gp, w_oihw, w_packed);
}

void hwt_conv_pw_t_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth) {
  const hwt_conv_desc *d = &p->d;
  const int hw = p->OH * p->OW;
  hwt_gemm_desc g;
  hwt_gemm_plan gp;
  desc_of(d, hw, &g);
  if (hwt_gemm_plan_make(&g, p->isa, nth, &gp) != HWT_OK) return;
  const hwt_gemm_share sh =
      hwt_gemm_share_of(hwt_gemm_variant_get(p->isa), g.M, g.N, g.K, tid, nth);
  if (sh.i0 >= sh.i1 || sh.j0 >= sh.j1) return;
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  const int ld = prod_ld(d->K);
  float *prod = ws, *gws = ws + ALIGN_FLOATS((size_t)hw * ld);
  for (int n = 0; n < d->N; n++) {
    const size_t xo = (size_t)n * d->C * hw;
    const size_t yo = (size_t)n * d->K * hw + (size_t)sh.j0 * hw + (size_t)sh.i0;
    hwt_gemm_run_part_packed(&gp, x + xo, w, prod, bias, gws, tid, nth);
    v->epilogue_t(y + yo, hw, prod + (size_t)sh.i0 * ld + sh.j0, ld, res ? res + yo : NULL,
                  sh.i1 - sh.i0, sh.j1 - sh.j0, d->relu, d->relu_max, d->act);
  }
}
