/* Per-op costs, priorities, and the tiny-op and solo flags, from the plan
 * and the configuration. */
#include "sched.h"

/* Below this estimated time an op is not worth a dispatch: going through
 * the inbox, heap, token and an executor's slot measured 0.66 us/op against
 * 0.10 us/op inline (a chain of 400 no-op ops, critical-path scheduler,
 * 2 executors x 1 thread, spinning masters, median of 31 runs on this
 * 2-core Cascade Lake). Inlining below 2 us keeps that overhead under ~25%
 * of the op; longer ops are worth handing to another executor. */
#define HWT_EXEC_TINY_S 2e-6

/* Below this estimated time an op runs on its team's master alone, without
 * a fork-join. Measured on chains of 200 same-shape adds, sequential 1x2,
 * every op forced to 1 or to 2 threads (medians of 15 x 5 runs, this 2-core
 * Cascade Lake under load ~9): 2048 floats (estimate 2.5 us) 0.2-0.3 us/op
 * alone vs 3-8 us/op forked; 3072 floats (3.7 us) 3.9 vs 10 us/op; 4096
 * floats (4.9 us) 4.8 vs 2.7 us/op; 32768 floats (39 us) 21.2 vs 20.6
 * us/op. The fork-join costs 2-4 us here, so splitting pays from ~4 us of
 * estimated work. */
#define HWT_EXEC_SOLO_S 4e-6

int hwt_exec_solo(const hwt_engine *e, int op) { return e->solo[op]; }

/* A reshape the planner made a view (plan/views.c): its output has its
 * input's arena offset, so running it is a pointer compare. From the plan,
 * not the tensor pointers: the simulator's virtual engine has none. */
static int is_view(const hwt_engine *e, int op) {
  if (hwt_graph_op_n_inputs(e->g, op) != 1 || hwt_graph_op_n_outputs(e->g, op) != 1) return 0;
  const int64_t *off = hwt_plan_offsets(e->plan);
  int64_t x = off[hwt_graph_op_inputs(e->g, op)[0]];
  return x >= 0 && x == off[hwt_graph_op_outputs(e->g, op)[0]];
}

void hwt_exec_levels(hwt_engine *e) {
  double *cost = e->cost;
  const double *plan_cost = hwt_plan_cost(e->plan);
  const int *order = hwt_plan_order(e->plan);
  const int *off = hwt_plan_succ_offsets(e->plan), *succ = hwt_plan_succ(e->plan);
  for (int i = 0; i < e->n_ops; i++) {
    cost[i] = e->op_cost && e->op_cost[i] >= 0 ? e->op_cost[i] : plan_cost[i];
    /* Folded ops never run and views copy nothing: they add nothing to any
     * path, and a view runs inline on one thread. */
    if (e->folded[i] || is_view(e, i)) cost[i] = 0;
    e->tiny[i] = cost[i] < HWT_EXEC_TINY_S;
    e->solo[i] = cost[i] < HWT_EXEC_SOLO_S;
  }
  /* level = own cost + the longest remaining path among successors. */
  for (int k = e->n_ops - 1; k >= 0; k--) {
    int op = order[k];
    double best = 0;
    for (int j = off[op]; j < off[op + 1]; j++)
      if (e->prio[succ[j]] > best) best = e->prio[succ[j]];
    e->prio[op] = cost[op] + best;
  }
  /* Slack: how far below the most critical waiting op a master's own ready
   * successor may be and still run next on that master (cache-hot inputs).
   * With P executors no schedule beats max(longest path, work / P); the
   * surplus of work / P over the longest path is time every op can wait
   * without lengthening that bound. The wide graph (8 chains x 125 adds of
   * 32768 floats, 2 executors: work/P = 4 x the path) ran in 44.7 ms with
   * strict level order, which goes breadth-first over the chains (eight
   * 128 KiB heads > the 1 MiB L2), against 24.0 ms depth-first (critical-
   * path 1x1, medians of 7; sequential 25.6 ms). Configured priorities are
   * obeyed strictly. */
  double work = 0, path = 0;
  for (int i = 0; i < e->n_ops; i++) {
    work += cost[i];
    if (e->prio[i] > path) path = e->prio[i];
  }
  /* Worker groups: a lane is a team's worth of workers. */
  int lanes = e->sched->info.worker_groups ? e->executors / e->default_nth : e->executors;
  e->slack = work / (lanes > 0 ? lanes : 1) - path;
  if (e->slack < 0 || e->op_priority) e->slack = 0;
  if (e->op_priority)
    for (int i = 0; i < e->n_ops; i++) e->prio[i] = e->op_priority[i];
}
