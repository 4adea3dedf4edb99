/* The execution engine: a graph plus a configuration becomes a prepared
 * engine (plan, arena, op contexts, packed weights, thread pool) once; run()
 * then executes it many times with no allocation on the hot path.
 *
 * Life cycle: hwt_engine_create -> hwt_engine_bind (every param, optionally
 * inputs/outputs) -> hwt_engine_prepare -> { set inputs; hwt_engine_run }*
 * -> hwt_engine_destroy. Errors return negative status and leave a one-line
 * reason in hwt_engine_error(). A bind after prepare releases the prepared
 * ops: prepare again before the next run. Implementation: engine/exec/
 * (the schedulers' designs are described at the top of sched_*.c). */
#ifndef HWTUNE_ENGINE_H
#define HWTUNE_ENGINE_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/graph.h"

typedef struct hwt_engine hwt_engine;

typedef enum {
  HWT_SCHED_SEQUENTIAL = 0,    /* one executor, all threads, topological order */
  HWT_SCHED_SHARED_QUEUE = 1,  /* executors pull from one global ready queue, unpinned */
  HWT_SCHED_CRITICAL_PATH = 2, /* Graphi: max level first, per-executor SPSC buffers, pinned teams */
  HWT_SCHED_CORUN = 3          /* Strategy 3 of the runtime concurrency control paper: one
                                  pinned worker per core, each op on a group of idle workers
                                  sized from its thread-count candidates */
} hwt_scheduler;

/* Ops: a tiny op (estimated or profiled below ~2 us) runs inline on the
 * executor that made it ready (critical-path, corun); an op too small to
 * split runs on its team's master alone unless op_threads names a count. An
 * op whose inputs are all params (transitively) is constant: it runs once in
 * hwt_engine_prepare and never in run(), nor in the profiled events. */
typedef struct {
  int executors;            /* 1..64 (SEQUENTIAL ignores it and uses 1); CORUN runs
                               executors x threads_per_executor single workers */
  int threads_per_executor; /* >= 1 */
  int scheduler;            /* hwt_scheduler */
  int pin;                  /* pin teams to disjoint CPUs (default 1); SHARED_QUEUE
                               never pins, and more threads than CPUs run unpinned */
  int isa;                  /* hwt_isa, or -1: hwt_isa_select() */
  const int *op_threads;    /* optional [n_ops]: threads for each op (0 = team size) */
  const double *op_cost;    /* optional [n_ops]: profiled seconds (< 0: the plan's
                               estimate), for levels and the tiny-op test */
  const double *op_priority;/* optional [n_ops]: overrides the level */
  /* CORUN only, optional: [n_ops * op_cand_n] thread-count candidates of each
   * op, best first (op k's are entries k*op_cand_n ...; a count <= 0 ends the
   * list), with their predicted seconds (NULL or < 0: the op's cost). No
   * candidate: the op's op_threads, else threads_per_executor. Counts above
   * executors x threads are clamped. */
  const int *op_cand_threads;
  const double *op_cand_seconds;
  int op_cand_n;
} hwt_engine_config;

HWT_API void hwt_engine_config_init(hwt_engine_config *c); /* 1 x all CPUs, sequential */

/* The engine keeps a pointer to g: g must outlive it. */
HWT_API hwt_engine *hwt_engine_create(const hwt_graph *g, const hwt_engine_config *cfg,
                                      char *err, size_t errlen);
HWT_API void hwt_engine_destroy(hwt_engine *e);
HWT_API const char *hwt_engine_error(const hwt_engine *e);

/* Use caller memory for tensor t (params must be bound before prepare and
 * stay alive and unchanged; bound inputs/outputs are read/written in place). */
HWT_API int hwt_engine_bind(hwt_engine *e, int t, float *data);
HWT_API int hwt_engine_prepare(hwt_engine *e);
/* Pointer to tensor t's storage (inputs/outputs not bound are engine-owned). */
HWT_API float *hwt_engine_tensor(hwt_engine *e, int t);
HWT_API int hwt_engine_run(hwt_engine *e);

/* Constant folding: how many ops were folded; whether op was (1/0). */
HWT_API int hwt_engine_n_folded(const hwt_engine *e);
HWT_API int hwt_engine_op_folded(const hwt_engine *e, int op);

/* Profiling: when enabled, run() records one event per op that runs. */
typedef struct {
  int op;
  int executor;
  int threads;
  double start_s, end_s; /* hwt_now() clock */
} hwt_op_event;
HWT_API int hwt_engine_profile(hwt_engine *e, int enable);
/* Copies up to max events of the last run, in op-id order (folded ops have
 * none); returns how many (0 if the last run was not profiled). */
HWT_API int hwt_engine_events(const hwt_engine *e, hwt_op_event *out, int max);

#endif
