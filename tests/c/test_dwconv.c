/* Depthwise CONV kernels (kernels/conv/dw*.c) on every ISA variant this
 * CPU runs against the plain-C grouped reference hwt_conv_group_ref: both
 * paths (channel-blocked for multiplier 1 on vector ISAs, rows otherwise),
 * 3x3 / 5x5 / 7x7 and odd kernels, stride 1 to 3, dilation, asymmetric
 * padding, channel counts off the vector width, a multiplier, bias /
 * residual / ReLU, thread shares run in a scrambled order at nth 1-3, with
 * outputs sized exactly (ASan sees a write past them); and the grouped
 * reference at group 1 against hwt_conv_ref_res. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/conv.h"
#include "hwtune/dwconv.h"
#include "hwtune/isa.h"
#include "check.h"

static float *filled(size_t n) {
  float *p = malloc(n * sizeof *p + 1);
  for (size_t i = 0; i < n; i++) p[i] = frand() * 2.0f;
  return p;
}

static float g_relu_max = INFINITY; /* the plans' clamp (ReLU6), INFINITY: none */

/* Runs plan p at 1 to 3 threads, each run's shares in a scrambled order
 * (no share may depend on another having run), and checks y against want
 * within tol of each value's magnitude (the first 3 misses reported). */
static void run_compare(const hwt_dwconv_plan *p, const float *x, const float *w,
                        const float *b, const float *res, float *y, const float *want, size_t ny,
                        double tol, int isa, const char *what) {
  float *ws = malloc(p->ws_floats * sizeof *ws + 1);
  for (int nth = 1; nth <= 3; nth++) {
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    for (int k = 0; k < nth; k++)
      hwt_dwconv_run_part(p, x, w, b, res, y, ws, (k * 5 + 3) % nth, nth);
    int bad = 0;
    for (size_t i = 0; i < ny && bad < 3; i++)
      if (!(fabs((double)y[i] - want[i]) <= tol * (1.0 + fabs(want[i])))) {
        CHECK(0, "%s isa=%d blocked=%d bn=%d nth=%d y[%zu]=%g want %g", what, isa, p->blocked,
              p->bn, nth, i, y[i], want[i]);
        bad++;
      }
  }
  free(ws);
}

/* group 0: depthwise (hwt_dwconv_plan_make); else hwt_gconv_plan_make's
 * small groups, on the ISAs that take them. */
static void check_group(hwt_conv_desc d, int group, int with_bias, int with_res,
                        const char *what) {
  int OH, OW;
  CHECK(hwt_conv_out_dims(&d, &OH, &OW) == HWT_OK, "%s: dims", what);
  const size_t nx = (size_t)d.N * d.C * d.H * d.W, ny = (size_t)d.N * d.K * OH * OW;
  const int g = group ? group : d.C;
  const size_t nw = (size_t)d.K * (d.C / g) * d.R * d.S;
  float *x = filled(nx), *w = filled(nw), *b = with_bias ? filled((size_t)d.K) : NULL;
  float *res = with_res ? filled(ny) : NULL, *want = malloc(ny * sizeof *want + 1);
  float *y = malloc(ny * sizeof *y + 1);
  CHECK(hwt_conv_group_ref(&d, g, x, w, b, res, want) == HWT_OK, "%s: ref", what);
  for (size_t i = 0; i < ny; i++)
    if (d.relu && want[i] > g_relu_max) want[i] = g_relu_max;
  /* float sums of cg*R*S products of |x|, |w| < 2 (+ bias, residual) against
   * double ones: a few ulps of the sum of |terms| */
  const double tol = ((d.C / g) * d.R * d.S + 2) * 4.0 * 0x1p-24 * 8.0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    hwt_dwconv_plan p;
    if (group) {
      const int st = hwt_gconv_plan_make(&d, group, (hwt_isa)isa, &p);
      CHECK(st == (isa == HWT_ISA_GENERIC ? HWT_EINVAL : HWT_OK), "%s: plan %d", what, st);
      if (st != HWT_OK) continue;
    } else {
      CHECK(hwt_dwconv_plan_make(&d, (hwt_isa)isa, &p) == HWT_OK, "%s: plan", what);
    }
    CHECK(p.OH == OH && p.OW == OW, "%s", what);
    p.relu_max = g_relu_max;
    run_compare(&p, x, w, b, res, y, want, ny, tol, isa, what);
  }
  free(x), free(w), free(b), free(res), free(want), free(y);
}

static void check(hwt_conv_desc d, int with_bias, int with_res, const char *what) {
  check_group(d, 0, with_bias, with_res, what);
}

/* NCHW [N][C][HW] <-> NCHW[bn]c [N][C/bn][HW][bn]. */
static void to_blocked(const float *src, float *dst, int n, int c, long hw, int bn) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < c; k++)
      for (long p = 0; p < hw; p++)
        dst[(((long)i * (c / bn) + k / bn) * hw + p) * bn + k % bn] =
            src[((long)i * c + k) * hw + p];
}

/* The NCHW[bn]c entry (hwt_dwconv_plan_nchwc) against the reference on
 * re-blocked tensors. */
static void check_nchwc(hwt_conv_desc d, int bn, int with_res, const char *what) {
  int OH, OW;
  CHECK(hwt_conv_out_dims(&d, &OH, &OW) == HWT_OK, "%s: dims", what);
  const long hw = (long)d.H * d.W, ohw = (long)OH * OW;
  const size_t nx = (size_t)d.N * d.C * hw, ny = (size_t)d.N * d.C * ohw;
  float *x = filled(nx), *w = filled((size_t)d.C * d.R * d.S), *b = filled((size_t)d.C);
  float *res = with_res ? filled(ny) : NULL, *want = malloc(ny * sizeof *want + 1);
  float *xb = malloc(nx * sizeof *xb + 1), *rb = with_res ? malloc(ny * sizeof *rb + 1) : NULL;
  float *wantb = malloc(ny * sizeof *wantb + 1), *y = malloc(ny * sizeof *y + 1);
  CHECK(hwt_conv_group_ref(&d, d.C, x, w, b, res, want) == HWT_OK, "%s: ref", what);
  to_blocked(x, xb, d.N, d.C, hw, bn);
  to_blocked(want, wantb, d.N, d.C, ohw, bn);
  if (res) to_blocked(res, rb, d.N, d.C, ohw, bn);
  const double tol = (d.R * d.S + 2) * 4.0 * 0x1p-24 * 8.0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    hwt_dwconv_plan p;
    CHECK(hwt_dwconv_plan_nchwc(&d, bn, (hwt_isa)isa, &p) == HWT_OK, "%s: plan", what);
    run_compare(&p, xb, w, b, rb, y, wantb, ny, tol, isa, what);
  }
  free(x), free(w), free(b), free(res), free(want), free(xb), free(rb), free(wantb), free(y);
}

static hwt_conv_desc desc(int n, int c, int h, int w, int mult, int r, int s, int stride,
                          int pad, int dil) {
  hwt_conv_desc d = {0};
  d.N = n, d.C = c, d.H = h, d.W = w, d.K = c * mult, d.R = r, d.S = s;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = d.pad_h_end = d.pad_w_end = pad;
  d.dil_h = d.dil_w = dil;
  return d;
}

int main(void) {
  check(desc(1, 32, 20, 21, 1, 3, 3, 1, 1, 1), 1, 0, "3x3 s1");
  check(desc(2, 19, 15, 17, 1, 3, 3, 2, 1, 1), 1, 0, "3x3 s2, 19 channels");
  check(desc(1, 40, 9, 9, 1, 5, 5, 2, 2, 1), 1, 1, "5x5 s2 residual");
  check(desc(1, 24, 7, 7, 1, 7, 7, 1, 3, 1), 0, 0, "7x7 on 7x7");
  check(desc(1, 17, 40, 45, 1, 3, 3, 1, 2, 2), 1, 0, "dilated, wide rows");
  check(desc(1, 5, 11, 13, 3, 3, 3, 1, 1, 1), 1, 1, "multiplier 3 (rows path)");
  check(desc(1, 6, 12, 14, 2, 2, 4, 3, 1, 1), 1, 0, "2x4 stride 3, multiplier 2");
  check(desc(1, 3, 5, 5, 1, 1, 1, 1, 0, 1), 1, 0, "1x1");
  hwt_conv_desc a = desc(1, 16, 13, 11, 1, 3, 3, 2, 0, 1);
  a.pad_h = 1, a.pad_w = 2, a.pad_h_end = 0, a.pad_w_end = 1, a.dil_w = 2;
  check(a, 1, 0, "asymmetric padding");
  a.relu = 1;
  check(a, 1, 1, "asymmetric padding, residual + ReLU");
  hwt_conv_desc big_pad = desc(1, 8, 3, 3, 1, 5, 5, 1, 4, 1);
  check(big_pad, 1, 0, "padding wider than the input");
  /* Small groups (K == C) by lane permutes: 2, 4 and 8 channels a group,
   * a channel tail past the last full vector, stride 2, 5x5, epilogue. */
  check_group(desc(1, 32, 14, 15, 1, 3, 3, 1, 1, 1), 8, 1, 0, "32 ch in groups of 4");
  check_group(desc(2, 24, 9, 11, 1, 3, 3, 2, 1, 1), 3, 1, 1, "24 ch in groups of 8, s2");
  /* Groups as wide as the vector at stride 1 go to the dense template
   * (AVX2's 8); on AVX-512 two such groups share a vector and stay. */
  {
    hwt_conv_desc g8 = desc(1, 32, 10, 10, 1, 3, 3, 1, 1, 1);
    for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
      if (!hwt_isa_supported((hwt_isa)isa)) continue;
      hwt_dwconv_plan p8;
      const int st = hwt_gconv_plan_make(&g8, 4, (hwt_isa)isa, &p8);
      CHECK(st == (isa == HWT_ISA_AVX512 ? HWT_OK : HWT_EINVAL),
            "groups of 8 at stride 1, isa %d: %d", isa, st);
    }
  }
  check_group(desc(1, 18, 8, 7, 1, 5, 5, 1, 2, 1), 9, 0, 0, "18 ch in groups of 2, 5x5");
  hwt_conv_desc gr = desc(1, 40, 6, 9, 1, 3, 3, 1, 1, 2);
  gr.relu = 1;
  check_group(gr, 10, 1, 1, "40 ch in groups of 4, dilated, residual + ReLU");
  hwt_dwconv_plan gp;
  CHECK(hwt_gconv_plan_make(&gr, 2, HWT_ISA_GENERIC, &gp) == HWT_EINVAL, "groups of 20");
  /* NCHW[bn]c activations: blocks below, at and above the vector width;
   * channels-last (bn = C): a chunk of rows through every vector of the
   * block, in groups of vectors when the rows are few (7 rows of 96
   * channels), a last vector part-filled (40 = 16 + 16 + 8). */
  const struct {
    hwt_conv_desc d;
    int bn, with_res;
    const char *what;
  } blocked[] = {
      {desc(2, 32, 9, 10, 1, 3, 3, 1, 1, 1), 16, 0, "NCHW16c"},
      {desc(1, 24, 11, 11, 1, 5, 5, 2, 2, 1), 8, 1, "NCHW8c 5x5 s2, residual"},
      {desc(1, 64, 7, 7, 1, 3, 3, 1, 1, 2), 32, 1, "NCHW32c dilated, residual"},
      {desc(1, 12, 6, 9, 1, 3, 3, 1, 1, 1), 4, 0, "NCHW4c"},
      {desc(1, 96, 7, 7, 1, 3, 3, 1, 1, 1), 96, 1, "NHWC 96, 7 rows, residual"},
      {desc(2, 40, 20, 18, 1, 3, 3, 2, 1, 1), 40, 0, "NHWC 40 s2"},
      {desc(1, 48, 15, 13, 1, 5, 5, 1, 2, 1), 48, 1, "NHWC 48 5x5, residual"},
  };
  for (size_t i = 0; i < sizeof blocked / sizeof *blocked; i++)
    check_nchwc(blocked[i].d, blocked[i].bn, blocked[i].with_res, blocked[i].what);
  hwt_dwconv_plan np;
  CHECK(hwt_dwconv_plan_nchwc(&gr, 16, HWT_ISA_GENERIC, &np) == HWT_EINVAL, "16 of 40");
  /* ReLU6's clamp after the ReLU, both paths, with and without residual. */
  g_relu_max = 1.0f;
  hwt_conv_desc c6 = desc(1, 20, 9, 10, 1, 3, 3, 1, 1, 1);
  c6.relu = 1;
  check(c6, 1, 0, "ReLU6 blocked");
  check(c6, 1, 1, "ReLU6 blocked, residual");
  c6.K = 40;
  check(c6, 1, 1, "ReLU6 rows (multiplier 2), residual");
  g_relu_max = INFINITY;
  /* SiLU / HardSwish (act) on both paths and NCHW[bn]c, with and without
   * residual (the reference applies the element-wise references). */
  hwt_conv_desc ca = desc(1, 20, 9, 10, 1, 3, 3, 1, 1, 1);
  ca.act = HWT_CONV_ACT_SILU;
  check(ca, 1, 0, "SiLU blocked");
  check(ca, 1, 1, "SiLU blocked, residual");
  check_nchwc(ca, 4, 1, "SiLU NCHW4c, residual");
  /* Rows narrower than HWT_DW_NARROW_W staged by one transpose of a
   * chunk's rows, here in several chunks and output groups (7 columns:
   * 36 rows a group), and EfficientNet's 14x14 5x5 stride 2 form. */
  hwt_conv_desc nr = desc(1, 32, 300, 7, 1, 3, 3, 1, 1, 1);
  nr.act = HWT_CONV_ACT_SILU;
  check(nr, 1, 0, "SiLU, 7-column rows in several chunks");
  check(nr, 1, 1, "SiLU, 7-column rows in several chunks, residual");
  hwt_conv_desc n14 = desc(2, 48, 14, 14, 1, 5, 5, 2, 2, 1);
  n14.act = HWT_CONV_ACT_SILU;
  check(n14, 1, 0, "SiLU, 14x14 5x5 stride 2");
  check_nchwc(n14, 16, 0, "SiLU NCHW16c, 14x14 5x5 stride 2");
  ca.act = HWT_CONV_ACT_HARD_SWISH;
  check_nchwc(ca, 20, 0, "HardSwish NCHW20c");
  ca.K = 40;
  check(ca, 1, 1, "HardSwish rows (multiplier 2), residual");

  /* The grouped reference at group 1 is the dense reference. */
  hwt_conv_desc g = desc(1, 6, 7, 8, 1, 3, 3, 1, 1, 1);
  g.K = 5;
  g.relu = 1;
  float *x = filled(6 * 7 * 8), *w = filled(5 * 6 * 9), *b = filled(5), *r = filled(5 * 56);
  float y0[5 * 56], y1[5 * 56];
  CHECK(hwt_conv_ref_res(&g, x, w, b, r, y0) == HWT_OK);
  CHECK(hwt_conv_group_ref(&g, 1, x, w, b, r, y1) == HWT_OK);
  CHECK(memcmp(y0, y1, sizeof y0) == 0, "group 1 differs from hwt_conv_ref_res");
  CHECK(hwt_conv_group_ref(&g, 4, x, w, b, r, y1) == HWT_EINVAL, "group 4 of 6 channels");
  /* Not depthwise: refused. */
  hwt_dwconv_plan p;
  CHECK(hwt_dwconv_plan_make(&g, HWT_ISA_GENERIC, &p) == HWT_EINVAL, "K=5 of C=6");
  free(x), free(w), free(b), free(r);
  return check_verdict("dwconv: ok\n");
}
