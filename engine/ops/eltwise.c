/* Element-wise op family: one op type per model-op row of the kernel
 * library's table (hwtune/eltwise_ops.def), so a new row is an engine op
 * without a change here. Operands of the output's shape run the SIMD kernels
 * on cache-line shares (hwt_eltwise_run_part); broadcasting operands walk the
 * output with per-input strides (0 along broadcast dimensions) over
 * collapsed dims, each row through the same kernels. NARY ops (sum) fold
 * their inputs left to right. Attributes come from the model, defaulting to
 * the table's. */
#include <stdlib.h>
#include "hwtune/eltwise.h"
#include "ops_util.h"
#include "eltwise_broadcast.h"

typedef struct {
  hwt_eltwise_desc desc; /* op, ISA, attributes; n = output elements */
  int same;              /* every input has the output's element count */
  hwt_bc_walk walk;      /* the broadcasting walk, when !same */
} ew_state;

static int ew_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  int op = hwt_eltwise_find(hwt_graph_op_type(ctx->g, ctx->op));
  if (op < 0 || !hwt_eltwise_is_graph_op(op))
    return hwt_ops_fail(err, errlen, ctx, "not an element-wise op");
  if (ctx->n_out != 1 || ctx->n_in < 1 || ctx->n_in > HWT_OP_MAX_IO)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs or outputs");
  const int kind = hwt_eltwise_kind(op), operands = hwt_eltwise_operands(op);
  int out_t = hwt_ops_out(ctx, 0);
  int64_t n = hwt_ops_numel(ctx->g, out_t);
  int same = 1;
  for (int i = 0; i < ctx->n_in; i++)
    same = same && hwt_ops_numel(ctx->g, hwt_ops_in(ctx, i)) == n;
  if (kind == HWT_EW_NARY ? ctx->n_in < 2 : ctx->n_in != operands)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs");
  if ((kind == HWT_EW_UNARY || kind == HWT_EW_TERNARY) && !same)
    return hwt_ops_fail(err, errlen, ctx, "inputs must have the output's shape");
  ew_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  hwt_eltwise_desc_init(&s->desc, (hwt_ew_op)op, ctx->isa, (size_t)n);
  /* outputs feed the next op: keep them in cache (no streaming stores) */
  if (hwt_eltwise_check(&s->desc) != HWT_OK) s->desc.isa = HWT_ISA_GENERIC;
  for (int i = 0; i < hwt_eltwise_attr_count(op); i++)
    s->desc.attr[i] = (float)hwt_ops_float(ctx, hwt_eltwise_attr_name(op, i),
                                           hwt_eltwise_attr_default(op, i));
  s->same = same;
  if (!same && hwt_bc_walk_init(&s->walk, ctx->g, ctx->n_in,
                                hwt_graph_op_inputs(ctx->g, ctx->op), out_t) != HWT_OK) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "input shapes do not broadcast to the output");
  }
  return hwt_ops_prepared(ctx, s, 0,
                          (double)n * hwt_eltwise_flops(op) *
                              (kind == HWT_EW_NARY ? ctx->n_in - 1 : 1));
}

static void ew_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const ew_state *s = ctx->state;
  float *out = ctx->out[0];
  if (!s->same) {
    int64_t lo, hi;
    hwt_ops_range(s->walk.n, tid, nth, &lo, &hi);
    hwt_bc_walk_run(&s->walk, &s->desc, ctx->in, out, lo, hi);
    return;
  }
  const int k = hwt_eltwise_operands(s->desc.op);
  hwt_eltwise_run_part(&s->desc, ctx->in[0], k >= 2 ? ctx->in[1] : NULL,
                       k >= 3 ? ctx->in[2] : NULL, out, tid, nth);
  /* NARY: fold the rest into out; every call splits out into the same
   * shares, so each thread only reads what it wrote. */
  if (hwt_eltwise_kind(s->desc.op) == HWT_EW_NARY)
    for (int i = 2; i < ctx->n_in; i++)
      hwt_eltwise_run_part(&s->desc, out, ctx->in[i], NULL, out, tid, nth);
}

static const hwt_op_impl k_eltwise[] = {
#define HWT_EW_OP(id, name, ...) {name, ew_prepare, ew_run, hwt_ops_free_state},
#define HWT_EW_KERNEL_OP(...)
#include "hwtune/eltwise_ops.def"
};

HWT_OPS_FAMILY(hwt_ops_eltwise, k_eltwise)
