/* Pooling op family: pool2d (max/avg window) and global_pool2d, NCHW or
 * NCHW[x]c. Channels are independent, so both layouts are "planes" of H x W
 * positions holding b adjacent channels (b = 1 for NCHW, x for NCHWc).
 * Averages accumulate in double, as the reference does: a 7x7 window of
 * mixed-sign values cancels enough to lose float digits. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include "ops_util.h"

typedef struct {
  int is_max, include_pad;
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t planes, h, w, b, oh, ow;
} pool_state;

static int64_t out_len(int64_t size, int64_t k, int64_t s, int64_t p, int ceil_mode) {
  int64_t span = size + 2 * p - k;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  /* a ceil-mode window must start inside the input or its left padding */
  if (ceil_mode && (out - 1) * s >= size + p) out--;
  return out;
}

static int read_geometry(hwt_op_ctx *ctx, pool_state *s, char *err, size_t errlen) {
  int x = hwt_ops_in(ctx, 0), y = hwt_ops_out(ctx, 0);
  int blocked = hwt_ops_str_is(ctx, "layout", "NCHWc", 0);
  int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  if (ctx->n_in != 1 || ctx->n_out != 1 || rank != (blocked ? 5 : 4) ||
      hwt_graph_tensor_ndim(ctx->g, y) != rank)
    return hwt_ops_fail(err, errlen, ctx, "pooling takes one NCHW or NCHWc tensor");
  s->is_max = hwt_ops_str_is(ctx, "mode", "max", 0);
  if (!s->is_max && !hwt_ops_str_is(ctx, "mode", "avg", 0))
    return hwt_ops_fail(err, errlen, ctx, "mode must be max or avg");
  s->planes = xs[0] * xs[1];
  s->h = xs[2];
  s->w = xs[3];
  s->b = blocked ? xs[4] : 1;
  return HWT_OK;
}

static int pool_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state st = {0};
  int rc = read_geometry(ctx, &st, err, errlen);
  if (rc != HWT_OK) return rc;
  int64_t k[2], s[2], p[2] = {0, 0};
  if (hwt_ops_pair(ctx, "kernel", k)) return hwt_ops_fail(err, errlen, ctx, "kernel is missing");
  if (hwt_ops_pair(ctx, "stride", s)) s[0] = k[0], s[1] = k[1];
  hwt_ops_pair(ctx, "padding", p);
  st.kh = k[0], st.kw = k[1], st.sh = s[0], st.sw = s[1], st.ph = p[0], st.pw = p[1];
  if (st.kh < 1 || st.kw < 1 || st.sh < 1 || st.sw < 1 || 2 * st.ph > st.kh ||
      2 * st.pw > st.kw || st.kh > st.h + 2 * st.ph || st.kw > st.w + 2 * st.pw)
    return hwt_ops_fail(err, errlen, ctx, "bad window, stride or padding");
  int ceil_mode = (int)hwt_ops_int(ctx, "ceil_mode", 0);
  st.include_pad = (int)hwt_ops_int(ctx, "count_include_pad", 0);
  st.oh = out_len(st.h, st.kh, st.sh, st.ph, ceil_mode);
  st.ow = out_len(st.w, st.kw, st.sw, st.pw, ceil_mode);
  const int64_t *ys = hwt_graph_tensor_shape(ctx->g, hwt_ops_out(ctx, 0));
  if (ys[2] != st.oh || ys[3] != st.ow)
    return hwt_ops_fail(err, errlen, ctx, "output shape does not match the window");
  pool_state *heap = malloc(sizeof *heap);
  if (!heap) return HWT_ENOMEM;
  *heap = st;
  ctx->state = heap;
  ctx->ws_floats = (size_t)(2 * st.b); /* b double accumulators */
  ctx->flops = (double)(st.planes * st.b * st.oh * st.ow * st.kh * st.kw);
  return HWT_OK;
}

/* One output row (plane, oh) of ow x b values. The b channels of a
 * position are innermost so the NCHWc case runs b-wide vector max/adds;
 * acc holds b doubles (the thread's workspace). Max is branchless (maxss)
 * with NaN tracked on the side: `v > m || isnan(v)` as a branch cost ~5 ns
 * per window element on random data (8.9 ms for a 3x3/2 pool of
 * 64x112x112, one thread). */
static void pool_row(const pool_state *s, const float *x, float *y, int64_t oh, double *acc) {
  const int64_t b = s->b;
  const int64_t h0 = oh * s->sh - s->ph;
  const int64_t ha = h0 < 0 ? 0 : h0, hb = h0 + s->kh < s->h ? h0 + s->kh : s->h;
  const int64_t hpad = (h0 + s->kh < s->h + s->ph ? h0 + s->kh : s->h + s->ph) - h0;
  for (int64_t ow = 0; ow < s->ow; ow++) {
    const int64_t w0 = ow * s->sw - s->pw;
    const int64_t wa = w0 < 0 ? 0 : w0, wb = w0 + s->kw < s->w ? w0 + s->kw : s->w;
    const int64_t wpad = (w0 + s->kw < s->w + s->pw ? w0 + s->kw : s->w + s->pw) - w0;
    float *yo = y + ow * b;
    if (s->is_max && b == 1) { /* NCHW: a register max, no store per element */
      float m = -INFINITY;
      int nan = 0;
      for (int64_t i = ha; i < hb; i++)
        for (int64_t j = wa; j < wb; j++) {
          const float v = x[i * s->w + j];
          m = v > m ? v : m;
          nan |= v != v;
        }
      yo[0] = nan ? NAN : m;
    } else if (s->is_max) {
      int nan = 0;
      for (int64_t c = 0; c < b; c++) yo[c] = -INFINITY; /* padding never wins */
      for (int64_t i = ha; i < hb; i++)
        for (int64_t j = wa; j < wb; j++) {
          const float *xp = x + (i * s->w + j) * b;
          for (int64_t c = 0; c < b; c++) {
            yo[c] = xp[c] > yo[c] ? xp[c] : yo[c];
            nan |= xp[c] != xp[c];
          }
        }
      if (nan) /* rare: redo with NaN propagating, as np.maximum does */
        for (int64_t i = ha; i < hb; i++)
          for (int64_t j = wa; j < wb; j++)
            for (int64_t c = 0; c < b; c++)
              if (isnan(x[(i * s->w + j) * b + c])) yo[c] = NAN;
    } else {
      for (int64_t c = 0; c < b; c++) acc[c] = 0.0;
      for (int64_t i = ha; i < hb; i++)
        for (int64_t j = wa; j < wb; j++) {
          const float *xp = x + (i * s->w + j) * b;
          for (int64_t c = 0; c < b; c++) acc[c] += xp[c];
        }
      const double count =
          s->include_pad ? (double)(hpad * wpad) : (double)((hb - ha) * (wb - wa));
      for (int64_t c = 0; c < b; c++) yo[c] = (float)(acc[c] / count);
    }
  }
}

static void pool_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * s->oh, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    int64_t plane = r / s->oh, oh = r % s->oh;
    pool_row(s, ctx->in[0] + plane * s->h * s->w * s->b,
             ctx->out[0] + (plane * s->oh + oh) * s->ow * s->b, oh, (double *)ws);
  }
}

static int global_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state st = {0};
  int rc = read_geometry(ctx, &st, err, errlen);
  if (rc != HWT_OK) return rc;
  pool_state *heap = malloc(sizeof *heap);
  if (!heap) return HWT_ENOMEM;
  *heap = st;
  ctx->state = heap;
  ctx->ws_floats = 0;
  ctx->flops = (double)(st.planes * st.b * st.h * st.w);
  return HWT_OK;
}

static void global_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool_state *s = ctx->state;
  const int64_t hw = s->h * s->w;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * s->b, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *x = ctx->in[0] + (r / s->b) * hw * s->b + r % s->b;
    if (s->is_max) {
      float m = -INFINITY;
      for (int64_t i = 0; i < hw; i++) {
        float v = x[i * s->b];
        m = (v > m || isnan(v)) ? v : m;
      }
      ctx->out[0][r] = m;
    } else {
      double acc = 0.0;
      for (int64_t i = 0; i < hw; i++) acc += x[i * s->b];
      ctx->out[0][r] = (float)(acc / (double)hw);
    }
  }
}

static void pool_release(hwt_op_ctx *ctx) {
  free(ctx->state);
  ctx->state = NULL;
}

static const hwt_op_impl k_pool[] = {
    {"pool2d", pool_prepare, pool_run, pool_release},
    {"global_pool2d", global_prepare, global_run, pool_release},
};

const hwt_op_impl *hwt_ops_pool(int *n) {
  *n = (int)(sizeof k_pool / sizeof k_pool[0]);
  return k_pool;
}
