/* Point-wise training ops: relu_grad, sigmoid_grad, tanh_grad, abs_grad (dx
 * from a forward tensor and dy), minimum_grad and maximum_grad (both
 * operands' shares of dy, numpy broadcasting), and the optimizer updates
 * sgd_update and adam_update, as src/hwtune/graph/ops/train.py defines them.
 *
 * Each element is independent, so threads take cache-line-aligned ranges
 * (hwt_ops_range). The loops are plain C over restrict pointers that the
 * compiler vectorises; they are memory-bound (2-5 streams, 1-10 flops per
 * element), so the ISA-specific element-wise bodies would add little.
 * adam_update computes in double as the reference does: its bias
 * corrections 1 - beta^t are cancellation-prone in float for small t. */
#include <math.h>
#include <stdlib.h>
#include "eltwise_broadcast.h"
#include "ops_util.h"

typedef struct {
  int64_t n;
  double a[5]; /* the op's float attributes in declaration order */
} pw_state;

static int pw_setup(hwt_op_ctx *ctx, int n_in, int n_out, const char *const *keys,
                    const double *defs, int nattr, char *err, size_t errlen) {
  if (ctx->n_in != n_in || ctx->n_out != n_out)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs or outputs");
  pw_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->n = hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 0));
  for (int i = 0; i < n_in; i++) {
    const int64_t want = i == 4 && n_in == 5 ? 1 : s->n; /* adam's step is [1] */
    if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) != want) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "inputs must have the same number of elements");
    }
  }
  for (int i = 0; i < nattr; i++) s->a[i] = hwt_ops_float(ctx, keys[i], defs[i]);
  return hwt_ops_prepared(ctx, s, 0, 4.0 * (double)s->n);
}

static int relu_grad_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  static const char *const keys[] = {"alpha"};
  static const double defs[] = {0.0};
  return pw_setup(ctx, 2, 1, keys, defs, 1, err, errlen);
}

static int unary_grad_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return pw_setup(ctx, 2, 1, NULL, NULL, 0, err, errlen);
}

/* The run of a unary gradient: dx[i] = DX, an expression of the forward
 * tensor FWD (x or y, input 0), dy (input 1) and alpha (attribute 0, where
 * the op has one), over this share's range. */
#define UNARY_GRAD_RUN(name, FWD, DX)                                         \
  static void name(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {      \
    const pw_state *s = ctx->state;                                           \
    const float *restrict FWD = ctx->in[0], *restrict dy = ctx->in[1];        \
    float *restrict dx = ctx->out[0];                                         \
    const float alpha = (float)s->a[0];                                       \
    (void)alpha;                                                              \
    int64_t lo, hi;                                                           \
    hwt_ops_range(s->n, tid, nth, &lo, &hi);                                  \
    for (int64_t i = lo; i < hi; i++) dx[i] = DX;                             \
  }

UNARY_GRAD_RUN(relu_grad_run, x, x[i] > 0.0f ? dy[i] : alpha * dy[i])
UNARY_GRAD_RUN(sigmoid_grad_run, y, dy[i] * y[i] * (1.0f - y[i]))
UNARY_GRAD_RUN(tanh_grad_run, y, dy[i] * (1.0f - y[i] * y[i]))
/* sign(0) = 0 */
UNARY_GRAD_RUN(abs_grad_run, x, x[i] > 0.0f ? dy[i] : x[i] < 0.0f ? -dy[i] : 0.0f)

/* minimum_grad / maximum_grad: a and b broadcast to dy's shape, walked as
 * the broadcasting element-wise ops walk them (eltwise_broadcast.h). */
typedef struct {
  hwt_bc_walk w; /* inputs a, b, dy over the output's shape */
  int larger;    /* 1: maximum, 0: minimum */
} minmax_state;

static int minmax_prepare(hwt_op_ctx *ctx, int larger, char *err, size_t errlen) {
  if (ctx->n_in != 3 || ctx->n_out != 2)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs or outputs");
  minmax_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  const int in[3] = {hwt_ops_in(ctx, 0), hwt_ops_in(ctx, 1), hwt_ops_in(ctx, 2)};
  if (hwt_bc_walk_init(&s->w, ctx->g, 3, in, hwt_ops_out(ctx, 0)) != HWT_OK ||
      hwt_ops_numel(ctx->g, in[2]) != s->w.n ||
      hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 1)) != s->w.n) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "a and b must broadcast to dy's shape");
  }
  s->larger = larger;
  return hwt_ops_prepared(ctx, s, 0, 2.0 * (double)s->w.n);
}

static int maximum_grad_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return minmax_prepare(ctx, 1, err, errlen);
}

static int minimum_grad_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return minmax_prepare(ctx, 0, err, errlen);
}

static void minmax_grad_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const minmax_state *s = ctx->state;
  const hwt_bc_walk *w = &s->w;
  float *restrict da = ctx->out[0], *restrict db = ctx->out[1];
  const int last = w->rank - 1;
  const int64_t sa = w->stride[0][last], sb = w->stride[1][last], sd = w->stride[2][last];
  int64_t lo, hi, idx[HWT_GRAPH_MAX_DIMS], rem;
  hwt_ops_range(w->n, tid, nth, &lo, &hi);
  rem = lo;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % w->shape[d];
    rem /= w->shape[d];
  }
  for (int64_t i = lo; i < hi;) {
    int64_t len = w->shape[last] - idx[last];
    if (len > hi - i) len = hi - i;
    int64_t oa = 0, ob = 0, od = 0;
    for (int d = 0; d <= last; d++) {
      oa += idx[d] * w->stride[0][d];
      ob += idx[d] * w->stride[1][d];
      od += idx[d] * w->stride[2][d];
    }
    const float *a = ctx->in[0] + oa, *b = ctx->in[1] + ob, *dy = ctx->in[2] + od;
    for (int64_t j = 0; j < len; j++) {
      const float x = a[j * sa], y = b[j * sb], g = dy[j * sd];
      /* PyTorch's rule: a tie splits dy, a NaN operand (no order) passes
       * it to both, as np.where on the comparisons does in the reference */
      const int a_wins = s->larger ? x > y : x < y, b_wins = s->larger ? y > x : y < x;
      const float half = x == y ? 0.5f * g : g;
      da[i + j] = b_wins ? 0.0f : half;
      db[i + j] = a_wins ? 0.0f : half;
    }
    i += len;
    idx[last] += len;
    for (int d = last; d > 0 && idx[d] == w->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

static int sgd_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  static const char *const keys[] = {"lr", "momentum", "weight_decay"};
  static const double defs[] = {0.01, 0.9, 0.0};
  return pw_setup(ctx, 3, 2, keys, defs, 3, err, errlen);
}

static void sgd_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pw_state *s = ctx->state;
  const float *restrict p = ctx->in[0], *restrict g = ctx->in[1], *restrict m = ctx->in[2];
  float *restrict p1 = ctx->out[0], *restrict m1 = ctx->out[1];
  const float lr = (float)s->a[0], mu = (float)s->a[1], wd = (float)s->a[2];
  int64_t lo, hi;
  hwt_ops_range(s->n, tid, nth, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) {
    const float mi = mu * m[i] + (g[i] + wd * p[i]);
    m1[i] = mi;
    p1[i] = p[i] - lr * mi;
  }
}

static int adam_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  static const char *const keys[] = {"lr", "beta1", "beta2", "epsilon"};
  static const double defs[] = {0.001, 0.9, 0.999, 1e-8};
  return pw_setup(ctx, 5, 3, keys, defs, 4, err, errlen);
}

static void adam_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pw_state *s = ctx->state;
  const float *restrict p = ctx->in[0], *restrict g = ctx->in[1];
  const float *restrict m = ctx->in[2], *restrict v = ctx->in[3];
  float *restrict p1 = ctx->out[0], *restrict m1 = ctx->out[1], *restrict v1 = ctx->out[2];
  const double lr = s->a[0], b1 = s->a[1], b2 = s->a[2], eps = s->a[3], t = ctx->in[4][0];
  const double c1 = 1.0 / (1.0 - pow(b1, t)), c2 = 1.0 / (1.0 - pow(b2, t));
  int64_t lo, hi;
  hwt_ops_range(s->n, tid, nth, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) {
    const double mi = b1 * m[i] + (1.0 - b1) * g[i];
    const double vi = b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i];
    m1[i] = (float)mi;
    v1[i] = (float)vi;
    p1[i] = (float)(p[i] - lr * (mi * c1) / (sqrt(vi * c2) + eps));
  }
}

static const hwt_op_impl GRAD_POINTWISE[] = {
    {"relu_grad", relu_grad_prepare, relu_grad_run, hwt_ops_free_state},
    {"sigmoid_grad", unary_grad_prepare, sigmoid_grad_run, hwt_ops_free_state},
    {"tanh_grad", unary_grad_prepare, tanh_grad_run, hwt_ops_free_state},
    {"abs_grad", unary_grad_prepare, abs_grad_run, hwt_ops_free_state},
    {"minimum_grad", minimum_grad_prepare, minmax_grad_run, hwt_ops_free_state},
    {"maximum_grad", maximum_grad_prepare, minmax_grad_run, hwt_ops_free_state},
    {"sgd_update", sgd_prepare, sgd_run, hwt_ops_free_state},
    {"adam_update", adam_prepare, adam_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_grad_pointwise, GRAD_POINTWISE)
