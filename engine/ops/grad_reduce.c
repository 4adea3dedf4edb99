/* Training ops that reduce or scatter: reduce_sum, softmax_grad,
 * slice_grad, pool2d_grad and the fused losses
 * softmax_cross_entropy and mse_loss, as src/hwtune/graph/ops/train.py
 * defines them. Sums accumulate in double, as the reference does.
 *
 * Every share owns disjoint outputs. The losses' scalar is a sum over the
 * whole batch, which one share cannot take from the others without a
 * barrier, so share 0 computes it alone while every share writes its rows
 * of the gradient: one extra pass over [N, C] logits, small beside the
 * model that produced them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops_util.h"

/* ---- reduce_sum ---------------------------------------------------------- */

typedef struct {
  int64_t n_out;
  int nk, nr;              /* kept and reduced dims */
  int64_t kdim[HWT_GRAPH_MAX_DIMS], kstride[HWT_GRAPH_MAX_DIMS];
  int64_t rdim[HWT_GRAPH_MAX_DIMS], rstride[HWT_GRAPH_MAX_DIMS];
} rs_state;

static int rs_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 1 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "reduce_sum takes one input");
  int x = hwt_ops_in(ctx, 0);
  const int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  int reduced[HWT_GRAPH_MAX_DIMS] = {0};
  int64_t axes[HWT_GRAPH_MAX_DIMS];
  int na = hwt_graph_op_attr_kind(ctx->g, ctx->op, "axes") == HWT_ATTR_INTS
               ? hwt_graph_op_get_ints(ctx->g, ctx->op, "axes", axes, HWT_GRAPH_MAX_DIMS)
               : 0;
  if (na < 0 || na > rank) return hwt_ops_fail(err, errlen, ctx, "bad axes");
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return hwt_ops_fail(err, errlen, ctx, "axis out of range");
    reduced[a] = 1;
  }
  if (na == 0)
    for (int i = 0; i < rank; i++) reduced[i] = 1;
  rs_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  int64_t stride = 1;
  int64_t kd[HWT_GRAPH_MAX_DIMS], ks[HWT_GRAPH_MAX_DIMS], rd[HWT_GRAPH_MAX_DIMS], rsd[HWT_GRAPH_MAX_DIMS];
  int nk = 0, nr = 0;
  for (int i = rank - 1; i >= 0; i--) { /* innermost first, then reversed below */
    if (reduced[i]) rd[nr] = xs[i], rsd[nr++] = stride;
    else kd[nk] = xs[i], ks[nk++] = stride;
    stride *= xs[i];
  }
  s->nk = nk, s->nr = nr, s->n_out = 1;
  for (int i = 0; i < nk; i++) {
    s->kdim[i] = kd[nk - 1 - i], s->kstride[i] = ks[nk - 1 - i];
    s->n_out *= s->kdim[i];
  }
  for (int i = 0; i < nr; i++) s->rdim[i] = rd[nr - 1 - i], s->rstride[i] = rsd[nr - 1 - i];
  if (hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)) != s->n_out) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "output size differs from the kept dimensions");
  }
  /* per thread: a double accumulator and an int64 source offset per output */
  return hwt_ops_prepared(ctx, s, (size_t)(4 * s->n_out), (double)hwt_ops_numel(ctx->g, x));
}

static void rs_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const rs_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_range(s->n_out, tid, nth, &lo, &hi);
  if (lo >= hi) return;
  const int64_t m = hi - lo;
  double *acc = (double *)ws;
  int64_t *off = (int64_t *)(acc + m);
  for (int64_t o = lo; o < hi; o++) { /* kept offset of each of this share's outputs */
    int64_t rest = o, at = 0;
    for (int k = s->nk - 1; k >= 0; k--) {
      at += (rest % s->kdim[k]) * s->kstride[k];
      rest /= s->kdim[k];
    }
    off[o - lo] = at;
    acc[o - lo] = 0.0;
  }
  int64_t idx[HWT_GRAPH_MAX_DIMS] = {0}, base = 0;
  const float *x = ctx->in[0];
  for (;;) {
    const float *xb = x + base;
    for (int64_t j = 0; j < m; j++) acc[j] += xb[off[j]];
    int k = s->nr - 1; /* odometer over the reduced dims */
    for (; k >= 0; k--) {
      base += s->rstride[k];
      if (++idx[k] < s->rdim[k]) break;
      base -= idx[k] * s->rstride[k];
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  for (int64_t j = 0; j < m; j++) ctx->out[0][lo + j] = (float)acc[j];
}

/* ---- softmax_grad: lines as softmax's ------------------------------------ */

static int smg_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return hwt_ops_lines_prepare(ctx, 2, "softmax_grad takes y and dy", 4.0, err, errlen);
}

static void smg_line(const hwt_op_ctx *ctx, const hwt_ops_lines *s, int64_t base) {
  const float *y = ctx->in[0] + base, *dy = ctx->in[1] + base;
  float *dx = ctx->out[0] + base;
  double dot = 0.0;
  for (int64_t j = 0; j < s->len; j++) dot += (double)dy[j * s->inner] * y[j * s->inner];
  for (int64_t j = 0; j < s->len; j++)
    dx[j * s->inner] = (float)(y[j * s->inner] * (dy[j * s->inner] - dot));
}

static void smg_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  hwt_ops_each_line(ctx, tid, nth, smg_line);
}

/* ---- losses ---------------------------------------------------------------- */

typedef struct {
  int64_t rows, cols;
} loss_state;

static int loss_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 2)
    return hwt_ops_fail(err, errlen, ctx, "a loss takes a prediction and a target and gives "
                                          "loss and gradient");
  int a = hwt_ops_in(ctx, 0);
  const int64_t n = hwt_ops_numel(ctx->g, a);
  if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 1)) != n ||
      hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)) != 1)
    return hwt_ops_fail(err, errlen, ctx, "target must match the prediction; loss is [1]");
  loss_state *s = malloc(sizeof *s);
  if (!s) return HWT_ENOMEM;
  const int rank = hwt_graph_tensor_ndim(ctx->g, a);
  s->cols = rank ? hwt_graph_tensor_shape(ctx->g, a)[rank - 1] : 1;
  s->rows = s->cols ? n / s->cols : 0;
  return hwt_ops_prepared(ctx, s, 0, 6.0 * (double)n);
}

/* log-sum-exp of one row, shifted by its max (double). */
static double row_lse(const float *z, int64_t c, double *mx) {
  double m = z[0], sum = 0.0;
  for (int64_t j = 1; j < c; j++) m = z[j] > m ? z[j] : m;
  for (int64_t j = 0; j < c; j++) sum += exp((double)z[j] - m);
  *mx = m;
  return log(sum);
}

static void xent_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const loss_state *s = ctx->state;
  const float *z = ctx->in[0], *t = ctx->in[1];
  float *dz = ctx->out[1];
  const double inv_n = 1.0 / (double)s->rows;
  int64_t lo, hi;
  hwt_ops_rows(s->rows, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *zr = z + r * s->cols, *tr = t + r * s->cols;
    double mx, tsum = 0.0;
    const double lse = row_lse(zr, s->cols, &mx);
    for (int64_t j = 0; j < s->cols; j++) tsum += tr[j];
    for (int64_t j = 0; j < s->cols; j++)
      dz[r * s->cols + j] = (float)((exp((double)zr[j] - mx - lse) * tsum - tr[j]) * inv_n);
  }
  if (tid != 0) return;
  double loss = 0.0;
  for (int64_t r = 0; r < s->rows; r++) {
    const float *zr = z + r * s->cols, *tr = t + r * s->cols;
    double mx;
    const double lse = row_lse(zr, s->cols, &mx);
    for (int64_t j = 0; j < s->cols; j++) loss -= tr[j] * ((double)zr[j] - mx - lse);
  }
  ctx->out[0][0] = (float)(loss * inv_n);
}

static void mse_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const loss_state *s = ctx->state;
  const int64_t n = s->rows * s->cols;
  const float *y = ctx->in[0], *t = ctx->in[1];
  const double scale = 2.0 / (double)n;
  int64_t lo, hi;
  hwt_ops_range(n, tid, nth, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) ctx->out[1][i] = (float)(((double)y[i] - t[i]) * scale);
  if (tid != 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += ((double)y[i] - t[i]) * ((double)y[i] - t[i]);
  ctx->out[0][0] = (float)(sum / (double)n);
}

/* ---- slice_grad: rows of the padded output, copied or zeroed --------------- */

typedef struct {
  hwt_ops_lines dy; /* dy along the axis; the output has size for len */
  int64_t size, begin;
} sg_state;

static int sg_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 1 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "slice_grad takes dy");
  sg_state st;
  if (hwt_ops_lines_of(ctx, 0, 0, &st.dy))
    return hwt_ops_fail(err, errlen, ctx, "axis out of range");
  st.size = hwt_ops_int(ctx, "size", 0);
  st.begin = hwt_ops_int(ctx, "begin", 0);
  if (st.begin < 0 || st.begin + st.dy.len > st.size ||
      hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)) != st.dy.outer * st.size * st.dy.inner)
    return hwt_ops_fail(err, errlen, ctx, "the slice does not fit in size");
  return hwt_ops_keep(ctx, &st, sizeof st, 0, 0.0);
}

static void sg_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const sg_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->dy.outer * s->size, tid, nth, &lo, &hi);
  const size_t bytes = (size_t)s->dy.inner * sizeof(float);
  for (int64_t row = lo; row < hi; row++) {
    const int64_t o = row / s->size, a = row % s->size - s->begin;
    float *dst = ctx->out[0] + row * s->dy.inner;
    if (a >= 0 && a < s->dy.len)
      memcpy(dst, ctx->in[0] + (o * s->dy.len + a) * s->dy.inner, bytes);
    else
      memset(dst, 0, bytes);
  }
}

/* ---- pool2d_grad (NCHW): planes are independent ------------------------------ */

typedef struct {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
  int max, include_pad;
} pg_state;

static int pg_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "pool2d_grad takes x and dy");
  int x = hwt_ops_in(ctx, 0), dy = hwt_ops_in(ctx, 1);
  if (hwt_graph_tensor_ndim(ctx->g, x) != 4 || hwt_graph_tensor_ndim(ctx->g, dy) != 4)
    return hwt_ops_fail(err, errlen, ctx, "x and dy must be NCHW");
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x), *ds = hwt_graph_tensor_shape(ctx->g, dy);
  int64_t k[2], st[2], pd[2] = {0, 0};
  if (hwt_ops_pair(ctx, "kernel", k)) return hwt_ops_fail(err, errlen, ctx, "kernel is unset");
  if (hwt_ops_pair(ctx, "stride", st)) st[0] = k[0], st[1] = k[1];
  hwt_ops_pair(ctx, "padding", pd);
  pg_state *s = malloc(sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->planes = xs[0] * xs[1], s->h = xs[2], s->w = xs[3], s->oh = ds[2], s->ow = ds[3];
  s->kh = k[0], s->kw = k[1], s->sh = st[0], s->sw = st[1], s->ph = pd[0], s->pw = pd[1];
  s->max = hwt_ops_str_is(ctx, "mode", "max", 0);
  s->include_pad = (int)hwt_ops_int(ctx, "count_include_pad", 0);
  return hwt_ops_prepared(ctx, s, 0, (double)(hwt_ops_numel(ctx->g, dy) * s->kh * s->kw));
}

/* Max pooling whose windows tile the input without overlap or padding
 * (stride = kernel, every window whole: the 2x2 stride-2 pools of VGG-style
 * nets): each input element is in at most one window, so dx is written in
 * one pass (no zeroing pass, no read-modify-write) and the arg max is found
 * with selects instead of a data-dependent branch per element. The general
 * loop's branches mispredicted on random data: pool2d_grad was 13% of
 * PathNet-medium's training step (per-op profile, avx2). Same arg max
 * as the general loop: the first maximum in row-major order, a NaN never
 * replacing it; 0 + g as the general loop's accumulation onto zeros. */
static int pg_tiles(const pg_state *s) {
  return s->max && s->sh == s->kh && s->sw == s->kw && s->ph == 0 && s->pw == 0 &&
         s->oh * s->kh <= s->h && s->ow * s->kw <= s->w;
}

/* One row of 2x2 windows: the winner of each window as selects on the
 * running maxima, a form the compiler vectorises (interleaved loads and
 * stores); pg_row_tiled's index tracking stayed scalar and took 10 ms per
 * PathNet-medium pool (64x32x48x48, avx2, load 2.8). */
static void pg_row_2x2(const float *restrict r0, const float *restrict r1,
                       const float *restrict dy, float *restrict o0, float *restrict o1,
                       int64_t ow) {
  for (int64_t q = 0; q < ow; q++) {
    const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
    const float m1 = b > a ? b : a, m2 = c > m1 ? c : m1;
    const float g = 0.0f + dy[q];
    const float gd = d > m2 ? 0.0f : g; /* dy left after d's claim */
    const float gc = c > m1 ? 0.0f : gd;
    o1[2 * q + 1] = d > m2 ? g : 0.0f;
    o1[2 * q] = c > m1 ? gd : 0.0f;
    o0[2 * q + 1] = b > a ? gc : 0.0f;
    o0[2 * q] = b > a ? 0.0f : gc;
  }
}

/* One row of windows of any size (the index-tracking loop): x row xr,
 * dy row g, dx row dr. */
static void pg_row_tiled(const pg_state *s, const float *xr, const float *g, float *dr) {
  const int64_t w = s->w, kh = s->kh, kw = s->kw;
  for (int64_t ox = 0; ox < s->ow; ox++) {
    const float *xw = xr + ox * kw;
    float best = xw[0];
    int64_t at = 0;
    for (int64_t yy = 0; yy < kh; yy++)
      for (int64_t xx = 0; xx < kw; xx++) {
        const float v = xw[yy * w + xx];
        const int gt = v > best;
        best = gt ? v : best;
        at = gt ? yy * w + xx : at;
      }
    const float gi = 0.0f + g[ox];
    float *dw = dr + ox * kw;
    for (int64_t yy = 0; yy < kh; yy++)
      for (int64_t xx = 0; xx < kw; xx++) dw[yy * w + xx] = yy * w + xx == at ? gi : 0.0f;
  }
}

static void pg_plane_tiled(const pg_state *s, const float *x, const float *dy, float *dx) {
  const int64_t w = s->w, kh = s->kh, kw = s->kw, cov = s->ow * kw;
  for (int64_t oy = 0; oy < s->oh; oy++) {
    const float *xr = x + oy * kh * w;
    float *dr = dx + oy * kh * w;
    if (kh == 2 && kw == 2)
      pg_row_2x2(xr, xr + w, dy + oy * s->ow, dr, dr + w, s->ow);
    else
      pg_row_tiled(s, xr, dy + oy * s->ow, dr);
    if (cov < w)
      for (int64_t yy = 0; yy < kh; yy++)
        memset(dr + yy * w + cov, 0, (size_t)(w - cov) * sizeof *dr);
  }
  const int64_t done = s->oh * kh;
  memset(dx + done * w, 0, (size_t)((s->h - done) * w) * sizeof *dx);
}

static void pg_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pg_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->planes, tid, nth, &lo, &hi);
  if (pg_tiles(s)) {
    for (int64_t p = lo; p < hi; p++)
      pg_plane_tiled(s, ctx->in[0] + p * s->h * s->w, ctx->in[1] + p * s->oh * s->ow,
                     ctx->out[0] + p * s->h * s->w);
    return;
  }
  for (int64_t p = lo; p < hi; p++) {
    const float *x = ctx->in[0] + p * s->h * s->w, *dy = ctx->in[1] + p * s->oh * s->ow;
    float *dx = ctx->out[0] + p * s->h * s->w;
    memset(dx, 0, (size_t)(s->h * s->w) * sizeof *dx);
    for (int64_t oy = 0; oy < s->oh; oy++)
      for (int64_t ox = 0; ox < s->ow; ox++) {
        const int64_t y0 = oy * s->sh - s->ph, x0 = ox * s->sw - s->pw;
        const int64_t ya = y0 < 0 ? 0 : y0, yb = y0 + s->kh < s->h ? y0 + s->kh : s->h;
        const int64_t xa = x0 < 0 ? 0 : x0, xb = x0 + s->kw < s->w ? x0 + s->kw : s->w;
        const float g = dy[oy * s->ow + ox];
        if (s->max) {
          /* the first maximum in row-major order takes dy (a NaN never
           * replaces it), tracked with selects: the branch per element
           * mispredicted on real activations (ResNet-18's 3x3 stride-2
           * pool1 backward, 16x64x112x112, was 2.5-3% of the training
           * step, per-op trace, avx2, load 6) */
          if (ya >= yb || xa >= xb) continue;
          int64_t at = ya * s->w + xa;
          float best = x[at];
          for (int64_t yy = ya; yy < yb; yy++)
            for (int64_t xx = xa; xx < xb; xx++) {
              const float v = x[yy * s->w + xx];
              const int gt = v > best;
              best = gt ? v : best;
              at = gt ? yy * s->w + xx : at;
            }
          dx[at] += g;
          continue;
        }
        int64_t count;
        if (s->include_pad) { /* the window clipped to the padded input */
          const int64_t yc = y0 + s->kh < s->h + s->ph ? y0 + s->kh : s->h + s->ph;
          const int64_t xc = x0 + s->kw < s->w + s->pw ? x0 + s->kw : s->w + s->pw;
          count = (yc - y0) * (xc - x0);
        } else {
          count = (yb - ya) * (xb - xa);
        }
        const float share = g / (float)count;
        for (int64_t yy = ya; yy < yb; yy++)
          for (int64_t xx = xa; xx < xb; xx++) dx[yy * s->w + xx] += share;
      }
  }
}

static const hwt_op_impl GRAD_REDUCE[] = {
    {"reduce_sum", rs_prepare, rs_run, hwt_ops_free_state},
    {"softmax_grad", smg_prepare, smg_run, hwt_ops_free_state},
    {"softmax_cross_entropy", loss_prepare, xent_run, hwt_ops_free_state},
    {"mse_loss", loss_prepare, mse_run, hwt_ops_free_state},
    {"slice_grad", sg_prepare, sg_run, hwt_ops_free_state},
    {"pool2d_grad", pg_prepare, pg_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_grad_reduce, GRAD_REDUCE)
