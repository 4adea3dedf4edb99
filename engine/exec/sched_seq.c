/* The sequential scheduler: team 0 runs every op in the plan's topological
 * order, each op forked over the team. The arena was planned with
 * HWT_REUSE_SEQUENTIAL, which is valid only for exactly this order. */
#include "exec_internal.h"

static void seq_team(void *arg, int team) {
  hwt_engine *e = arg;
  const int *order = hwt_plan_order(e->plan);
  for (int i = 0; i < e->n_ops; i++) hwt_exec_run_op(e, team, order[i]);
}

int hwt_sched_seq_run(hwt_engine *e) {
  /* run_teams rather than a direct fork from the caller: it pins the calling
   * thread to team 0's first CPU for the run when the pool is pinned. */
  return hwt_pool_run_teams(e->pool, seq_team, e);
}
