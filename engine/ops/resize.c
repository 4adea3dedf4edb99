/* Resize op family: resize (nearest / bilinear resampling of H and W of an
 * NCHW tensor; semantics in src/hwtune/graph/ops/resize.py, the numpy
 * reference this file matches bit for bit).
 *
 * prepare computes per output row and column the source indices (nearest)
 * or the two neighbours and the float weight (linear), in double exactly as
 * the reference does. run shares the N*C*OH output rows over the threads;
 * a linear row first blends its two source rows into the thread's
 * workspace, t = r0 + wy (r1 - r0) (a plain loop over W the compiler
 * vectorises), then blends along the row through the column taps. */
#include <math.h>
#include <stdlib.h>
#include "ops_util.h"

typedef struct {
  int linear;
  int64_t planes, h, w, oh, ow;
  int64_t *y0, *y1, *x0, *x1; /* nearest: y0 / x0 only */
  float *wy, *wx;
} resize_state;

enum { T_HALF_PIXEL, T_PYTORCH_HALF_PIXEL, T_ALIGN_CORNERS, T_ASYMMETRIC };
enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL };

static double source_coord(int64_t x, int64_t n_in, int64_t n_out, double scale, int t) {
  switch (t) {
    case T_ALIGN_CORNERS:
      return n_out == 1 ? 0.0 : (double)x * (double)(n_in - 1) / (double)(n_out - 1);
    case T_ASYMMETRIC: return (double)x / scale;
    case T_PYTORCH_HALF_PIXEL:
      if (n_out == 1) return 0.0;
      /* fall through */
    default: return ((double)x + 0.5) / scale - 0.5;
  }
}

static int64_t clamp_index(double v, int64_t n) {
  return v < 0.0 ? 0 : v > (double)(n - 1) ? n - 1 : (int64_t)v;
}

/* One axis' tables: nearest fills i0; linear i0, i1 and w. */
static void axis_tables(int linear, int nearest, int t, int64_t n_in, int64_t n_out,
                        double scale, int64_t *i0, int64_t *i1, float *w) {
  for (int64_t x = 0; x < n_out; x++) {
    double c = source_coord(x, n_in, n_out, scale, t);
    if (!linear) {
      double f = floor(c), v;
      if (nearest == N_FLOOR) v = f;
      else if (nearest == N_CEIL) v = ceil(c);
      else if (c - f == 0.5) v = nearest == N_ROUND_PREFER_FLOOR ? f : f + 1.0;
      else v = floor(c + 0.5);
      i0[x] = clamp_index(v, n_in);
      continue;
    }
    c = c < 0.0 ? 0.0 : c > (double)(n_in - 1) ? (double)(n_in - 1) : c;
    double f = floor(c);
    i0[x] = (int64_t)f;
    i1[x] = i0[x] + 1 < n_in ? i0[x] + 1 : n_in - 1;
    w[x] = (float)(c - f);
  }
}

static int pick(const hwt_op_ctx *ctx, const char *key, const char *const *names, int n,
                int def) {
  if (hwt_graph_op_attr_kind(ctx->g, ctx->op, key) == HWT_ATTR_NONE) return def;
  for (int i = 0; i < n; i++)
    if (hwt_ops_str_is(ctx, key, names[i], 0)) return i;
  return -1;
}

static void resize_release(hwt_op_ctx *ctx) {
  resize_state *s = ctx->state;
  if (s) free(s->y0), free(s->y1), free(s->x0), free(s->x1), free(s->wy), free(s->wx);
  free(s);
  ctx->state = NULL;
}

static int resize_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  static const char *const modes[] = {"nearest", "linear"};
  static const char *const transforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                           "asymmetric"};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};
  int rank = 0;
  if (ctx->n_in != 1 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "resize takes one input and one output");
  const int64_t *xs = hwt_ops_in_shape(ctx, 0, &rank);
  const int64_t *ys = hwt_graph_tensor_shape(ctx->g, hwt_ops_out(ctx, 0));
  if (rank != 4 || hwt_graph_tensor_ndim(ctx->g, hwt_ops_out(ctx, 0)) != 4 || ys[0] != xs[0] ||
      ys[1] != xs[1])
    return hwt_ops_fail(err, errlen, ctx, "resize takes an NCHW tensor and keeps N and C");
  const int mode = pick(ctx, "mode", modes, 2, 0);
  const int t = pick(ctx, "coordinate_transformation_mode", transforms, 4, T_HALF_PIXEL);
  const int nearest = pick(ctx, "nearest_mode", nearests, 4, N_ROUND_PREFER_FLOOR);
  if (mode < 0 || t < 0 || nearest < 0)
    return hwt_ops_fail(err, errlen, ctx, "unknown mode, coordinate_transformation_mode or "
                                          "nearest_mode");
  resize_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->linear = mode == 1;
  s->planes = xs[0] * xs[1], s->h = xs[2], s->w = xs[3], s->oh = ys[2], s->ow = ys[3];
  const double sh = hwt_ops_float(ctx, "scale_h", (double)s->oh / (double)s->h);
  const double sw = hwt_ops_float(ctx, "scale_w", (double)s->ow / (double)s->w);
  ctx->state = s;
  if (!(sh > 0.0) || !(sw > 0.0)) {
    resize_release(ctx);
    return hwt_ops_fail(err, errlen, ctx, "scales must be positive");
  }
  s->y0 = malloc((size_t)s->oh * sizeof *s->y0);
  s->x0 = malloc((size_t)s->ow * sizeof *s->x0);
  if (s->linear) {
    s->y1 = malloc((size_t)s->oh * sizeof *s->y1);
    s->x1 = malloc((size_t)s->ow * sizeof *s->x1);
    s->wy = malloc((size_t)s->oh * sizeof *s->wy);
    s->wx = malloc((size_t)s->ow * sizeof *s->wx);
  }
  if (!s->y0 || !s->x0 || (s->linear && (!s->y1 || !s->x1 || !s->wy || !s->wx))) {
    resize_release(ctx);
    return HWT_ENOMEM;
  }
  axis_tables(s->linear, nearest, t, s->h, s->oh, sh, s->y0, s->y1, s->wy);
  axis_tables(s->linear, nearest, t, s->w, s->ow, sw, s->x0, s->x1, s->wx);
  const double out = (double)(s->planes * s->oh * s->ow);
  return hwt_ops_prepared(ctx, s, s->linear ? (size_t)s->w : 0, s->linear ? 6.0 * out : 0.0);
}

static void resize_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const resize_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * s->oh, tid, nth, &lo, &hi);
  const int64_t w = s->w, ow = s->ow;
  for (int64_t r = lo; r < hi; r++) {
    const int64_t p = r / s->oh, oy = r % s->oh;
    const float *plane = ctx->in[0] + p * s->h * w;
    float *y = ctx->out[0] + r * ow;
    if (!s->linear) {
      const float *src = plane + s->y0[oy] * w;
      for (int64_t i = 0; i < ow; i++) y[i] = src[s->x0[i]];
      continue;
    }
    const float *r0 = plane + s->y0[oy] * w, *r1 = plane + s->y1[oy] * w;
    const float wy = s->wy[oy];
    for (int64_t i = 0; i < w; i++) ws[i] = r0[i] + wy * (r1[i] - r0[i]);
    for (int64_t i = 0; i < ow; i++) {
      const float a = ws[s->x0[i]], b = ws[s->x1[i]];
      y[i] = a + s->wx[i] * (b - a);
    }
  }
}

static const hwt_op_impl k_resize[] = {
    {"resize", resize_prepare, resize_run, resize_release},
};

HWT_OPS_FAMILY(hwt_ops_resize, k_resize)
