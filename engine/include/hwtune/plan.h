/* Execution plan: everything a scheduler needs, computed once per graph so
 * that running the plan allocates nothing.
 *
 *  - order: a topological order (Kahn's algorithm, lowest ready op id first);
 *  - level[op] = cost[op] + max level of its successors: the longest
 *    remaining path to the sink, Graphi's critical-path priority (sec. 4.3);
 *  - dependency counts and successor lists (CSR) to initialise and decrement
 *    per-run counters;
 *  - one activation arena: every activation and output tensor gets a 64-byte
 *    aligned offset; inputs and params live outside it (offset -1).
 *
 * Buffer reuse policies (a tensor's bytes are handed to a later tensor only
 * when the two can never be live at the same time):
 *  NONE           every tensor has its own bytes;
 *  SEQUENTIAL     liveness along `order`: valid only when ops run one at a
 *                 time in exactly that order (the sequential scheduler);
 *  PARALLEL_SAFE  valid under ANY schedule that respects dependencies: U may
 *                 take T's bytes only if every consumer of T (T's producer
 *                 when T has none) is a strict DAG ancestor of U's producer.
 *                 Exact with reachability bitsets up to reach_max_ops ops;
 *                 above that the same bit budget covers a window of recent
 *                 ops each, and T's bytes are also freed for good once it
 *                 dies before a "sync" op (every earlier op its ancestor,
 *                 every later op its descendant): still safe, less reuse.
 * Output tensors are never reused: they must survive the run.
 * Views: under SEQUENTIAL and PARALLEL_SAFE a reshape/flatten of an arena
 * tensor shares its input's offset (plan/views.c), the chain one buffer
 * live until its last reader; arena_bytes_no_reuse then counts each chain
 * once. NONE gives every tensor bytes of its own.
 *
 * Cost: order, levels and CSR are O(ops + edges); the arena is first fit,
 * O(tensors x tensors that may still be live). Measured on this machine:
 * lstm_large unrolled to 20,800 ops plans in 0.1 s (SEQUENTIAL) / 0.3 s
 * (PARALLEL_SAFE); a 60,000-op random graph whose skip edges keep most
 * tensors possibly live takes 30 s with PARALLEL_SAFE. */
#ifndef HWTUNE_PLAN_H
#define HWTUNE_PLAN_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/graph.h"

#define HWT_PLAN_ALIGN 64 /* arena offsets: one cache line, the widest SIMD load */

typedef enum {
  HWT_REUSE_NONE = 0,
  HWT_REUSE_SEQUENTIAL = 1,
  HWT_REUSE_PARALLEL_SAFE = 2
} hwt_reuse;

typedef struct hwt_plan hwt_plan;

typedef struct {
  int reuse;            /* hwt_reuse */
  int reach_max_ops;    /* exact reachability up to this many ops; 0: default (20000) */
  double flops_per_s;   /* roofline rates for ops with work but no cost; 0: defaults */
  double bytes_per_s;
  double default_cost;  /* cost of ops with neither; 0: 1.0 */
} hwt_plan_options;

/* Defaults: PARALLEL_SAFE, rates measured on the reference machine. */
HWT_API void hwt_plan_options_init(hwt_plan_options *o);

/* Validates g (hwt_graph_validate) and plans it; o may be NULL (defaults).
 * Returns NULL with a one-line reason in err. The plan does not refer to g
 * afterwards; rebuild it if g changes. */
HWT_API hwt_plan *hwt_plan_build(const hwt_graph *g, const hwt_plan_options *o, char *err,
                                 size_t errlen);
HWT_API void hwt_plan_destroy(hwt_plan *p);

HWT_API int hwt_plan_n_ops(const hwt_plan *p);
HWT_API int hwt_plan_n_tensors(const hwt_plan *p);
HWT_API int hwt_plan_reuse(const hwt_plan *p);       /* the policy planned with */
HWT_API int hwt_plan_reach_exact(const hwt_plan *p); /* 0: PARALLEL_SAFE fell back (window) */

/* Arrays owned by the plan, valid until hwt_plan_destroy. Indexed by op id
 * unless said otherwise. */
HWT_API const int *hwt_plan_order(const hwt_plan *p);      /* [n_ops] op ids */
HWT_API const int *hwt_plan_position(const hwt_plan *p);   /* [n_ops] index in order */
HWT_API const double *hwt_plan_cost(const hwt_plan *p);    /* [n_ops] seconds (or units) */
HWT_API const double *hwt_plan_level(const hwt_plan *p);   /* [n_ops] */
HWT_API const int *hwt_plan_pred_count(const hwt_plan *p); /* [n_ops] distinct producers */
HWT_API const int *hwt_plan_succ_offsets(const hwt_plan *p); /* [n_ops+1] */
HWT_API const int *hwt_plan_succ(const hwt_plan *p);       /* [edges], ascending per op */
HWT_API int hwt_plan_n_roots(const hwt_plan *p);
HWT_API const int *hwt_plan_roots(const hwt_plan *p);      /* ops with no predecessor */

/* Byte offset of tensor t in the arena; -1 for inputs and params,
 * HWT_EINVAL for a bad id. */
HWT_API int64_t hwt_plan_tensor_offset(const hwt_plan *p, int t);
HWT_API const int64_t *hwt_plan_offsets(const hwt_plan *p); /* [n_tensors] */
HWT_API int64_t hwt_plan_arena_bytes(const hwt_plan *p);
HWT_API int64_t hwt_plan_arena_bytes_no_reuse(const hwt_plan *p);
/* Most bytes (aligned sizes) live at once along `order`: the floor for
 * SEQUENTIAL, and what any one-at-a-time run must hold. */
HWT_API int64_t hwt_plan_peak_live_bytes(const hwt_plan *p);

/* Brute-force check of the plan against g (debug and tests): order is a
 * topological order, offsets are aligned and inside the arena, inputs and
 * params are outside, and any two tensors sharing bytes can never be live
 * together under the plan's policy (computed independently with per-op
 * reachability: O(n_ops^2) bits and O(n_ops * edges) time). HWT_OK, or
 * HWT_EINVAL with the first violation in err (HWT_ENOMEM). */
HWT_API int hwt_plan_check_aliasing(const hwt_plan *p, const hwt_graph *g, char *err,
                                    size_t errlen);

#endif
