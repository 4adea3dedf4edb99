/* The ready-op max-heap both level-ordered schedulers (critical-path,
 * corun) keep: highest priority (level) first, ties to the lower op id so
 * equal levels keep a stable order. Inline: it is on the dispatch path.
 * The caller owns synchronisation (the token in sched_cp.c, the lock in
 * sched_corun.c). */
#ifndef HWTUNE_EXEC_PRIO_HEAP_H
#define HWTUNE_EXEC_PRIO_HEAP_H
#include "exec_internal.h"

static inline int hwt_prio_higher(const hwt_engine *e, int a, int b) {
  return e->prio[a] > e->prio[b] || (e->prio[a] == e->prio[b] && a < b);
}

static inline void hwt_prio_heap_push(const hwt_engine *e, int *h, int *n, int op) {
  int i = (*n)++;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!hwt_prio_higher(e, op, h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = op;
}

/* A run's start: the heap holds exactly the ops ready before anything ran. */
static inline void hwt_prio_heap_roots(const hwt_engine *e, int *h, int *n) {
  *n = 0;
  for (int i = 0; i < e->n_roots; i++) hwt_prio_heap_push(e, h, n, e->roots[i]);
}

/* Whether the master that made s ready keeps it and runs it next (inputs
 * still in its cache): nothing waiting in the heap is more critical than s
 * by more than the graph's slack (levels.c), nor by more than s's own cost.
 * The slack is the whole graph's surplus of work over its longest path, not
 * a budget per decision: PathNet's first layer on 4 executors (6 CONVs of
 * 1.9 ms, each followed by a ReLU of 0.5 ms) had each master keep its ReLU
 * while CONVs 5 and 6, more critical by a CONV's time, waited for a free
 * executor, and the layer ended one ReLU later; critical-path's 4x16 was
 * predicted 8.3% slower than the shared queue's (forward pass on the Xeon
 * Phi description). Over equal chains walked depth-first
 * (what the slack is for) the op waiting at the kept one's depth is more
 * critical by exactly one op's cost: still kept. */
static inline int hwt_prio_heap_keeps(const hwt_engine *e, const int *h, int n, int s) {
  if (n == 0) return 1;
  double gap = e->prio[h[0]] - e->prio[s];
  /* levels are sums of costs: allow their rounding */
  return gap <= e->slack && gap <= e->cost[s] * (1.0 + 1e-9) + 1e-15;
}

/* Removes and returns the top; *n must be > 0. */
static inline int hwt_prio_heap_pop(const hwt_engine *e, int *h, int *n) {
  int top = h[0], last = h[--(*n)], i = 0;
  for (;;) {
    int l = 2 * i + 1, best = l;
    if (l >= *n) break;
    if (l + 1 < *n && hwt_prio_higher(e, h[l + 1], h[l])) best = l + 1;
    if (!hwt_prio_higher(e, h[best], last)) break;
    h[i] = h[best];
    i = best;
  }
  if (*n > 0) h[i] = last;
  return top;
}

#endif
