/* Layout of hwt_plan and the planner's internal steps. */
#ifndef HWTUNE_PLAN_INTERNAL_H
#define HWTUNE_PLAN_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "../graph/graph_internal.h"
#include "hwtune/plan.h"

struct hwt_plan {
  int n_ops, n_tensors, n_roots;
  int reuse, reach_exact;
  int *order, *position, *pred_count, *succ_off, *succ, *roots;
  double *cost, *level;
  int64_t *offset;
  int64_t arena_bytes, arena_no_reuse, peak_live;
};

/* Strict-ancestor bitsets indexed by topological position. Row p keeps the
 * `stride` words ending at word p/64, i.e. the positions from
 * base(p) = 64 * max(0, p/64 - stride + 1) up to p: all of them (exact) when
 * stride covers the whole order, a window of recent positions otherwise.
 * A window is still exact inside itself (any path between two positions
 * only visits positions in between), and answers "unknown" outside it,
 * which the caller treats as "not before": no reuse, always safe. */
typedef struct {
  uint64_t *bits;
  int64_t stride; /* words per row */
} pl_reach;

/* HWT_OK, or HWT_ENOMEM (the caller then relies on sync points alone). */
int pl_reach_build(const gr_dag *d, const int *position, int64_t stride, pl_reach *r);
void pl_reach_free(pl_reach *r);
/* 1 when the op at position a is known to be a strict ancestor of the op at
 * position b. */
static inline int pl_reach_before(const pl_reach *r, int a, int b) {
  int64_t base = (int64_t)(b >> 6) - r->stride + 1, wa = a >> 6;
  if (base < 0) base = 0;
  if (a >= b || wa < base) return 0;
  return (int)((r->bits[(int64_t)b * r->stride + (wa - base)] >> (a & 63)) & 1u);
}

/* first_all_desc[p]: the smallest position s such that every op at a
 * position >= s is known to be a strict descendant of the op at position p
 * (p + 1 when all later ops are). A tensor whose last readers all have
 * first_all_desc <= b is dead for every birth at b or later. */
int pl_reach_all_desc(const pl_reach *r, int n, int *first_all_desc);

/* sync_before[p]: the largest position s <= p whose op has every earlier op
 * as an ancestor and every later op as a descendant; -1 if none. */
int pl_sync_points(const gr_dag *d, int *sync_before);

/* Views (views.c): the arena tensor whose bytes tensor t reuses as a
 * reshape/flatten output, or -1. root[t]: the first tensor of t's view
 * chain (t itself when t views nothing). */
int pl_view_of(const hwt_graph *g, int t);
void pl_view_roots(const hwt_graph *g, int *root);

/* Fills p->offset, arena sizes and peak live bytes for p->reuse. */
int pl_arena_assign(const hwt_graph *g, const gr_dag *d, hwt_plan *p, int reach_max_ops,
                    char *err, size_t errlen);

static inline int64_t pl_align(int64_t bytes) {
  return (bytes + HWT_PLAN_ALIGN - 1) / HWT_PLAN_ALIGN * HWT_PLAN_ALIGN;
}

#endif
