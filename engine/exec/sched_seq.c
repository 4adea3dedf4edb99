/* The sequential scheduler: team 0 runs every op in the plan's topological
 * order, each op forked over the team. The arena was planned with
 * HWT_REUSE_SEQUENTIAL, which is valid only for exactly this order. */
#include "sched.h"

/* Prefetch distance in ops: the context of op i+2 while op i runs, so that
 * op i+1's state pointer is already in cache when its state is prefetched
 * one op ahead. On the 10,000-add chain (64 floats, 1x1, medians over 2 s,
 * load ~9-15) this took 0.78 us/op to 0.115 us/op; other distances were not
 * measured. */
#define SEQ_PREFETCH_AHEAD 2

static void seq_team(void *arg, int team) {
  hwt_engine *e = arg;
  const int *order = e->run_order;
  const int n = e->n_run;
  for (int i = 0; i < n && i < SEQ_PREFETCH_AHEAD; i++) hwt_exec_prefetch(e, order[i]);
  for (int i = 0; i < n; i++) {
    if (i + SEQ_PREFETCH_AHEAD < n) hwt_exec_prefetch(e, order[i + SEQ_PREFETCH_AHEAD]);
    /* op i+1's context line arrived meanwhile: now its kernel state */
    if (i + 1 < n) __builtin_prefetch(e->ctx[order[i + 1]].state);
    hwt_exec_run_op(e, team, order[i]);
  }
}

static int seq_run(hwt_engine *e, void *state) {
  (void)state;
  /* run_teams rather than a direct fork from the caller: it pins the calling
   * thread to team 0's first CPU for the run when the pool is pinned. */
  return hwt_pool_run_teams(e->pool, seq_team, e);
}

/* ---- virtual time: the next op of run_order, on team 0, when one ends ---- */

typedef struct {
  int next; /* index into run_order of the op to start next */
} seq_vstate;

static int seq_vinit(hwt_engine *e, void **vstate) {
  return (*vstate = hwt_sched_alloc(e, sizeof(seq_vstate))) ? HWT_OK : HWT_ENOMEM;
}

static void seq_vnext(hwt_vrun *v, seq_vstate *s) {
  hwt_engine *e = v->e;
  if (s->next < e->n_run) {
    int op = e->run_order[s->next++];
    hwt_vrun_start(v, 0, op, 0, e->op_nth[op], 0);
  }
}

static void seq_vstart(hwt_vrun *v, void *vstate) {
  seq_vstate *s = vstate;
  s->next = 0;
  seq_vnext(v, s);
}

static void seq_vdone(hwt_vrun *v, void *vstate, int w, int op, int last) {
  (void)w, (void)op, (void)last;
  seq_vnext(v, vstate);
}

const hwt_sched_impl hwt_sched_sequential = {
    .info = {.name = "sequential",
             .summary = "one executor, all threads, the plan's topological order",
             .single_team = 1,
             .in_order = 1,
             .pins = HWT_PIN_ON_REQUEST,
             .default_one = 1},
    .run = seq_run,
    .vinit = seq_vinit,
    .vstart = seq_vstart,
    .vdone = seq_vdone,
    .vplaces = 1,
};
