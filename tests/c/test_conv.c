/* CONV variants vs the plain-C reference: every supported ISA, the three
 * layouts (NCHW through the template, NCHW direct, NCHW[x]c), a few shapes
 * (strided, dilated, asymmetrically padded) and legal parameter sets, nth
 * 1..3; the direct fallback; the transposed-conv reference as the adjoint of
 * the conv reference; layout round trips and illegal parameters. Small shapes so it runs in seconds under ASan/UBSan. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/conv.h"
#include "check.h"
#include "conv_case.h"



/* NCHW <-> NCHW[bn]c through the library's own transform. */
static void transform(const hwt_conv_desc *d, int C, long HW, int src_bn, int dst_bn,
                      const float *src, float *dst, hwt_isa isa) {
  for (int t = 0; t < 2; t++)
    hwt_layout_run_part(d->N, C, HW, src_bn, dst_bn, src, dst, t, 2, isa);
}

/* Runs one configuration and compares with want (NCHW); res: a residual
 * (NCHW, the output's shape) for the epilogue, or NULL. */
static void run_case_res(const hwt_conv_desc *d, hwt_conv_layout layout,
                         const hwt_conv_params *p, hwt_isa isa, int nth, const float *x,
                         const float *w, const float *bias, const float *res,
                         const float *want) {
  hwt_conv_plan plan;
  int st = hwt_conv_plan_make(d, layout, p, isa, nth, &plan);
  CHECK(st == HWT_OK, "plan_make %d", st);
  if (st != HWT_OK) return;
  float *wp = alloc_floats(plan.w_floats), *y = alloc_floats(plan.y_floats);
  float *xin = alloc_floats(plan.x_floats), *yout = alloc_floats(plan.y_floats);
  CHECK(hwt_conv_pack_weights(&plan, w, wp) == HWT_OK, "pack");
  long HW = (long)d->H * d->W, OHW = (long)plan.OH * plan.OW;
  if (layout == HWT_CONV_NCHWC)
    transform(d, d->C, HW, 0, plan.p.ic_bn, x, xin, isa);
  else
    memcpy(xin, x, plan.x_floats * sizeof(float));
  float *rin = res ? alloc_floats(plan.y_floats) : NULL;
  if (res && layout == HWT_CONV_NCHWC)
    transform(d, d->K, OHW, 0, plan.p.oc_bn, res, rin, isa);
  else if (res)
    memcpy(rin, res, plan.y_floats * sizeof(float));
  float **ws = calloc((size_t)nth, sizeof(float *));
  for (int t = 0; t < nth; t++) ws[t] = plan.ws_floats ? alloc_floats(plan.ws_floats) : NULL;
  /* Shares in reverse order: no share may depend on another having run. */
  for (int t = nth - 1; t >= 0; t--) {
    if (res)
      hwt_conv_run_part_res(&plan, xin, wp, bias, rin, y, ws[t], t, nth);
    else
      hwt_conv_run_part(&plan, xin, wp, bias, y, ws[t], t, nth);
  }
  if (layout == HWT_CONV_NCHWC)
    transform(d, d->K, OHW, plan.p.oc_bn, 0, y, yout, isa);
  else
    memcpy(yout, y, plan.y_floats * sizeof(float));
  double tol = 1e-6 + 2.0 * 1.2e-7 * d->C * d->R * d->S, err = 0.0;
  for (size_t i = 0; i < plan.y_floats; i++) {
    double e = fabs((double)yout[i] - (double)want[i]);
    if (!(e <= err)) err = e;  /* NaN-propagating max */
  }
  static const char *names[] = {"NCHW", "NCHWc", "NCHW_DIRECT", "NCHW_GEMM", "NCHW_STEM"};
  CHECK(err <= tol,
         "%s%s isa=%s nth=%d ic_bn=%d oc_bn=%d reg_n=%d unroll=%d reg_h=%d: err %g > %g",
         names[plan.layout], res ? " +residual" : "", hwt_isa_name(isa), nth, plan.p.ic_bn, plan.p.oc_bn, plan.p.reg_n,
         plan.p.unroll_ker, plan.p.reg_h, err, tol);
  for (int t = 0; t < nth; t++) free(ws[t]);
  free(ws);
  free(wp);
  free(y);
  free(xin);
  free(yout);
  free(rin);
}

static void run_case(const hwt_conv_desc *d, hwt_conv_layout layout, const hwt_conv_params *p,
                     hwt_isa isa, int nth, const float *x, const float *w, const float *bias,
                     const float *want) {
  run_case_res(d, layout, p, isa, nth, x, w, bias, NULL, want);
}

static void test_shape(hwt_conv_desc d) {
  conv_case c = conv_case_make(&d);
  if (!c.x) return;
  const float *x = c.x, *w = c.w, *b = c.b, *res = c.res, *want = c.want, *want_res = c.want_res;
  /* The residual epilogue runs at 2 threads. */
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    hwt_conv_knobs_t k;
    CHECK(hwt_conv_knobs(&d, (hwt_isa)isa, &k) == HWT_OK, "knobs");
    /* The last set is the Winograd template where the shape has it. */
    hwt_conv_params sets[4] = {
        {k.ic_bn.v[0], k.oc_bn.v[k.oc_bn.n - 1], k.reg_n.v[k.reg_n.n - 1], 1, 1, 0},
        {k.ic_bn.v[k.ic_bn.n - 1], k.oc_bn.v[0], k.reg_n.v[0], 0, k.reg_h.v[k.reg_h.n - 1], 0},
        {k.ic_bn.v[k.ic_bn.n / 2], k.oc_bn.v[k.oc_bn.n / 2], k.reg_n.v[k.reg_n.n / 2], 1,
         k.reg_h.v[k.reg_h.n - 1], 0},
        {k.ic_bn.v[k.ic_bn.n / 2], k.oc_bn.v[k.oc_bn.n - 1], k.reg_n.v[0], 0, 1,
         k.winograd.v[k.winograd.n - 1]},
    };
    for (int nth = 1; nth <= 3; nth++) {
      run_case(&d, HWT_CONV_NCHW_DIRECT, NULL, (hwt_isa)isa, nth, x, w, b, want);
      run_case(&d, HWT_CONV_NCHW, NULL, (hwt_isa)isa, nth, x, w, b, want);
      run_case(&d, HWT_CONV_NCHWC, NULL, (hwt_isa)isa, nth, x, w, b, want);
      for (int s = 0; s < 4; s++) {
        run_case(&d, HWT_CONV_NCHWC, &sets[s], (hwt_isa)isa, nth, x, w, b, want);
        run_case(&d, HWT_CONV_NCHW, &sets[s], (hwt_isa)isa, nth, x, w, b, want);
      }
    }
    /* A 1x1 CONV in one block of channels (ic_bn = C, oc_bn = K): the
     * channels-last GEMM (nhwc_gemm.c), whose weights also pack from the
     * blocked ones ([C][K]) to the same floats. */
    const hwt_conv_params one = {d.C, d.K, k.reg_n.v[0], 0, 1, 0};
    hwt_conv_plan np;
    if (hwt_conv_plan_make(&d, HWT_CONV_NCHWC, &one, (hwt_isa)isa, 3, &np) == HWT_OK &&
        np.nhwc_gemm) {
      for (int nth = 1; nth <= 3; nth++)
        run_case(&d, HWT_CONV_NCHWC, &one, (hwt_isa)isa, nth, x, w, b, want);
      run_case_res(&d, HWT_CONV_NCHWC, &one, (hwt_isa)isa, 2, x, w, b, res, want_res);
      float *wb = alloc_floats((size_t)d.K * d.C), *p1 = alloc_floats(np.w_floats),
            *p2 = alloc_floats(np.w_floats);
      memset(p1, 0, np.w_floats * sizeof(float));
      memset(p2, 0, np.w_floats * sizeof(float));
      CHECK(hwt_layout_oihw_to_blocked(d.K, d.C, 1, 1, d.C, d.K, w, wb) == HWT_OK, "blocked");
      CHECK(hwt_conv_pack_weights(&np, w, p1) == HWT_OK &&
                hwt_conv_pack_blocked_weights(&np, wb, p2) == HWT_OK &&
                memcmp(p1, p2, np.w_floats * sizeof(float)) == 0,
            "nhwc_gemm: packed from OIHW and from blocked weights differ");
      free(wb), free(p1), free(p2);
    }
    CHECK((d.R == 1 && d.S == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 &&
           d.pad_w == 0 && d.pad_h_end == 0 && d.pad_w_end == 0) ==
              (hwt_conv_plan_make(&d, HWT_CONV_NCHWC, &one, (hwt_isa)isa, 3, &np) == HWT_OK &&
               np.nhwc_gemm),
          "nhwc_gemm exactly for unpadded stride-1 1x1 CONVs with ic_bn = C, oc_bn = K");
    const hwt_conv_layout all[3] = {HWT_CONV_NCHW_DIRECT, HWT_CONV_NCHW, HWT_CONV_NCHWC};
    for (int l = 0; l < 3; l++) {
      run_case_res(&d, all[l], NULL, (hwt_isa)isa, 2, x, w, b, res, want_res);
      for (int s = 0; l && s < 3; s++)
        run_case_res(&d, all[l], &sets[s], (hwt_isa)isa, 2, x, w, b, res, want_res);
    }
  }
  conv_case_free(&c);
}

static void test_illegal(void) {
  hwt_conv_desc d = {1, 64, 14, 14, 32, 3, 3, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0};
  hwt_conv_plan plan;
  hwt_conv_params bad[] = {{3, 16, 7, 0, 1, 0},   {16, 0, 7, 0, 1, 0},  {16, 20, 7, 0, 1, 0},
                           {16, 16, 33, 0, 1, 0},  {16, 16, 13, 0, 1, 0}, {16, 16, 0, 0, 1, 0},
                           {16, 16, 7, 2, 1, 0},   {-16, 16, 7, 0, 1, 0}, {16, 16, 7, 0, 0, 0},
                           {16, 16, 7, 0, 3, 0},   {16, 16, 7, 0, 1, 1},  {16, 16, 7, 0, 1, 4}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHWC, &bad[i], HWT_ISA_GENERIC, 1, &plan) ==
               HWT_EINVAL, "bad params %zu accepted", i);
  /* d with one field (an int) set to an illegal value, a row each. */
  static const struct {
    size_t field;
    int value;
    const char *why;
  } illegal[] = {
      {offsetof(hwt_conv_desc, stride_h), 0, "stride 0"},
      {offsetof(hwt_conv_desc, dil_w), 0, "dilation 0"},
      {offsetof(hwt_conv_desc, pad_h_end), -1, "negative end padding"},
      /* 3 taps 8 apart span 17 rows > 14 + 2 */
      {offsetof(hwt_conv_desc, dil_h), 8, "dilated window larger than the input"},
      {offsetof(hwt_conv_desc, R), 17, "empty output"},
  };
  for (size_t i = 0; i < sizeof illegal / sizeof illegal[0]; i++) {
    hwt_conv_desc e = d;
    memcpy((char *)&e + illegal[i].field, &illegal[i].value, sizeof(int));
    CHECK(hwt_conv_plan_make(&e, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 1, &plan) == HWT_EINVAL,
          "%s", illegal[i].why);
  }
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 0, &plan) == HWT_EINVAL,
         "nth 0");
  /* Winograd only for 3x3 at stride 1 or 2 (both ways) without dilation. */
  hwt_conv_params wino = {16, 16, 7, 0, 1, 2};
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHWC, &wino, HWT_ISA_GENERIC, 1, &plan) == HWT_OK,
        "winograd 3x3 stride 1");
  hwt_conv_desc s2 = d;
  s2.stride_h = s2.stride_w = 2;
  CHECK(hwt_conv_plan_make(&s2, HWT_CONV_NCHWC, &wino, HWT_ISA_GENERIC, 1, &plan) == HWT_OK,
        "winograd 3x3 stride 2");
  for (int i = 0; i < 3; i++) {
    hwt_conv_desc e = d;
    if (i == 0) e.stride_w = 2;
    if (i == 1) e.dil_h = 2;
    if (i == 2) e.stride_h = e.stride_w = 3;
    CHECK(hwt_conv_plan_make(&e, HWT_CONV_NCHWC, &wino, HWT_ISA_GENERIC, 1, &plan) ==
              HWT_EINVAL, "winograd refused %d", i);
  }
  CHECK(hwt_conv_plan_make(&d, (hwt_conv_layout)7, NULL, HWT_ISA_GENERIC, 1, &plan) ==
             HWT_EINVAL, "layout 7");
  CHECK(hwt_layout_check(1, 24, 10, 5, 0) == HWT_EINVAL, "block 5 of 24");
}

/* A kernel wider than the template takes: NCHW with default params falls
 * back to the direct kernel (and says so), with params it is refused. */
/* Which 1x1 CONVs the NCHW plan runs as GEMMs: default params only, the
 * shape rule (stride 1, no padding, enough output channels), and an
 * explicit NCHW_GEMM request on another shape is refused. */
static void test_gemm_choice(void) {
  hwt_conv_desc d = {1, 16, 6, 6, 64, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  hwt_conv_plan plan;
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 2, &plan) == HWT_OK &&
            plan.layout == HWT_CONV_NCHW_GEMM && plan.w_floats == 64 * 16,
        "1x1 NCHW default runs as a GEMM");
  hwt_conv_params p;
  CHECK(hwt_conv_default_params(&d, HWT_ISA_GENERIC, &p) == HWT_OK, "default params");
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHW, &p, HWT_ISA_GENERIC, 2, &plan) == HWT_OK &&
            plan.layout == HWT_CONV_NCHW,
        "explicit params keep the template");
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHWC, NULL, HWT_ISA_GENERIC, 2, &plan) == HWT_OK &&
            plan.layout == HWT_CONV_NCHWC,
        "NCHWc keeps the template");
  hwt_conv_desc small = d, padded = d, strided = d;
  small.K = 16;
  padded.pad_h = padded.pad_h_end = 1;
  strided.stride_w = 2;
  /* A strided 1x1 runs the stride-1 plan of its subsampled input (here
   * 6x3 pixels: the GEMM), the plan keeping the real shape; asked for
   * NCHW_GEMM itself it is refused like the other shapes. */
  CHECK(hwt_conv_plan_make(&strided, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 2, &plan) ==
                HWT_OK &&
            plan.sub && plan.layout == HWT_CONV_NCHW_GEMM && plan.OH == 6 && plan.OW == 3 &&
            plan.d.W == 6 && plan.d.stride_w == 2 && plan.x_floats == 16 * 36,
        "strided 1x1: the GEMM over the subsampled input");
  const hwt_conv_desc *no[3] = {&small, &padded, &strided};
  for (int i = 0; i < 3; i++) {
    if (no[i] != &strided)
      CHECK(hwt_conv_plan_make(no[i], HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 1, &plan) ==
                    HWT_OK &&
                plan.layout == HWT_CONV_NCHW,
            "shape %d keeps the template", i);
    CHECK(hwt_conv_plan_make(no[i], HWT_CONV_NCHW_GEMM, NULL, HWT_ISA_GENERIC, 1, &plan) ==
              HWT_EINVAL,
          "shape %d refuses NCHW_GEMM", i);
  }
  /* Small images keep the template: 1x1 ones on every ISA; on AVX-512 up
   * to 196 pixels, a 7-pixel row flattened into one of 49 when its oc
   * blocks split evenly (K 64: 2 blocks of 32) but not over 3 threads. */
  hwt_conv_desc one = d, seven = d, fourteen = d, big = d;
  one.H = one.W = 1;
  seven.H = seven.W = 7;
  fourteen.H = fourteen.W = 14;
  big.H = big.W = 28;
  CHECK(hwt_conv_plan_make(&one, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 1, &plan) == HWT_OK &&
            plan.layout == HWT_CONV_NCHW && !plan.flat,
        "1x1 images run the template");
  if (hwt_isa_supported(HWT_ISA_AVX512)) {
    CHECK(hwt_conv_plan_make(&seven, HWT_CONV_NCHW, NULL, HWT_ISA_AVX512, 2, &plan) == HWT_OK &&
              plan.layout == HWT_CONV_NCHW && plan.flat && plan.OH == 7 && plan.OW == 7 &&
              plan.d.H == 7 && plan.d.W == 7,
          "7x7 flattened, the plan's shape kept");
    CHECK(hwt_conv_plan_make(&seven, HWT_CONV_NCHW, NULL, HWT_ISA_AVX512, 3, &plan) == HWT_OK &&
              plan.layout == HWT_CONV_NCHW && !plan.flat,
          "7x7 by rows when 2 oc blocks meet 3 threads");
    CHECK(hwt_conv_plan_make(&fourteen, HWT_CONV_NCHW, NULL, HWT_ISA_AVX512, 1, &plan) ==
                  HWT_OK &&
              plan.layout == HWT_CONV_NCHW && !plan.flat,
          "14x14 on the template, by rows");
    CHECK(hwt_conv_plan_make(&big, HWT_CONV_NCHW, NULL, HWT_ISA_AVX512, 1, &plan) == HWT_OK &&
              plan.layout == HWT_CONV_NCHW_GEMM,
          "28x28 a GEMM");
  }
}

static void test_direct_fallback(void) {
  hwt_conv_desc d = {1, 2, 3, 70, 3, 1, 65, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0};
  hwt_conv_plan plan;
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, 2, &plan) == HWT_OK &&
             plan.layout == HWT_CONV_NCHW_DIRECT, "S=65 falls back to direct");
  hwt_conv_params p = {1, 1, 1, 0, 1, 0};
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHW, &p, HWT_ISA_GENERIC, 1, &plan) == HWT_EINVAL,
         "S=65 with params");
  CHECK(hwt_conv_plan_make(&d, HWT_CONV_NCHWC, NULL, HWT_ISA_GENERIC, 1, &plan) == HWT_EINVAL,
         "S=65 blocked");
  size_t xn = (size_t)d.C * d.H * d.W, wn = (size_t)d.K * d.C * d.R * d.S;
  size_t yn = (size_t)d.K * 3 * 8;
  float *x = alloc_floats(xn), *w = alloc_floats(wn), *want = alloc_floats(yn);
  for (size_t i = 0; i < xn; i++) x[i] = frand();
  for (size_t i = 0; i < wn; i++) w[i] = frand();
  CHECK(hwt_conv_ref(&d, x, w, NULL, want) == HWT_OK, "ref");
  for (int nth = 1; nth <= 3; nth++)
    run_case(&d, HWT_CONV_NCHW, NULL, HWT_ISA_GENERIC, nth, x, w, NULL, want);
  free(x);
  free(w);
  free(want);
}

/* Activations NCHW -> NCHW[bi]c -> NCHW[bj]c -> NCHW with every ISA's
 * transposes, thread counts 3, 2, 1: the round trip is exact, and one
 * element of the blocked layout sits where NCHW[bi]c puts it. Shapes cover
 * blocks under and over the 8-lane transpose, pixel counts that are not
 * multiples of 8, and several 64-pixel tiles. */
static void layout_round_trip_case(int N, int C, long HW, const int *blocks, int nb) {
  size_t n = (size_t)N * C * HW;
  float *a = alloc_floats(n), *b = alloc_floats(n), *c = alloc_floats(n);
  for (size_t i = 0; i < n; i++) a[i] = (float)i;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int i = 0; i < nb; i++)
      for (int j = 0; j < nb; j++) {
        for (int t = 0; t < 3; t++)
          hwt_layout_run_part(N, C, HW, 0, blocks[i], a, b, t, 3, (hwt_isa)isa);
        for (int t = 0; t < 2; t++)
          hwt_layout_run_part(N, C, HW, blocks[i], blocks[j], b, c, t, 2, (hwt_isa)isa);
        memset(b, 0, n * sizeof(float));
        hwt_layout_run_part(N, C, HW, blocks[j], 0, c, b, 0, 1, (hwt_isa)isa);
        CHECK(memcmp(a, b, sizeof(float) * n) == 0, "round trip %d -> %d (C %d, HW %ld, %s)",
              blocks[i], blocks[j], C, HW, hwt_isa_name((hwt_isa)isa));
        /* Spot check the blocked layout itself: (n = N - 1, c = C / 2 + 1, hw = HW - 1). */
        hwt_layout_run_part(N, C, HW, 0, blocks[i], a, c, 0, 1, (hwt_isa)isa);
        int bn = blocks[i], cc = C / 2 + 1, nn = N - 1;
        long hw = HW - 1;
        float got = c[(((size_t)nn * (C / bn) + cc / bn) * HW + hw) * bn + cc % bn];
        CHECK(got == a[((size_t)nn * C + cc) * HW + hw], "NCHW[%d]c element (%s)", bn,
              hwt_isa_name((hwt_isa)isa));
      }
  }
  free(a); free(b); free(c);
}

static void test_layout_round_trip(void) {
  enum { C = 24, K = 12, R = 3, S = 5 };
  const int small[] = {1, 3, 8, 24}, wide[] = {4, 16, 32, 80};
  layout_round_trip_case(2, C, 35, small, 4);
  layout_round_trip_case(1, 160, 143, wide, 4);
  layout_round_trip_case(2, 16, 7, wide, 2);
  float *w = alloc_floats(K * C * R * S), *wb = alloc_floats(K * C * R * S),
        *w2 = alloc_floats(K * C * R * S);
  for (int i = 0; i < K * C * R * S; i++) w[i] = (float)i;
  CHECK(hwt_layout_oihw_to_blocked(K, C, R, S, 8, 4, w, wb) == HWT_OK, "block weights");
  CHECK(hwt_layout_blocked_to_oihw(K, C, R, S, 8, 4, wb, w2) == HWT_OK, "unblock weights");
  CHECK(memcmp(w, w2, sizeof(float) * K * C * R * S) == 0, "weight round trip");
  /* (k=5, c=10, r=2, s=3) lands in block (1, 1), row (2, 3), lane (2, 1). */
  CHECK(wb[((((size_t)1 * 3 + 1) * R + 2) * S + 3) * 32 + 2 * 4 + 1] ==
             w[(((size_t)5 * C + 10) * R + 2) * S + 3], "OIHW8i4o element");
  CHECK(hwt_layout_oihw_to_blocked(K, C, R, S, 5, 4, w, wb) == HWT_EINVAL, "ic_bn 5 of 24");
  free(w); free(wb); free(w2);
}

/* <conv(x), y> == <x, conv_transpose(y)> for random x, y: the transposed
 * reference is the adjoint of the conv reference (no bias). */
static void test_transpose_adjoint(hwt_conv_desc d) {
  int OH, OW;
  CHECK(hwt_conv_out_dims(&d, &OH, &OW) == HWT_OK, "out_dims");
  d.relu = 0;
  size_t xn = (size_t)d.N * d.C * d.H * d.W, wn = (size_t)d.K * d.C * d.R * d.S;
  size_t yn = (size_t)d.N * d.K * OH * OW;
  float *x = alloc_floats(xn), *w = alloc_floats(wn), *y = alloc_floats(yn);
  float *cx = alloc_floats(yn), *ty = alloc_floats(xn);
  for (size_t i = 0; i < xn; i++) x[i] = frand();
  for (size_t i = 0; i < wn; i++) w[i] = frand();
  for (size_t i = 0; i < yn; i++) y[i] = frand();
  CHECK(hwt_conv_ref(&d, x, w, NULL, cx) == HWT_OK, "ref");
  CHECK(hwt_conv_transpose_ref(&d, y, w, NULL, ty) == HWT_OK, "transpose ref");
  double a = 0.0, b = 0.0, scale = 0.0;
  for (size_t i = 0; i < yn; i++) a += (double)cx[i] * y[i], scale += fabs((double)cx[i] * y[i]);
  for (size_t i = 0; i < xn; i++) b += (double)x[i] * ty[i];
  CHECK(fabs(a - b) <= 1e-5 * (scale + 1.0), "adjoint: %g vs %g", a, b);
  free(x); free(w); free(y); free(cx); free(ty);
}

int main(void) {
  /* N, C, H, W, K, R, S, sh, sw, ph, pw, relu, dil_h, dil_w, pad_h_end, pad_w_end,
   * relu_max, act */
  test_shape((hwt_conv_desc){1, 3, 9, 9, 8, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){2, 5, 7, 10, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 20, 11, 13, 24, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 6, 12, 9, 10, 5, 5, 1, 1, 2, 2, 1, 1, 1, 2, 2, 0, 0});
  test_shape((hwt_conv_desc){1, 9, 4, 37, 34, 3, 3, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 4, 6, 7, 40, 3, 1, 2, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0});
  /* dilated: "same" padding, strided with unequal dilations, unpadded (the
   * NCHW input read in place) */
  test_shape((hwt_conv_desc){1, 6, 13, 12, 10, 3, 3, 1, 1, 2, 2, 0, 2, 2, 2, 2, 0, 0});
  test_shape((hwt_conv_desc){2, 5, 15, 17, 12, 3, 3, 2, 2, 1, 1, 1, 2, 3, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 8, 10, 11, 16, 3, 3, 1, 1, 0, 0, 0, 2, 2, 0, 0, 0, 0});
  /* asymmetric: TF "same" with an even kernel, strided "same" on an even
   * input, more before than after with dilation */
  test_shape((hwt_conv_desc){1, 7, 8, 9, 9, 2, 2, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 4, 10, 10, 8, 3, 3, 2, 2, 0, 0, 0, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 3, 9, 11, 5, 3, 4, 1, 2, 2, 3, 0, 2, 1, 0, 1, 0, 0});
  /* 1x1 stride 1 unpadded with >= 32 output channels: NCHW with default
   * params runs as GEMMs (two images; an odd K and pixel count; AVX-512
   * keeps these small images on the template, below) */
  test_shape((hwt_conv_desc){2, 20, 5, 9, 37, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 33, 4, 4, 64, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  /* An output past twice any host's L2 (64 x 16512 floats, 4.2 MB) under
   * an epilogue: the GEMM runs in column blocks (conv.c's pw_chunk), the
   * last one narrower than the others */
  test_shape((hwt_conv_desc){1, 24, 128, 129, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0});
  /* 1x1 on small images, where the variant keeps the template (AVX-512 up
   * to 196 pixels, every ISA at 1x1): two 7x7 images, a row narrower than
   * the register block so flattened to one row of 49 (5 oc blocks of 32:
   * by rows at 2 threads), 1x1 images with a clamp */
  test_shape((hwt_conv_desc){2, 40, 7, 7, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 48, 7, 7, 160, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){2, 72, 1, 1, 48, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 6.0f, 0});
  /* SiLU / HardSwish epilogues (act): every layout above, and the GEMM
   * path and Winograd (a 3x3 of 32 channels) with them. */
  test_shape((hwt_conv_desc){1, 3, 17, 19, 16, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0,
                             HWT_CONV_ACT_SILU});
  test_shape((hwt_conv_desc){2, 20, 5, 9, 37, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0,
                             HWT_CONV_ACT_HARD_SWISH});
  test_shape((hwt_conv_desc){1, 32, 6, 7, 32, 3, 3, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0,
                             HWT_CONV_ACT_SILU});
  /* stride-2 staging: rows wide enough for the both-phase vector pass,
   * with 3 and 0 leading padding columns and an odd width; a stride beyond
   * the phase ranges the plan caches (9 > 8) */
  test_shape((hwt_conv_desc){1, 5, 6, 41, 8, 3, 3, 2, 2, 3, 3, 0, 1, 1, 1, 2, 0, 0});
  test_shape((hwt_conv_desc){2, 4, 7, 37, 6, 3, 5, 2, 2, 0, 0, 1, 1, 1, 0, 1, 0, 0});
  test_shape((hwt_conv_desc){1, 3, 5, 60, 4, 1, 10, 1, 9, 0, 4, 0, 1, 1, 0, 4, 0, 0});
  /* strided 1x1 (ResNet's downsample projections): the stride-1 plan over
   * each thread's subsampled copy -- the GEMM (240 output pixels, so on
   * AVX-512 too), the template flattened (7x7) or by rows (K < 32), an odd
   * width (the pair-at-a-time phase copy's last column), unequal strides,
   * an activation */
  test_shape((hwt_conv_desc){2, 12, 31, 29, 40, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 24, 13, 13, 64, 1, 1, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 7, 9, 20, 12, 1, 1, 3, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 9, 10, 11, 33, 1, 1, 1, 2, 0, 0, 0, 1, 1, 0, 0, 0,
                             HWT_CONV_ACT_SILU});
  /* Winograd at stride 2 (5x5 patches; the default from 32 channels, with
   * the residual): odd sizes, no padding on an even width (the last input
   * column read by no tile), asymmetric padding with few channels */
  test_shape((hwt_conv_desc){1, 32, 13, 15, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  test_shape((hwt_conv_desc){2, 33, 8, 10, 32, 3, 3, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  test_shape((hwt_conv_desc){1, 7, 9, 9, 5, 3, 3, 2, 2, 2, 1, 0, 1, 1, 0, 3, 0, 0});
  test_transpose_adjoint((hwt_conv_desc){2, 3, 7, 8, 4, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0, 0});
  test_transpose_adjoint((hwt_conv_desc){1, 5, 9, 6, 3, 3, 2, 2, 1, 2, 0, 0, 2, 1, 0, 1, 0, 0});
  test_illegal();
  test_direct_fallback();
  test_gemm_choice();
  test_layout_round_trip();
  return check_verdict("test_conv: ok\n");
}
