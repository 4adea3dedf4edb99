/* The engine's schedulers in virtual time: one run of a graph under an
 * engine configuration (executors x threads, scheduler, per-op thread
 * counts, costs, candidates: hwt_engine_config, as for hwt_engine_create)
 * replayed on a simulated clock from given op times, without threads or
 * tensors. The decisions are the schedulers' own (engine/exec/sched.h:
 * virtual time), so levels, slack, tiny/solo ops, inline runs, kept
 * successors and Strategy 3's placement are those of a real run; what is
 * modelled is only time:
 *   - an op with t threads (a team's, or a group of corun workers) lasts
 *     seconds[op][t] when it runs alone;
 *   - ops that run at the same time share the memory system: each moves
 *     mem_bps bytes/s alone during its mem_frac share of its time, and when
 *     their sum exceeds bw_cap[busy cores] those shares stretch by the
 *     ratio (no sharing when either table is NULL);
 *   - data another core touched last: every tensor remembers which cores
 *     hold which slice of it (the cores of the op part that last wrote or
 *     read it; inputs, params and folded constants are everywhere: written
 *     before the run, or only read, their lines stay valid in every cache
 *     that read them run after run). A part on cores R of an op with k
 *     parts or threads reads slice i/k..(i+1)/k of each input on its core
 *     i (the row split of the element-wise ops and of a matmul's weights;
 *     a matmul's whole activation row counts as its slice: under-counted);
 *     the bytes of that slice its core does not hold cross. Per input that
 *     crosses on any core, the part lasts xfer_s + (most bytes one of its
 *     cores pulls) / xfer_bps longer (its cores pull in parallel). A team
 *     executor w of team_size T runs an op's thread i on core w*T + i, a
 *     corun worker w on core w. A write leaves only the writer's cores
 *     holding their slices; a read adds the reader's slice to its core.
 *     Off when xfer_bps and xfer_s are both 0;
 *   - overheads: inline_s for an op an executor goes on with, dispatch_s
 *     for one handed to a waiting executor, section_s per decision in the
 *     scheduler's serial section (concurrent decisions queue), run_s per
 *     run. All zero: the schedule the scheduler's rules give for the op
 *     times alone;
 *   - waking (off when wake_s is 0): a worker idle for longer than park_s
 *     has parked. An op a placing scheduler (critical-path, corun) hands
 *     to it starts wake_s later, and a run whose last op ends while a
 *     worker is parked ends wake_s later (every worker must see the end).
 *     The shared queue places nothing (whichever master runs first takes
 *     the op), so only its end pays.
 * Executors are limited as in the engine (64; corun: 64 workers). */
#ifndef HWTUNE_SIMULATE_H
#define HWTUNE_SIMULATE_H
#include <stddef.h>
#include "hwtune/engine.h"

typedef struct hwt_sim hwt_sim;

typedef struct {
  int max_threads;        /* columns of the per-op tables: thread counts 1..max_threads */
  const double *seconds;  /* [n_ops * max_threads]: op alone at t threads is
                             seconds[op * max_threads + t - 1] */
  const double *mem_frac; /* optional, same shape: share of those seconds bound by memory */
  const double *mem_bps;  /* optional, same shape: bytes/s the op moves running alone */
  const double *bw_cap;   /* optional [cores + 1]: bytes/s served with c busy cores */
  int cores;
  double inline_s, dispatch_s, section_s, run_s;
  double xfer_bps; /* bytes/s one core pulls from another's cache (0: no byte term) */
  double xfer_s;   /* seconds per input tensor whose bytes cross (0: none) */
  double park_s;   /* a waiting executor polls this long, then parks */
  double wake_s;   /* a parked executor runs again this long after it is woken (0: off) */
} hwt_sim_costs;

/* A virtual engine for g (its plan and constant folding, once); g must
 * outlive it. HWT_OK, or a negative status with a one-line reason in err. */
HWT_API int hwt_sim_create(const hwt_graph *g, hwt_sim **out, char *err, size_t errlen);
HWT_API void hwt_sim_destroy(hwt_sim *s);
HWT_API const char *hwt_sim_error(const hwt_sim *s);

/* One simulated run under cfg with costs c: the makespan (seconds, run_s
 * included) into *makespan_s and, when events is not NULL, one event per op
 * that runs (folded ops do not), in op-id order, up to max_events; returns
 * how many ops ran, or a negative status (config, costs; reason in
 * hwt_sim_error). */
HWT_API int hwt_sim_run(hwt_sim *s, const hwt_engine_config *cfg, const hwt_sim_costs *c,
                        double *makespan_s, hwt_op_event *events, int max_events);

#endif
