/* Per-op costs, priorities and the tiny-op flag, from the plan and the
 * configuration. */
#include "exec_internal.h"

/* Below this estimated time an op is not worth a dispatch: going through
 * the inbox, heap, token and an executor's slot measured 0.66 us/op against
 * 0.10 us/op inline (a chain of 400 no-op ops, critical-path scheduler,
 * 2 executors x 1 thread, spinning masters, median of 31 runs on this
 * 2-core Cascade Lake). Inlining below 2 us keeps that overhead under ~25%
 * of the op; longer ops are worth handing to another executor. */
#define HWT_EXEC_TINY_S 2e-6

void hwt_exec_levels(hwt_engine *e, double *cost) {
  const double *plan_cost = hwt_plan_cost(e->plan);
  const int *order = hwt_plan_order(e->plan);
  const int *off = hwt_plan_succ_offsets(e->plan), *succ = hwt_plan_succ(e->plan);
  for (int i = 0; i < e->n_ops; i++) {
    cost[i] = e->op_cost && e->op_cost[i] >= 0 ? e->op_cost[i] : plan_cost[i];
    e->tiny[i] = cost[i] < HWT_EXEC_TINY_S;
  }
  /* level = own cost + the longest remaining path among successors. */
  for (int k = e->n_ops - 1; k >= 0; k--) {
    int op = order[k];
    double best = 0;
    for (int j = off[op]; j < off[op + 1]; j++)
      if (e->prio[succ[j]] > best) best = e->prio[succ[j]];
    e->prio[op] = cost[op] + best;
  }
  if (e->op_priority)
    for (int i = 0; i < e->n_ops; i++) e->prio[i] = e->op_priority[i];
}
