/* The stem kernel (kernels/conv/stem.c, stem_body.c) vs the plain-C
 * reference: asked for as HWT_CONV_NCHW_STEM on every supported ISA (the
 * portable one included), over strides 1-3, dilation, asymmetric padding,
 * 1-4 input channels, output channel counts that leave a partial block,
 * rows of one to several register blocks with a masked last vector, two
 * images, 1-4 threads (more threads than rows), every epilogue (ReLU,
 * ReLU6, SiLU, HardSwish, a residual); and which plans take it by
 * default. Small shapes so it runs in seconds under ASan/UBSan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/conv.h"
#include "check.h"
#include "conv_case.h"

/* Runs d as the stem kernel on isa with nth shares (in reverse order: no
 * share may depend on another having run), with the residual res when not
 * NULL, and compares with want. */
static void run_stem(const hwt_conv_desc *d, hwt_isa isa, int nth, const float *x,
                     const float *w, const float *b, const float *res, const float *want) {
  hwt_conv_plan plan;
  const int st = hwt_conv_plan_make(d, HWT_CONV_NCHW_STEM, NULL, isa, nth, &plan);
  CHECK(st == HWT_OK && plan.layout == HWT_CONV_NCHW_STEM, "plan %d", st);
  if (st != HWT_OK) return;
  float *wp = alloc_floats(plan.w_floats), *y = alloc_floats(plan.y_floats);
  CHECK(hwt_conv_pack_weights(&plan, w, wp) == HWT_OK, "pack");
  for (size_t i = 0; i < plan.y_floats; i++) y[i] = NAN; /* every output written */
  for (int t = nth - 1; t >= 0; t--) {
    float *ws = alloc_floats(plan.ws_floats);
    hwt_conv_run_part_res(&plan, x, wp, b, res, y, ws, t, nth);
    free(ws);
  }
  const double tol = 1e-6 + 2.0 * 1.2e-7 * d->C * d->R * d->S;
  double err = 0.0;
  for (size_t i = 0; i < plan.y_floats; i++) {
    const double e = fabs((double)y[i] - (double)want[i]) / (1.0 + fabs((double)want[i]));
    if (!(e <= err)) err = e; /* NaN-propagating max */
  }
  CHECK(err <= tol,
        "isa=%s nth=%d N=%d C=%d %dx%d K=%d %dx%d stride %d,%d pad %d,%d end %d,%d dil %d,%d "
        "relu %d max %g act %d res %d: err %g > %g",
        hwt_isa_name(isa), nth, d->N, d->C, d->H, d->W, d->K, d->R, d->S, d->stride_h,
        d->stride_w, d->pad_h, d->pad_w, d->pad_h_end, d->pad_w_end, d->dil_h, d->dil_w,
        d->relu, (double)d->relu_max, d->act, res != NULL, err, tol);
  free(wp);
  free(y);
}

static void test_shape(hwt_conv_desc d) {
  conv_case c = conv_case_make(&d);
  if (!c.x) return;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int nth = 1; nth <= 4; nth++)
      run_stem(&d, (hwt_isa)isa, nth, c.x, c.w, c.b, NULL, c.want);
    run_stem(&d, (hwt_isa)isa, 2, c.x, c.w, c.b, c.res, c.want_res);
  }
  conv_case_free(&c);
}

/* The default NCHW plan takes the stem kernel for stride-2 undilated CONVs
 * of at most 4 input channels on AVX2 and AVX-512, not on the portable
 * variant; explicit params keep the template; C > 4 is refused. */
static void test_choice(void) {
  /* N, C, H, W, K, R, S, sh, sw, ph, pw, relu, dil_h, dil_w, pad_h_end, pad_w_end,
   * relu_max, act */
  const hwt_conv_desc stem = {1, 3, 32, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 6.0f, 0};
  hwt_conv_desc five = stem, s1 = stem, dil = stem;
  five.C = 5;
  s1.stride_h = s1.stride_w = 1;
  dil.dil_h = dil.dil_w = 2;
  hwt_conv_plan plan;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    const int want = isa != HWT_ISA_GENERIC;
    CHECK(hwt_conv_plan_make(&stem, HWT_CONV_NCHW, NULL, (hwt_isa)isa, 2, &plan) == HWT_OK &&
              (plan.layout == HWT_CONV_NCHW_STEM) == want,
          "isa %s: 3-channel stride-2 default plan %d", hwt_isa_name((hwt_isa)isa),
          plan.layout);
    const hwt_conv_desc *keep[3] = {&five, &s1, &dil};
    for (int i = 0; i < 3; i++)
      CHECK(hwt_conv_plan_make(keep[i], HWT_CONV_NCHW, NULL, (hwt_isa)isa, 1, &plan) ==
                    HWT_OK &&
                plan.layout != HWT_CONV_NCHW_STEM,
            "isa %s: shape %d keeps its kernel", hwt_isa_name((hwt_isa)isa), i);
    hwt_conv_params p;
    CHECK(hwt_conv_default_params(&stem, (hwt_isa)isa, &p) == HWT_OK, "default params");
    CHECK(hwt_conv_plan_make(&stem, HWT_CONV_NCHW, &p, (hwt_isa)isa, 1, &plan) == HWT_OK &&
              plan.layout == HWT_CONV_NCHW,
          "explicit params keep the template");
    CHECK(hwt_conv_plan_make(&five, HWT_CONV_NCHW_STEM, NULL, (hwt_isa)isa, 1, &plan) ==
              HWT_EINVAL,
          "5 input channels refuse NCHW_STEM");
  }
}

/* The shapes test_shape checks every variant on. */
static const hwt_conv_desc shapes[] = {
  /* N, C, H, W, K, R, S, sh, sw, ph, pw, relu, dil_h, dil_w, pad_h_end, pad_w_end,
   * relu_max, act */
  /* MobileNetV2's stem at a small size (+ ReLU6), ResNet's 7x7 (+ ReLU) */
  {1, 3, 40, 40, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 6.0f, 0},
  {1, 3, 38, 38, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, 3, 3, 0, 0},
  /* rows wider than one register block (AVX2: 16 pixels, AVX-512: 96),
   * K leaving a partial block, SiLU / HardSwish; two images of 5x5 */
  {1, 3, 9, 250, 10, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0, HWT_CONV_ACT_SILU},
  {2, 2, 5, 5, 7, 5, 5, 2, 2, 2, 2, 0, 1, 1, 2, 2, 0, HWT_CONV_ACT_HARD_SWISH},
  /* one channel and four, asymmetric padding (TF "same" at stride 2),
   * unpadded odd widths */
  {1, 1, 11, 33, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 1, 0, 0},
  {1, 4, 12, 35, 9, 3, 3, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0},
  /* stride 1 and 3, unequal strides, dilation, a kernel wider than tall */
  {1, 3, 10, 21, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
  {1, 3, 13, 40, 4, 3, 3, 3, 3, 1, 2, 0, 1, 1, 0, 1, 0, 0},
  {2, 2, 14, 19, 8, 3, 5, 1, 2, 2, 3, 1, 2, 2, 2, 1, 0, 0},
  {1, 3, 9, 30, 12, 2, 7, 2, 2, 0, 3, 0, 1, 1, 1, 3, 0, 0},
};

int main(void) {
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) test_shape(shapes[i]);
  test_choice();
  return check_verdict("conv stem: ok\n");
}
