/* batch_norm's training ops: batch_norm_train (the forward with the batch's
 * statistics, which it also outputs for the backward pass),
 * batch_norm_train_grad, batch_norm_stats_update (the running statistics
 * after such a step), and batch_norm_grad (the gradient with fixed, running
 * statistics), as src/hwtune/graph/ops/train.py defines them.
 *
 * Channels are independent, so threads take whole channels
 * (hwt_ops_rows); each channel is N runs of H*W contiguous floats. Sums
 * accumulate in double, as the reference does; the variance is a second
 * pass over the centred values (exact where E[x^2] - E[x]^2 cancels for
 * activations with a large mean). */
#include <math.h>
#include <stdlib.h>
#include "ops_util.h"

typedef struct {
  int64_t batch, channels, inner;
  double eps;
} bnt_state;

/* flops: per element of x. */
static int bnt_setup(hwt_op_ctx *ctx, int n_in, int n_out, double flops, const char *usage,
                     char *err, size_t errlen) {
  if (ctx->n_in != n_in || ctx->n_out != n_out) return hwt_ops_fail(err, errlen, ctx, usage);
  const int x = hwt_ops_in(ctx, 0);
  const int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  if (rank < 2) return hwt_ops_fail(err, errlen, ctx, "x needs a channel axis");
  for (int i = 1; i < n_in; i++) {
    const int64_t want = n_in == 5 && i == 1 ? hwt_ops_numel(ctx->g, x) : xs[1];
    if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) != want)
      return hwt_ops_fail(err, errlen, ctx, "inputs do not match x's channels");
  }
  bnt_state *s = malloc(sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->batch = xs[0], s->channels = xs[1], s->inner = hwt_ops_prod(xs, 2, rank);
  s->eps = hwt_ops_float(ctx, "epsilon", 1e-5);
  return hwt_ops_prepared(ctx, s, 0, flops * (double)hwt_ops_numel(ctx->g, x));
}

static int bnt_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return bnt_setup(ctx, 3, 3, 6.0,
                   "batch_norm_train takes x, gamma, beta and outputs y, mean, invstd", err,
                   errlen);
}

static int bntg_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return bnt_setup(ctx, 5, 3, 8.0,
                   "batch_norm_train_grad takes x, dy, gamma, mean, invstd and outputs dx, "
                   "dgamma, dbeta",
                   err, errlen);
}

/* y = gamma (x - mean) invstd + beta with the biased variance over N, H, W
 * (PyTorch's train-mode normalisation). */
static void bnt_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bnt_state *s = ctx->state;
  const float *x = ctx->in[0];
  float *y = ctx->out[0];
  const double m = (double)(s->batch * s->inner);
  int64_t lo, hi;
  hwt_ops_rows(s->channels, tid, nth, &lo, &hi);
  for (int64_t c = lo; c < hi; c++) {
    double sum = 0.0, sq = 0.0;
    for (int64_t n = 0; n < s->batch; n++) {
      const float *xc = x + (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++) sum += xc[k];
    }
    const double mean = sum / m;
    for (int64_t n = 0; n < s->batch; n++) {
      const float *xc = x + (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++) sq += (xc[k] - mean) * (xc[k] - mean);
    }
    const double inv = 1.0 / sqrt(sq / m + s->eps);
    const double scale = ctx->in[1][c] * inv, shift = ctx->in[2][c] - mean * scale;
    for (int64_t n = 0; n < s->batch; n++) {
      const int64_t at = (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++) y[at + k] = (float)(x[at + k] * scale + shift);
    }
    ctx->out[1][c] = (float)mean;
    ctx->out[2][c] = (float)inv;
  }
}

/* xhat = (x - mean) invstd; dbeta = sum dy; dgamma = sum dy xhat;
 * dx = gamma invstd (dy - dbeta / M - xhat dgamma / M), M = N H W. */
static void bntg_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bnt_state *s = ctx->state;
  const float *x = ctx->in[0], *dy = ctx->in[1];
  const double m = (double)(s->batch * s->inner);
  int64_t lo, hi;
  hwt_ops_rows(s->channels, tid, nth, &lo, &hi);
  for (int64_t c = lo; c < hi; c++) {
    const double mean = ctx->in[3][c], inv = ctx->in[4][c];
    double dg = 0.0, db = 0.0;
    for (int64_t n = 0; n < s->batch; n++) {
      const int64_t at = (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++) {
        db += dy[at + k];
        dg += dy[at + k] * ((x[at + k] - mean) * inv);
      }
    }
    const double scale = ctx->in[2][c] * inv, mb = db / m, mg = dg / m;
    for (int64_t n = 0; n < s->batch; n++) {
      const int64_t at = (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++)
        ctx->out[0][at + k] =
            (float)(scale * (dy[at + k] - mb - (x[at + k] - mean) * inv * mg));
    }
    ctx->out[1][c] = (float)dg;
    ctx->out[2][c] = (float)db;
  }
}

static int bng_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return bnt_setup(ctx, 5, 3, 5.0, "batch_norm_grad takes x, dy, gamma, mean, var", err,
                   errlen);
}

/* Fixed statistics: dx = dy gamma / sqrt(var + eps), dgamma = sum dy xhat,
 * dbeta = sum dy. */
static void bng_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bnt_state *s = ctx->state;
  const float *x = ctx->in[0], *dy = ctx->in[1];
  int64_t lo, hi;
  hwt_ops_rows(s->channels, tid, nth, &lo, &hi);
  for (int64_t c = lo; c < hi; c++) {
    const double inv = 1.0 / sqrt((double)ctx->in[4][c] + s->eps), mean = ctx->in[3][c];
    const float scale = (float)(ctx->in[2][c] * inv);
    double dg = 0.0, db = 0.0;
    for (int64_t n = 0; n < s->batch; n++) {
      const int64_t at = (n * s->channels + c) * s->inner;
      for (int64_t k = 0; k < s->inner; k++) {
        const double d = dy[at + k];
        dg += d * (((double)x[at + k] - mean) * inv);
        db += d;
        ctx->out[0][at + k] = dy[at + k] * scale;
      }
    }
    ctx->out[1][c] = (float)dg;
    ctx->out[2][c] = (float)db;
  }
}

/* batch_norm_stats_update: per channel, PyTorch's running averages. */
typedef struct {
  int64_t channels, count;
  double momentum, eps;
} bns_state;

static int bns_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 4 || ctx->n_out != 2)
    return hwt_ops_fail(err, errlen, ctx,
                        "batch_norm_stats_update takes mean, var, batch_mean, batch_invstd");
  const int64_t c = hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 0));
  for (int i = 1; i < 4; i++)
    if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) != c)
      return hwt_ops_fail(err, errlen, ctx, "inputs must have the same number of channels");
  bns_state *s = malloc(sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->channels = c;
  s->count = hwt_ops_int(ctx, "count", 2);
  s->momentum = hwt_ops_float(ctx, "momentum", 0.1);
  s->eps = hwt_ops_float(ctx, "epsilon", 1e-5);
  return hwt_ops_prepared(ctx, s, 0, 8.0 * (double)c);
}

static void bns_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bns_state *s = ctx->state;
  const double m = s->momentum;
  /* the running variance is unbiased, as PyTorch keeps it */
  const double unbias = s->count > 1 ? (double)s->count / (double)(s->count - 1) : 1.0;
  int64_t lo, hi;
  hwt_ops_rows(s->channels, tid, nth, &lo, &hi);
  for (int64_t c = lo; c < hi; c++) {
    const double inv = ctx->in[3][c], bvar = (1.0 / (inv * inv) - s->eps) * unbias;
    ctx->out[0][c] = (float)((1.0 - m) * ctx->in[0][c] + m * ctx->in[2][c]);
    ctx->out[1][c] = (float)((1.0 - m) * ctx->in[1][c] + m * bvar);
  }
}

static const hwt_op_impl GRAD_NORM[] = {
    {"batch_norm_train", bnt_prepare, bnt_run, hwt_ops_free_state},
    {"batch_norm_train_grad", bntg_prepare, bntg_run, hwt_ops_free_state},
    {"batch_norm_grad", bng_prepare, bng_run, hwt_ops_free_state},
    {"batch_norm_stats_update", bns_prepare, bns_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_grad_norm, GRAD_NORM)
