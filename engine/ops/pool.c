/* Pooling op family: pool2d (max/avg window) and global_pool2d, NCHW or
 * NCHW[x]c. Channels are independent, so both layouts are "planes" of H x W
 * positions holding b adjacent channels (b = 1 for NCHW, x for NCHWc).
 * Averages accumulate in double, as the reference does: a 7x7 window of
 * mixed-sign values cancels enough to lose float digits. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops_util.h"

typedef struct {
  int is_max, include_pad;
  int same;          /* max, strides 1, output as large as the input: pool_max_same */
  int64_t chunk;     /* pool_max_same's rows per pass */
  int64_t kh, kw, sh, sw, ph, pw; /* ph, pw: zeros before (top, left) */
  int64_t eh, ew;                 /* zeros after (bottom, right): padding_end */
  int64_t planes, h, w, b, oh, ow;
} pool_state;

static int64_t out_len(int64_t size, int64_t k, int64_t s, int64_t p, int64_t e,
                       int ceil_mode) {
  int64_t span = size + p + e - k;
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
  int64_t e[2] = {p[0], p[1]};
  hwt_ops_pair(ctx, "padding_end", e); /* absent: symmetric */
  st.kh = k[0], st.kw = k[1], st.sh = s[0], st.sw = s[1], st.ph = p[0], st.pw = p[1];
  st.eh = e[0], st.ew = e[1];
  if (st.kh < 1 || st.kw < 1 || st.sh < 1 || st.sw < 1 || st.ph < 0 || st.pw < 0 ||
      st.eh < 0 || st.ew < 0 || 2 * st.ph > st.kh || 2 * st.pw > st.kw || 2 * st.eh > st.kh ||
      2 * st.ew > st.kw || st.kh > st.h + st.ph + st.eh || st.kw > st.w + st.pw + st.ew)
    return hwt_ops_fail(err, errlen, ctx, "bad window, stride or padding");
  int ceil_mode = (int)hwt_ops_int(ctx, "ceil_mode", 0);
  st.include_pad = (int)hwt_ops_int(ctx, "count_include_pad", 0);
  st.oh = out_len(st.h, st.kh, st.sh, st.ph, st.eh, ceil_mode);
  st.ow = out_len(st.w, st.kw, st.sw, st.pw, st.ew, ceil_mode);
  const int64_t *ys = hwt_graph_tensor_shape(ctx->g, hwt_ops_out(ctx, 0));
  if (ys[2] != st.oh || ys[3] != st.ow)
    return hwt_ops_fail(err, errlen, ctx, "output shape does not match the window");
  /* avg: b double accumulators; max: one padded row of the vertical pass,
   * or pool_max_same's chunk of rows (up to 4096 floats: it stays in L1
   * between the vertical and the horizontal pass). */
  /* pool_max_same fixes up the windows of pw columns at either end of a
   * row: symmetric padding only (an asymmetric one takes the row path). */
  st.same = st.is_max && st.sh == 1 && st.sw == 1 && st.oh == st.h && st.ow == st.w &&
            st.ph == st.eh && st.pw == st.ew;
  st.chunk = 4096 / (st.w * st.b) > 1 ? 4096 / (st.w * st.b) : 1;
  const int64_t tw = (st.ow - 1) * st.sw + st.kw;
  int64_t ws = 2 * st.b > tw * st.b ? 2 * st.b : tw * st.b;
  if (st.same && st.chunk * st.w * st.b > ws) ws = st.chunk * st.w * st.b;
  return hwt_ops_keep(ctx, &st, sizeof st, (size_t)ws,
                      (double)(st.planes * st.b * st.oh * st.ow * st.kh * st.kw));
}

/* acc = max(acc, x) elementwise, NaN propagating as np.maximum does; plain
 * loops over contiguous floats, so the compiler vectorises them. */
static void max_into(float *restrict acc, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) acc[i] = (x[i] > acc[i] || x[i] != x[i]) ? x[i] : acc[i];
}

static int has_nan(const float *x, int64_t n) {
  int nan = 0;
  for (int64_t i = 0; i < n; i++) nan |= x[i] != x[i];
  return nan;
}

/* max_into without the NaN select (one maxps per vector instead of five
 * ops); returns nonzero if x held a NaN, for the caller to redo with
 * max_into. */
static int max_into_fast(float *restrict acc, const float *restrict x, int64_t n) {
  int nan = 0;
  for (int64_t i = 0; i < n; i++) {
    acc[i] = x[i] > acc[i] ? x[i] : acc[i];
    nan |= x[i] != x[i];
  }
  return nan;
}

/* Max pooling of one output row, separably: the window's input rows are
 * reduced into tmp (one padded row, -inf outside the input, so padding
 * never wins), then each output takes the max of kw columns of tmp. Both
 * passes run over contiguous floats -- with stride_w 1 the whole row of
 * ow x b outputs is one run per kernel column -- where the per-window loop
 * took 9 scalar maxes per output of a 3x3 window (the inception 3a block's
 * 3x3 stride-1 max-pool cost more than its 3x3 conv). */
static void pool_max_row(const pool_state *s, const float *x, float *y, int64_t oh,
                         float *tmp) {
  const int64_t b = s->b, sw = s->sw, kw = s->kw, ow = s->ow;
  const int64_t h0 = oh * s->sh - s->ph;
  const int64_t ha = h0 < 0 ? 0 : h0, hb = h0 + s->kh < s->h ? h0 + s->kh : s->h;
  const int64_t tw = (ow - 1) * sw + kw; /* padded columns the windows read */
  const int64_t c0 = s->pw, c1 = s->pw + s->w < tw ? s->pw + s->w : tw;
  for (int64_t i = 0; i < c0 * b; i++) tmp[i] = -INFINITY;
  for (int64_t i = c1 * b; i < tw * b; i++) tmp[i] = -INFINITY;
  float *mid = tmp + c0 * b;
  const int64_t n = (c1 - c0) * b;
  if (hb <= ha)
    for (int64_t i = 0; i < n; i++) mid[i] = -INFINITY;
  else
    memcpy(mid, x + ha * s->w * b, (size_t)n * sizeof(float));
  for (int64_t i = ha + 1; i < hb; i++) max_into(mid, x + i * s->w * b, n);
  if (sw == 1) {
    memcpy(y, tmp, (size_t)(ow * b) * sizeof(float));
    for (int64_t k = 1; k < kw; k++) max_into(y, tmp + k * b, ow * b);
    return;
  }
  for (int64_t o = 0; o < ow; o++) {
    float *yo = y + o * b;
    const float *t = tmp + o * sw * b;
    memcpy(yo, t, (size_t)b * sizeof(float));
    for (int64_t k = 1; k < kw; k++) max_into(yo, t + k * b, b);
  }
}

/* Max pooling of output rows [oa, ob) of one plane when the output is as
 * large as the input and both strides are 1 (GoogLeNet's 3x3/1 pad 1): both
 * separable passes then run over all the rows at once as contiguous floats
 * -- kh + kw vector runs per chunk of rows instead of per row (28-float rows
 * made the per-row calls cost as much as the maxes) -- and only the
 * pw columns at each end of a row, whose windows the flat horizontal run
 * lets wrap into the neighbouring row, are redone per window. */
static void pool_max_same(const pool_state *s, const float *x, float *y, int64_t oa,
                          int64_t ob, float *v) {
  const int64_t b = s->b, W = s->w, H = s->h, rowf = W * b, n = (ob - oa) * rowf;
  int nan = 0;
  memcpy(v, x + oa * rowf, (size_t)n * sizeof(float)); /* window row d = 0 */
  for (int64_t k = 0; k < s->kh; k++) {
    const int64_t d = k - s->ph;
    const int64_t lo = oa > -d ? oa : -d, hi = ob < H - d ? ob : H - d;
    if (d != 0 && hi > lo)
      nan |= max_into_fast(v + (lo - oa) * rowf, x + (lo + d) * rowf, (hi - lo) * rowf);
  }
  /* v's own NaNs flag the rows' (a NaN at window row 0 is never replaced
   * by > but must be reported); then the horizontal pass may skip the test */
  if (!nan) nan = has_nan(v, n);
  if (nan) { /* rare: the NaN-propagating per-row path */
    for (int64_t oh = oa; oh < ob; oh++) pool_max_row(s, x, y + oh * rowf, oh, v);
    return;
  }
  float *yo = y + oa * rowf;
  memcpy(yo, v, (size_t)n * sizeof(float));
  for (int64_t k = 0; k < s->kw; k++) {
    const int64_t d = (k - s->pw) * b;
    if (d > 0) max_into_fast(yo, v + d, n - d);
    if (d < 0) max_into_fast(yo - d, v, n + d);
  }
  if (s->pw == 0) return; /* kw 1: no window reaches past its row */
  for (int64_t r = 0; r < ob - oa; r++)
    for (int64_t ow = 0; ow < W; ow++) {
      if (ow == s->pw && W - s->pw > ow) ow = W - s->pw; /* interior columns are right */
      const int64_t k0 = s->pw - ow > 0 ? s->pw - ow : 0;
      const int64_t k1 = W + s->pw - ow < s->kw ? W + s->pw - ow : s->kw;
      const float *vr = v + r * rowf + (ow - s->pw) * b;
      float *o = yo + r * rowf + ow * b;
      for (int64_t c = 0; c < b; c++) {
        float m = -INFINITY;
        for (int64_t k = k0; k < k1; k++) m = vr[k * b + c] > m ? vr[k * b + c] : m;
        o[c] = m;
      }
    }
}

/* One output row (plane, oh) of ow x b averages. The b channels of a
 * position are innermost so the NCHWc case runs b-wide vector adds; acc
 * holds b doubles (the thread's workspace). */
static void pool_avg_row(const pool_state *s, const float *x, float *y, int64_t oh, double *acc) {
  const int64_t b = s->b;
  const int64_t h0 = oh * s->sh - s->ph;
  const int64_t ha = h0 < 0 ? 0 : h0, hb = h0 + s->kh < s->h ? h0 + s->kh : s->h;
  const int64_t hpad = (h0 + s->kh < s->h + s->eh ? h0 + s->kh : s->h + s->eh) - h0;
  for (int64_t ow = 0; ow < s->ow; ow++) {
    const int64_t w0 = ow * s->sw - s->pw;
    const int64_t wa = w0 < 0 ? 0 : w0, wb = w0 + s->kw < s->w ? w0 + s->kw : s->w;
    const int64_t wpad = (w0 + s->kw < s->w + s->ew ? w0 + s->kw : s->w + s->ew) - w0;
    float *yo = y + ow * b;
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

static void pool_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * s->oh, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi;) {
    int64_t plane = r / s->oh, oh = r % s->oh;
    const float *x = ctx->in[0] + plane * s->h * s->w * s->b;
    float *y = ctx->out[0] + plane * s->oh * s->ow * s->b;
    if (s->same) {
      int64_t end = oh + s->chunk < s->oh ? oh + s->chunk : s->oh;
      if (end - oh > hi - r) end = oh + (hi - r);
      pool_max_same(s, x, y, oh, end, ws);
      r += end - oh;
      continue;
    }
    if (s->is_max)
      pool_max_row(s, x, y + oh * s->ow * s->b, oh, ws);
    else
      pool_avg_row(s, x, y + oh * s->ow * s->b, oh, (double *)ws);
    r++;
  }
}

static int global_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state st = {0};
  int rc = read_geometry(ctx, &st, err, errlen);
  if (rc != HWT_OK) return rc;
  return hwt_ops_keep(ctx, &st, sizeof st, 0, (double)(st.planes * st.b * st.h * st.w));
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

static const hwt_op_impl k_pool[] = {
    {"pool2d", pool_prepare, pool_run, hwt_ops_free_state},
    {"global_pool2d", global_prepare, global_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_pool, k_pool)
