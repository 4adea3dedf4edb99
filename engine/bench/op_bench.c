/* One graph op timed as the engine runs it: its hwt_op_impl prepared on the
 * caller's buffers with the engine's workspace layout, each run a fork-join
 * of nth shares on team 0 of a pool (engine/exec/run_op.c does the same for
 * an op of a team). A tuner prepares one op per trial on a pool it keeps, so
 * a trial measures the kernel code, thread split and pool `hwtune run` uses
 * without creating threads or an engine per trial. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hwtune/bench.h"

struct hwt_bench_op {
  hwt_pool *pool;
  int nth;
  const hwt_op_impl *impl;
  hwt_op_ctx ctx;
  float *ws;
  size_t ws_stride; /* floats between threads' workspaces: whole cache lines */
};

static void op_share(void *arg, int tid, int nth) {
  const hwt_bench_op *b = arg;
  b->impl->run(&b->ctx, b->ws + (size_t)tid * b->ws_stride, tid, nth);
}

/* 1 when tensor t would be constant in an engine: a param, or the output
 * of an op with inputs that are all constant (exec/fold.c's rule; such
 * values are computed once at prepare). The caller's buffers for those
 * hold their final values for the bench's lifetime, so the op may derive
 * packed forms at prepare -- the CONV template's Winograd weights, without
 * which a tuner would time the direct fallback under the Winograd knob. */
static int constant_tensor(const hwt_graph *g, int t, int depth) {
  if (hwt_graph_tensor_kind(g, t) == HWT_TENSOR_PARAM) return 1;
  int p = hwt_graph_tensor_producer(g, t), n = p < 0 ? 0 : hwt_graph_op_n_inputs(g, p);
  if (n == 0 || depth > 64) return 0;
  const int *in = hwt_graph_op_inputs(g, p);
  for (int i = 0; i < n; i++)
    if (!constant_tensor(g, in[i], depth + 1)) return 0;
  return 1;
}

static hwt_bench_op *fail(hwt_bench_op *b, char *err, size_t errlen, const char *what) {
  if (err && errlen) snprintf(err, errlen, "%s", what);
  free(b);
  return NULL;
}

hwt_bench_op *hwt_bench_op_create(hwt_pool *p, int nth, const hwt_graph *g, int op, int isa,
                                  const float *const *in, float *const *out, char *err,
                                  size_t errlen) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK)
    return fail(NULL, err, errlen, "thread count outside the pool's team");
  if (!g || op < 0 || op >= hwt_graph_n_ops(g) || !in || !out)
    return fail(NULL, err, errlen, "no such op, or no buffers");
  if (isa < 0) isa = hwt_isa_select();
  if (isa < 0 || !hwt_isa_supported((hwt_isa)isa))
    return fail(NULL, err, errlen, "ISA variant not supported on this CPU");
  const char *type = hwt_graph_op_type(g, op);
  const hwt_op_impl *impl = hwt_ops_find(type);
  if (!impl) return fail(NULL, err, errlen, "no implementation of this op type");
  int n_in = hwt_graph_op_n_inputs(g, op), n_out = hwt_graph_op_n_outputs(g, op);
  if (n_in > HWT_OP_MAX_IO || n_out > HWT_OP_MAX_IO)
    return fail(NULL, err, errlen, "too many inputs or outputs");
  hwt_bench_op *b = calloc(1, sizeof *b);
  if (!b) return fail(NULL, err, errlen, "out of memory");
  b->pool = p;
  b->nth = nth;
  b->impl = impl;
  /* The context exactly as the engine's prepare_op fills it. */
  b->ctx.g = g;
  b->ctx.op = op;
  b->ctx.n_in = n_in;
  b->ctx.n_out = n_out;
  const int *ids = hwt_graph_op_inputs(g, op);
  for (int i = 0; i < n_in; i++) {
    b->ctx.in[i] = in[i];
    if (constant_tensor(g, ids[i], 0)) b->ctx.const_in |= (uint64_t)1 << i;
  }
  for (int i = 0; i < n_out; i++) b->ctx.out[i] = out[i];
  b->ctx.isa = (hwt_isa)isa;
  b->ctx.max_threads = nth;
  char why[200] = "";
  if (impl->prepare(&b->ctx, why, sizeof why) < 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s '%s': %s", type, hwt_graph_op_name(g, op),
             why[0] ? why : "prepare failed");
    return fail(b, err, errlen, msg);
  }
  size_t line = HWT_CACHELINE / sizeof(float);
  b->ws_stride = (b->ctx.ws_floats + line - 1) / line * line;
  b->ws = hwt_bench_alloc(b->ws_stride ? b->ws_stride * (size_t)nth : 1);
  if (!b->ws) {
    if (impl->release) impl->release(&b->ctx);
    return fail(b, err, errlen, "out of memory for the workspaces");
  }
  return b;
}

int hwt_bench_op_run(hwt_bench_op *b, int warmup, int reps, int inner, double *samples) {
  if (!b || !hwt_bench_loop_args_ok(warmup, reps, inner, samples)) return HWT_EINVAL;
  return hwt_bench_run_timed(b->pool, b->nth, op_share, b, warmup, reps, inner, samples);
}

void hwt_bench_op_destroy(hwt_bench_op *b) {
  if (!b) return;
  if (b->impl->release) b->impl->release(&b->ctx);
  free(b->ws);
  free(b);
}
