/* resize and argmax op families vs plain-C oracles written per element
 * (the coordinate of each output position from the ONNX formulas, no
 * tables; argmax by a scan per position): every mode, coordinate transform
 * and nearest mode, up- and downsampling, odd sizes, nth 1-4, every ISA
 * variant this CPU runs (the ops are plain C: the same results on each). */
#include "ops_test_util.h"

static const char *const k_modes[] = {"nearest", "linear"};
static const char *const k_transforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                           "asymmetric"};
static const char *const k_nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil"};

static void set_str(hwt_graph *g, int op, const char *key, const char *s) {
  int64_t codes[32];
  int n = (int)strlen(s);
  for (int i = 0; i < n; i++) codes[i] = (unsigned char)s[i];
  hwt_graph_op_set_ints(g, op, key, n, codes);
}

static double coord(int64_t x, int64_t n_in, int64_t n_out, double scale, int t) {
  if (t == 2) return n_out == 1 ? 0.0 : (double)x * (double)(n_in - 1) / (double)(n_out - 1);
  if (t == 3) return (double)x / scale;
  if (t == 1 && n_out == 1) return 0.0;
  return ((double)x + 0.5) / scale - 0.5;
}

static int64_t nearest_of(double c, int64_t n_in, int nm) {
  double f = floor(c), v;
  if (nm == 2) v = f;
  else if (nm == 3) v = ceil(c);
  else if (c - f == 0.5) v = nm == 0 ? f : f + 1.0;
  else v = floor(c + 0.5);
  if (v < 0) v = 0;
  if (v > (double)(n_in - 1)) v = (double)(n_in - 1);
  return (int64_t)v;
}

static void taps(double c, int64_t n_in, int64_t *i0, int64_t *i1, float *w) {
  if (c < 0) c = 0;
  if (c > (double)(n_in - 1)) c = (double)(n_in - 1);
  *i0 = (int64_t)floor(c);
  *i1 = *i0 + 1 < n_in ? *i0 + 1 : n_in - 1;
  *w = (float)(c - floor(c));
}

static int64_t check_resize(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow,
                            int mode, int t, int nm, double sh, double sw) {
  const int rank[1] = {4};
  const int64_t xs[1][HWT_GRAPH_MAX_DIMS] = {{n, c, h, w}}, ys[1][HWT_GRAPH_MAX_DIMS] = {
                                                                {n, c, oh, ow}};
  one_op op;
  one_op_build(&op, "resize", 1, rank, xs, 1, rank, ys);
  set_str(op.g, op.op, "mode", k_modes[mode]);
  set_str(op.g, op.op, "coordinate_transformation_mode", k_transforms[t]);
  set_str(op.g, op.op, "nearest_mode", k_nearest[nm]);
  if (sh > 0) hwt_graph_op_set_floats(op.g, op.op, "scale_h", 1, &sh);
  if (sw > 0) hwt_graph_op_set_floats(op.g, op.op, "scale_w", 1, &sw);
  const double ssh = sh > 0 ? sh : (double)oh / (double)h;
  const double ssw = sw > 0 ? sw : (double)ow / (double)w;
  float *want = alloc_floats(op.out_n[0]);
  for (int64_t p = 0; p < n * c; p++)
    for (int64_t y = 0; y < oh; y++)
      for (int64_t x = 0; x < ow; x++) {
        const float *src = op.in[0] + p * h * w;
        double cy = coord(y, h, oh, ssh, t), cx = coord(x, w, ow, ssw, t);
        float v;
        if (mode == 0) {
          v = src[nearest_of(cy, h, nm) * w + nearest_of(cx, w, nm)];
        } else {
          int64_t y0, y1, x0, x1;
          float wy, wx;
          taps(cy, h, &y0, &y1, &wy);
          taps(cx, w, &x0, &x1, &wx);
          float a = src[y0 * w + x0] + wy * (src[y1 * w + x0] - src[y0 * w + x0]);
          float b = src[y0 * w + x1] + wy * (src[y1 * w + x1] - src[y0 * w + x1]);
          v = a + wx * (b - a);
        }
        want[(p * oh + y) * ow + x] = v;
      }
  float *wants[1] = {want};
  char what[160];
  snprintf(what, sizeof what, "resize %s %s %s %lldx%lld->%lldx%lld", k_modes[mode],
           k_transforms[t], k_nearest[nm], (long long)h, (long long)w, (long long)oh,
           (long long)ow);
  int64_t bad = 0;
  char err[256];
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int nth = 1; nth <= 4; nth++) {
      if (one_op_run(&op, (hwt_isa)isa, nth, err, sizeof err) != HWT_OK) {
        fprintf(stderr, "%s: prepare failed: %s\n", what, err);
        bad++;
        break;
      }
      bad += compare(what, op.out[0], wants[0], op.out_n[0], 0.0, 0.0);
    }
  }
  free(want);
  one_op_free(&op);
  return bad;
}

static int64_t check_argmax(int64_t a, int64_t k, int64_t b, int last) {
  const int in_rank[1] = {3}, out_rank[1] = {3};
  const int64_t xs[1][HWT_GRAPH_MAX_DIMS] = {{a, k, b}}, ys[1][HWT_GRAPH_MAX_DIMS] = {{a, 1, b}};
  one_op op;
  one_op_build(&op, "argmax", 1, in_rank, xs, 1, out_rank, ys);
  const int64_t axis = 1, sel = last;
  hwt_graph_op_set_ints(op.g, op.op, "axis", 1, &axis);
  hwt_graph_op_set_ints(op.g, op.op, "select_last_index", 1, &sel);
  for (int64_t i = 0; i < op.in_n[0]; i++) op.in[0][i] = (float)rnd_int(0, 3); /* ties */
  float *want = alloc_floats(op.out_n[0]);
  for (int64_t o = 0; o < a; o++)
    for (int64_t i = 0; i < b; i++) {
      int64_t best = 0;
      for (int64_t j = 1; j < k; j++) {
        float v = op.in[0][(o * k + j) * b + i], bv = op.in[0][(o * k + best) * b + i];
        if (v > bv || (last && v == bv)) best = j;
      }
      want[o * b + i] = (float)best;
    }
  float *wants[1] = {want};
  int64_t bad = one_op_check(&op, wants, last ? "argmax last" : "argmax", 0.0);
  free(want);
  one_op_free(&op);
  return bad;
}

int main(void) {
  int n = 0;
  hwt_ops_resize(&n); /* strong references: see link_families */
  hwt_ops_argmax(&n);
  int64_t bad = 0;
  const int64_t sizes[][4] = {{7, 6, 14, 12}, {7, 6, 3, 4}, {5, 9, 11, 1}, {1, 4, 3, 17},
                              {6, 6, 6, 6}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int mode = 0; mode < 2; mode++)
      for (int t = 0; t < 4; t++)
        for (int nm = 0; nm < (mode == 0 ? 4 : 1); nm++) {
          const int64_t *z = sizes[s];
          bad += check_resize(2, 3, z[0], z[1], z[2], z[3], mode, t, nm, -1.0, -1.0);
        }
  /* given scales (coordinates from the scale, not out / in) */
  bad += check_resize(1, 2, 7, 5, 10, 12, 1, 3, 0, 1.5, 2.5);
  bad += check_resize(1, 2, 7, 5, 10, 12, 0, 0, 1, 1.5, 2.5);
  for (int last = 0; last < 2; last++) {
    bad += check_argmax(3, 7, 5, last);
    bad += check_argmax(1, 9, 1, last);
    bad += check_argmax(4, 1, 3, last);
  }
  return one_op_verdict(bad);
}
