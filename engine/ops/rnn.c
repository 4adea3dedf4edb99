/* The recurrent op family: lstm_cell (src/hwtune/graph/ops/rnn.py) on the
 * LSTM cell kernel (hwtune/rnn.h). Inputs: gates [B, 4H], c_prev [B, H],
 * optional x_gates [R, 4H] (rows x_row .. x_row + B are added: a step's rows
 * of a hoisted input projection, read in place instead of sliced out),
 * optional bias [4H]. Outputs h and c, [B, H] each. */
#include <stdlib.h>
#include "hwtune/rnn.h"
#include "ops_util.h"

typedef struct {
  hwt_lstm_cell_plan plan;
  size_t x_offset; /* floats from x_gates to row x_row */
} lstm_state;

static int lstm_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  if (ctx->n_in < 2 || ctx->n_in > 4 || ctx->n_out != 2)
    return hwt_ops_fail(err, errlen, ctx,
                        "lstm_cell takes gates, c_prev[, x_gates[, bias]] and gives h, c");
  int gates = hwt_ops_in(ctx, 0);
  if (hwt_graph_tensor_ndim(g, gates) != 2)
    return hwt_ops_fail(err, errlen, ctx, "gates must be [B, 4H]");
  const int64_t *gs = hwt_graph_tensor_shape(g, gates);
  const int64_t B = gs[0], H = gs[1] / 4;
  if (B < 1 || H < 1 || gs[1] % 4 || B > INT32_MAX || 4 * H > INT32_MAX)
    return hwt_ops_fail(err, errlen, ctx, "gates must be [B, 4H] with B, H >= 1");
  int64_t x_row = hwt_ops_int(ctx, "x_row", 0);
  if (hwt_ops_numel(g, hwt_ops_in(ctx, 1)) != B * H)
    return hwt_ops_fail(err, errlen, ctx, "c_prev must be [B, H]");
  for (int o = 0; o < 2; o++)
    if (hwt_ops_numel(g, hwt_ops_out(ctx, o)) != B * H)
      return hwt_ops_fail(err, errlen, ctx, "h and c must be [B, H]");
  if (ctx->n_in > 2) {
    int xg = hwt_ops_in(ctx, 2);
    const int64_t *xs = hwt_graph_tensor_shape(g, xg);
    if (hwt_graph_tensor_ndim(g, xg) != 2 || xs[1] != 4 * H)
      return hwt_ops_fail(err, errlen, ctx, "x_gates must be [R, 4H]");
    if (x_row < 0 || x_row + B > xs[0])
      return hwt_ops_fail(err, errlen, ctx, "x_row + B is past the rows of x_gates");
  } else if (x_row != 0) {
    return hwt_ops_fail(err, errlen, ctx, "x_row needs an x_gates input");
  }
  if (ctx->n_in > 3 && hwt_ops_numel(g, hwt_ops_in(ctx, 3)) != 4 * H)
    return hwt_ops_fail(err, errlen, ctx, "bias must be [4H]");
  lstm_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  hwt_lstm_cell_desc d = {(int)B, (int)H, ctx->n_in > 2, ctx->n_in > 3, ctx->isa};
  int st = hwt_lstm_cell_plan_make(&d, ctx->max_threads, &s->plan);
  if (st != HWT_OK) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "no LSTM cell plan for this ISA");
  }
  s->x_offset = (size_t)x_row * (size_t)(4 * H);
  /* As graph/ops/rnn.py counts: one per add, mul and activation element. */
  return hwt_ops_prepared(ctx, s, s->plan.ws_floats,
                          (double)B * (double)H * (4.0 * (ctx->n_in - 2) + 9.0));
}

static void lstm_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const lstm_state *s = ctx->state;
  const float *xg = ctx->n_in > 2 ? ctx->in[2] + s->x_offset : NULL;
  const float *bias = ctx->n_in > 3 ? ctx->in[3] : NULL;
  hwt_lstm_cell_run_part(&s->plan, ctx->in[0], xg, bias, ctx->in[1], ctx->out[0], ctx->out[1],
                         ws, tid, nth);
}

static const hwt_op_impl k_rnn[] = {
    {"lstm_cell", lstm_prepare, lstm_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_rnn, k_rnn)
