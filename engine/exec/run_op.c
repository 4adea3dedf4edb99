/* Running one op on one executor team, shared by every scheduler. */
#include "exec_internal.h"
#include "hwtune/bench.h"

typedef struct {
  const hwt_op_ctx *ctx;
  const hwt_op_impl *impl;
  float *ws;          /* this team's first thread's workspace */
  size_t ws_stride;
} op_task;

static void op_task_fn(void *arg, int tid, int nth) {
  const op_task *t = arg;
  t->impl->run(t->ctx, t->ws + (size_t)tid * t->ws_stride, tid, nth);
}

void hwt_exec_run_op(hwt_engine *e, int team, int op) {
  const int nth = e->op_nth[op];
  op_task t = {&e->ctx[op], e->impl[op],
               e->ws + (size_t)team * (size_t)e->team_size * e->ws_stride, e->ws_stride};
  double t0 = e->profile ? hwt_now() : 0.0;
  /* One thread: no fork-join round trip (it costs ~1 us even when spinning). */
  if (nth == 1)
    op_task_fn(&t, 0, 1);
  else
    hwt_team_parallel(e->pool, team, op_task_fn, &t, nth);
  if (e->profile) {
    hwt_op_event *ev = &e->events[op];
    ev->op = op;
    ev->executor = team;
    ev->threads = nth;
    ev->start_s = t0;
    ev->end_s = hwt_now();
  }
}

void hwt_exec_prefetch_succ(const hwt_engine *e, int op) {
  const int *off = hwt_plan_succ_offsets(e->plan), *succ = hwt_plan_succ(e->plan);
  /* Two: a chain has one, a fan-out's others wait for another executor. */
  for (int k = off[op]; k < off[op + 1] && k < off[op] + 2; k++) hwt_exec_prefetch(e, succ[k]);
}

void hwt_exec_reset_pending(hwt_engine *e) {
  const int *pc = e->init_pending;
  for (int i = 0; i < e->n_ops; i++) atomic_store_explicit(&e->pending[i], pc[i], memory_order_relaxed);
}

/* A chain of 10,000 64-float adds spends most of its time missing the cache
 * on each op's context (~1 KB apart: in[], out[] and state sit on three
 * lines) and on the kernel state behind it, not adding: perf put 47% of the
 * sequential run on the two loads of ctx->state and state->use_kernel. The
 * misses are independent, so fetching them an op or two ahead overlaps
 * them. */
void hwt_exec_prefetch(const hwt_engine *e, int op) {
  const hwt_op_ctx *c = &e->ctx[op];
  __builtin_prefetch(&c->in[0]);
  __builtin_prefetch(&c->out[0]);
  __builtin_prefetch(&c->state);
}

void hwt_exec_complete(hwt_engine *e, int op, void (*ready)(void *arg, int s), void *arg) {
  const int *off = hwt_plan_succ_offsets(e->plan), *succ = hwt_plan_succ(e->plan);
  for (int k = off[op]; k < off[op + 1]; k++) {
    int s = succ[k];
    /* acq_rel: the op that becomes ready must see every predecessor's output. */
    if (atomic_fetch_sub_explicit(&e->pending[s], 1, memory_order_acq_rel) == 1) ready(arg, s);
  }
}
