/* Normalisation op family: batch_norm (inference), softmax and layer_norm.
 *
 * batch_norm reads gamma/beta/mean/var as inputs at run time (they may be
 * graph inputs, not only params) and forms each channel's scale and shift
 * in double, as the reference does; a channel costs one sqrt, far below the
 * per-element work. softmax works on lines along the axis in double (the
 * reference's precision); it evaluates exp twice (sum, then output) rather
 * than keep a per-thread workspace of a line; not yet measured against the
 * workspace version. */
#include <math.h>
#include <stdlib.h>
#include "ops_util.h"

typedef struct {
  int64_t n, channels, inner; /* NCHW: element i is channel (i / inner) % channels */
  int64_t block;              /* NCHWc: x; channel = cb * x + i % x; 0 for NCHW */
  double eps;
} bn_state;

static int bn_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 5 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "batch_norm takes x, gamma, beta, mean, var");
  int x = hwt_ops_in(ctx, 0);
  int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  bn_state st = {0};
  st.n = hwt_ops_numel(ctx->g, x);
  st.eps = hwt_ops_float(ctx, "epsilon", 1e-5);
  if (hwt_ops_str_is(ctx, "layout", "NCHWc", 0)) {
    if (rank != 5) return hwt_ops_fail(err, errlen, ctx, "NCHWc input must be 5-D");
    st.block = xs[4];
    st.channels = xs[1] * xs[4];
    st.inner = xs[2] * xs[3] * xs[4]; /* one (n, cb) row */
  } else {
    if (rank < 2) return hwt_ops_fail(err, errlen, ctx, "input needs a channel axis");
    st.channels = xs[1];
    st.inner = hwt_ops_prod(xs, 2, rank);
  }
  for (int i = 1; i < 5; i++)
    if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) != st.channels)
      return hwt_ops_fail(err, errlen, ctx, "gamma/beta/mean/var need one value per channel");
  /* workspace: NCHWc's x scales + x shifts, doubles */
  return hwt_ops_keep(ctx, &st, sizeof st, (size_t)(4 * st.block), 2.0 * (double)st.n);
}

static void bn_channel(const hwt_op_ctx *ctx, const bn_state *s, int64_t c, double *scale,
                       double *shift) {
  const double g = ctx->in[1][c], b = ctx->in[2][c], m = ctx->in[3][c], v = ctx->in[4][c];
  *scale = g / sqrt(v + s->eps);
  *shift = b - m * *scale;
}

static void bn_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bn_state *s = ctx->state;
  const float *x = ctx->in[0];
  float *y = ctx->out[0];
  int64_t lo, hi;
  hwt_ops_range(s->n, tid, nth, &lo, &hi);
  int64_t i = lo;
  while (i < hi) {
    int64_t row = i / s->inner;
    int64_t end = (row + 1) * s->inner < hi ? (row + 1) * s->inner : hi;
    if (!s->block) {
      double a, b;
      bn_channel(ctx, s, row % s->channels, &a, &b);
      for (; i < end; i++) y[i] = (float)(x[i] * a + b);
    } else {
      /* the row's x channels interleave: their scale/shift go to ws first */
      double *ab = (double *)ws;
      const int64_t c0 = (row % (s->channels / s->block)) * s->block;
      for (int64_t k = 0; k < s->block; k++) bn_channel(ctx, s, c0 + k, &ab[k], &ab[s->block + k]);
      /* Rows start on a block boundary; only a thread's first and last
       * blocks can be partial. No `i % block` per element: that 64-bit
       * division made NCHW16c 8.6x slower than NCHW (1604 vs 186 us for
       * [1,64,56,56] on 2 threads; 201 vs 151 us this way). */
      int64_t k = (i - row * s->inner) % s->block;
      while (i < end) {
        const int64_t n = end - i < s->block - k ? end - i : s->block - k;
        const double *a = ab + k, *b = ab + s->block + k;
        for (int64_t j = 0; j < n; j++) y[i + j] = (float)(x[i + j] * a[j] + b[j]);
        i += n;
        k = 0;
      }
    }
  }
}

/* softmax: lines along the axis (hwt_ops_lines), one at a time. */
static int sm_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return hwt_ops_lines_prepare(ctx, 1, "softmax takes one input", 3.0, err, errlen);
}

static void sm_line(const hwt_op_ctx *ctx, const hwt_ops_lines *s, int64_t base) {
  const float *x = ctx->in[0] + base;
  float *y = ctx->out[0] + base;
  float mx = x[0];
  for (int64_t j = 1; j < s->len; j++) mx = x[j * s->inner] > mx ? x[j * s->inner] : mx;
  double sum = 0.0;
  for (int64_t j = 0; j < s->len; j++) sum += exp((double)x[j * s->inner] - mx);
  const double inv = 1.0 / sum;
  for (int64_t j = 0; j < s->len; j++)
    y[j * s->inner] = (float)(exp((double)x[j * s->inner] - mx) * inv);
}

static void sm_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  hwt_ops_each_line(ctx, tid, nth, sm_line);
}

/* layer_norm: rows of the normalised size (the axes from `axis` on are
 * contiguous); mean and variance in double, two passes (the reference's
 * biased variance of x - mean, no cancellation for rows far from zero).
 * Threads share rows. */
typedef struct {
  int64_t rows, len;
  double eps;
} ln_state;

static int ln_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in < 2 || ctx->n_in > 3 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "layer_norm takes x, scale[, bias]");
  int x = hwt_ops_in(ctx, 0);
  int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  int64_t axis;
  if (hwt_ops_axis(ctx, rank, -1, &axis))
    return hwt_ops_fail(err, errlen, ctx, "axis out of range");
  ln_state st = {hwt_ops_prod(xs, 0, (int)axis), hwt_ops_prod(xs, (int)axis, rank),
                 hwt_ops_float(ctx, "epsilon", 1e-5)};
  for (int i = 1; i < ctx->n_in; i++)
    if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) != st.len)
      return hwt_ops_fail(err, errlen, ctx, "scale and bias need the normalised shape");
  return hwt_ops_keep(ctx, &st, sizeof st, 0, 5.0 * (double)(st.rows * st.len));
}

/* Independent double partial sums per row pass: a single running double
 * sum is one dependent add per value (4 cycles on Zen 4), and GCC keeps it
 * in order; LN_LANES sums vectorise (SSE2 pairs) and overlap. One
 * layer_norm row of BERT-base (768) was ~4 x 768 cycles of such chains:
 * ln_run took 1.73% of the int8 BERT-base's samples against 16.3% in the
 * VNNI micro-kernel (perf, 1 thread, under load). */
#define LN_LANES 8

static double ln_sum(const float *x, int64_t n) {
  double a[LN_LANES] = {0}, s = 0.0;
  int64_t j = 0;
  for (; j + LN_LANES <= n; j += LN_LANES)
    for (int u = 0; u < LN_LANES; u++) a[u] += x[j + u];
  for (; j < n; j++) s += x[j];
  for (int u = 0; u < LN_LANES; u++) s += a[u];
  return s;
}

static double ln_sq(const float *x, int64_t n, double mean) {
  double a[LN_LANES] = {0}, s = 0.0;
  int64_t j = 0;
  for (; j + LN_LANES <= n; j += LN_LANES)
    for (int u = 0; u < LN_LANES; u++) {
      const double d = x[j + u] - mean;
      a[u] += d * d;
    }
  for (; j < n; j++) s += (x[j] - mean) * (x[j] - mean);
  for (int u = 0; u < LN_LANES; u++) s += a[u];
  return s;
}

static void ln_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const ln_state *s = ctx->state;
  const float *scale = ctx->in[1], *bias = ctx->n_in == 3 ? ctx->in[2] : NULL;
  int64_t lo, hi;
  hwt_ops_rows(s->rows, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *x = ctx->in[0] + r * s->len;
    float *y = ctx->out[0] + r * s->len;
    const double mean = ln_sum(x, s->len) / (double)s->len;
    const double inv = 1.0 / sqrt(ln_sq(x, s->len, mean) / (double)s->len + s->eps);
    for (int64_t j = 0; j < s->len; j++)
      y[j] = (float)((x[j] - mean) * inv * scale[j] + (bias ? bias[j] : 0.0));
  }
}

static const hwt_op_impl k_norm[] = {
    {"batch_norm", bn_prepare, bn_run, hwt_ops_free_state},
    {"softmax", sm_prepare, sm_run, hwt_ops_free_state},
    {"layer_norm", ln_prepare, ln_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_norm, k_norm)
