/* Element-wise op family: add sub mul div minimum maximum mod sum affine
 * sigmoid tanh relu abs. Same-shape add/sub/mul/sigmoid/tanh/relu go to the
 * SIMD kernels (hwtune/eltwise.h); everything else walks the output with
 * per-input strides (0 along broadcast dimensions) over collapsed dims. */
#include <math.h>
#include <stdlib.h>
#include "hwtune/eltwise.h"
#include "ops_util.h"
#include "eltwise_broadcast.h"

typedef enum { K_BINARY, K_SUM, K_UNARY, K_AFFINE } ew_kind;

typedef struct {
  ew_kind kind;
  hwt_bc_op op;         /* binary / unary scalar function */
  int use_kernel;       /* 1: same-shape op served by hwt_eltwise_run_part */
  hwt_eltwise_desc desc;
  float scale, shift;
  hwt_bc_walk walk;     /* the broadcasting walk (binary, sum) */
} ew_state;

static const struct {
  const char *type;
  ew_kind kind;
  hwt_bc_op op;
  int kernel_op; /* hwt_ew_op serving the same-shape case, or -1 */
} k_types[] = {
    {"add", K_BINARY, HWT_BC_ADD, HWT_EW_ADD},
    {"sub", K_BINARY, HWT_BC_SUB, HWT_EW_SUB},
    {"mul", K_BINARY, HWT_BC_MUL, HWT_EW_MUL},
    {"div", K_BINARY, HWT_BC_DIV, -1},
    {"minimum", K_BINARY, HWT_BC_MIN, -1},
    {"maximum", K_BINARY, HWT_BC_MAX, -1},
    {"mod", K_BINARY, HWT_BC_MOD, -1},
    {"sum", K_SUM, HWT_BC_ADD, -1},
    {"affine", K_AFFINE, HWT_BC_ADD, -1},
    {"sigmoid", K_UNARY, HWT_BC_ADD, HWT_EW_SIGMOID},
    {"tanh", K_UNARY, HWT_BC_ADD, HWT_EW_TANH},
    {"relu", K_UNARY, HWT_BC_ADD, HWT_EW_RELU},
    {"abs", K_UNARY, HWT_BC_ABS, -1},
};

static int ew_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const char *type = hwt_graph_op_type(ctx->g, ctx->op);
  int ti = -1;
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
    if (strcmp(k_types[i].type, type) == 0) ti = (int)i;
  if (ti < 0) return hwt_ops_fail(err, errlen, ctx, "not an element-wise op");
  if (ctx->n_out != 1 || ctx->n_in < 1 || ctx->n_in > HWT_OP_MAX_IO)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs or outputs");
  ew_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->kind = k_types[ti].kind;
  s->op = k_types[ti].op;
  int out_t = hwt_ops_out(ctx, 0);
  int64_t n = hwt_ops_numel(ctx->g, out_t);
  int same = 1;
  for (int i = 0; i < ctx->n_in; i++)
    same = same && hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) == n;
  if (s->kind == K_UNARY || s->kind == K_AFFINE) {
    if (ctx->n_in != 1 || !same) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "a unary op takes one input of the output's shape");
    }
    s->scale = (float)hwt_ops_float(ctx, "scale", 1.0);
    s->shift = (float)hwt_ops_float(ctx, "shift", 0.0);
  } else {
    if ((s->kind == K_BINARY && ctx->n_in != 2) || ctx->n_in < 2) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs");
    }
    int rc = hwt_bc_walk_init(&s->walk, ctx->g, ctx->n_in, hwt_graph_op_inputs(ctx->g, ctx->op),
                              out_t);
    if (rc != HWT_OK) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "input shapes do not broadcast to the output");
    }
  }
  if (k_types[ti].kernel_op >= 0) {
    s->desc.op = (hwt_ew_op)k_types[ti].kernel_op;
    s->desc.isa = ctx->isa;
    s->desc.n = (size_t)n;
    s->desc.nt_stores = 0; /* outputs feed the next op: keep them in cache */
    s->use_kernel = same && hwt_eltwise_check(&s->desc) == HWT_OK;
  }
  ctx->state = s;
  ctx->ws_floats = 0;
  ctx->flops = (double)n * (s->kind == K_SUM ? ctx->n_in - 1 : s->kind == K_AFFINE ? 2 : 1);
  return HWT_OK;
}

static void ew_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const ew_state *s = ctx->state;
  if (s->use_kernel) {
    hwt_eltwise_run_part(&s->desc, ctx->in[0], ctx->n_in > 1 ? ctx->in[1] : NULL, NULL,
                         ctx->out[0], tid, nth);
    return;
  }
  if (s->kind == K_BINARY || s->kind == K_SUM) {
    int64_t lo, hi;
    hwt_ops_range(s->walk.n, tid, nth, &lo, &hi);
    hwt_bc_walk_run(&s->walk, s->op, ctx->in, ctx->out[0], lo, hi);
    return;
  }
  int64_t lo, hi;
  hwt_ops_range(hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)), tid, nth, &lo, &hi);
  const float *x = ctx->in[0];
  float *y = ctx->out[0];
  if (s->kind == K_AFFINE) {
    for (int64_t i = lo; i < hi; i++) y[i] = x[i] * s->scale + s->shift;
  } else if (s->op == HWT_BC_ABS) {
    for (int64_t i = lo; i < hi; i++) y[i] = fabsf(x[i]);
  } else {
    /* sigmoid/tanh/relu without a usable kernel variant: the portable
     * reference computes the same function. */
    hwt_eltwise_ref(s->desc.op, x + lo, NULL, NULL, y + lo, (size_t)(hi - lo));
  }
}

static void ew_release(hwt_op_ctx *ctx) {
  free(ctx->state);
  ctx->state = NULL;
}

#define EW(name) {name, ew_prepare, ew_run, ew_release}
static const hwt_op_impl k_eltwise[] = {
    EW("add"),  EW("sub"),    EW("mul"),     EW("div"),  EW("minimum"), EW("maximum"), EW("mod"),
    EW("sum"),  EW("affine"), EW("sigmoid"), EW("tanh"), EW("relu"),    EW("abs"),
};

const hwt_op_impl *hwt_ops_eltwise(int *n) {
  *n = (int)(sizeof k_eltwise / sizeof k_eltwise[0]);
  return k_eltwise;
}
