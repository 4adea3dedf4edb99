/* Index op family: argmax (semantics in src/hwtune/graph/ops/argmax.py).
 * Around the axis the input is outer x K x inner; each thread takes a share
 * of the outer x inner output positions and scans K for each, the first
 * largest winning (a NaN beats any number; select_last_index scans from the
 * end, which makes the last largest win). */
#include <math.h>
#include "ops_util.h"

typedef struct {
  int64_t outer, k, inner;
  int last;
} argmax_state;

static int argmax_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  int rank = 0;
  if (ctx->n_in != 1 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "argmax takes one input and one output");
  const int64_t *xs = hwt_ops_in_shape(ctx, 0, &rank);
  int64_t axis = 0;
  if (hwt_ops_axis(ctx, rank, 0, &axis)) return hwt_ops_fail(err, errlen, ctx, "bad axis");
  argmax_state st = {hwt_ops_prod(xs, 0, (int)axis), xs[axis],
                     hwt_ops_prod(xs, (int)axis + 1, rank),
                     (int)hwt_ops_int(ctx, "select_last_index", 0)};
  if (st.k < 1 || st.outer * st.inner != hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)))
    return hwt_ops_fail(err, errlen, ctx, "output shape does not match the axis");
  return hwt_ops_keep(ctx, &st, sizeof st, 0, (double)(st.outer * st.k * st.inner));
}

static void argmax_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const argmax_state *s = ctx->state;
  int64_t lo, hi;
  (void)ws;
  hwt_ops_rows(s->outer * s->inner, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *x = ctx->in[0] + (r / s->inner) * s->k * s->inner + r % s->inner;
    int64_t best = s->last ? s->k - 1 : 0;
    const int64_t step = s->last ? -1 : 1;
    float bv = x[best * s->inner];
    for (int64_t j = best + step; j >= 0 && j < s->k && !isnan(bv); j += step) {
      const float v = x[j * s->inner];
      if (v > bv || isnan(v)) bv = v, best = j;
    }
    ctx->out[0][r] = (float)best;
  }
}

static const hwt_op_impl k_argmax[] = {
    {"argmax", argmax_prepare, argmax_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_argmax, k_argmax)
