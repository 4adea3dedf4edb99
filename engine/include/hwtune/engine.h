/* The execution engine: a graph plus a configuration becomes a prepared
 * engine (plan, arena, op contexts, packed weights, thread pool) once; run()
 * then executes it many times with no allocation on the hot path.
 *
 * Life cycle: hwt_engine_create -> hwt_engine_bind (every param, optionally
 * inputs/outputs) -> hwt_engine_prepare -> { set inputs; hwt_engine_run }*
 * -> hwt_engine_destroy. Errors return negative status and leave a one-line
 * reason in hwt_engine_error(). A bind after prepare releases the prepared
 * ops: prepare again before the next run. Implementation: engine/exec/
 * (the schedulers' designs are described at the top of sched_*.c, their
 * contract in engine/exec/sched.h). */
#ifndef HWTUNE_ENGINE_H
#define HWTUNE_ENGINE_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/graph.h"

typedef struct hwt_engine hwt_engine;

/* Schedulers are rows of one table (engine/exec/sched_table.c), known by
 * name: callers look a scheduler up and branch on its properties below,
 * never on its name. */
typedef enum {
  HWT_PIN_NEVER = 0,      /* never pins its threads (the unpinned baseline) */
  HWT_PIN_ON_REQUEST = 1, /* pins when the config asks; callers default to unpinned */
  HWT_PIN_BY_DEFAULT = 2  /* pins when the config asks; callers default to pinned */
} hwt_sched_pinning;

typedef struct {
  const char *name;    /* as users spell it: "critical-path" */
  const char *summary; /* one line for help texts */
  int single_team;     /* one executor with every thread, whatever executors says */
  int worker_groups;   /* executors x threads single-thread workers; an op's threads are
                          a group of idle workers formed per dispatch (thread counts of
                          ops count workers, not a team's threads); the worker of the
                          group's part 0 completes the op, after the other parts */
  int in_order;        /* runs ops in the plan's topological order, one at a time: the
                          arena may reuse memory sequentially */
  int needs_costs;     /* orders ops by levels from op costs: callers profile per-op
                          costs for it when they can */
  int pins;            /* hwt_sched_pinning */
  int default_one;     /* the scheduler of a config that names none */
  int default_many;    /* the scheduler several executors get when none is named */
} hwt_sched_info;

/* The table: rows 0 .. hwt_sched_count() - 1 (NULL outside), or by name
 * (NULL if no row has it; name NULL: the default_one row). */
HWT_API int hwt_sched_count(void);
HWT_API const hwt_sched_info *hwt_sched_at(int i);
HWT_API const hwt_sched_info *hwt_sched_by_name(const char *name);
/* Every name, in table order, joined by ", " into buf (truncated to n). */
HWT_API const char *hwt_sched_list(char *buf, size_t n);

/* Ops: a tiny op (estimated or profiled below ~2 us) runs inline on the
 * executor that made it ready (schedulers that dispatch ops); an op too small to
 * split runs on its team's master alone unless op_threads names a count. An
 * op whose inputs are all params (transitively) is constant: it runs once in
 * hwt_engine_prepare and never in run(), nor in the profiled events. */
typedef struct {
  int executors;            /* 1..64 (a single_team scheduler uses 1); a worker_groups
                               one runs executors x threads_per_executor workers */
  int threads_per_executor; /* >= 1 */
  const char *scheduler;    /* a row's name; NULL: the default_one row. Read at
                               create only */
  int pin;                  /* pin teams to disjoint CPUs (default 1); HWT_PIN_NEVER
                               schedulers never pin, and more threads than CPUs run
                               unpinned */
  int isa;                  /* hwt_isa, or -1: hwt_isa_select() */
  const int *op_threads;    /* optional [n_ops]: threads for each op (0 = team size) */
  const double *op_cost;    /* optional [n_ops]: profiled seconds (< 0: the plan's
                               estimate), for levels and the tiny-op test */
  const double *op_priority;/* optional [n_ops]: overrides the level */
  /* worker_groups schedulers only, optional: [n_ops * op_cand_n] thread-count
   * candidates of each op, best first (op k's are entries k*op_cand_n ...; a count <= 0 ends the
   * list), with their predicted seconds (NULL or < 0: the op's cost). No
   * candidate: the op's op_threads, else threads_per_executor. Counts above
   * executors x threads are clamped. */
  const int *op_cand_threads;
  const double *op_cand_seconds;
  int op_cand_n;
} hwt_engine_config;

HWT_API void hwt_engine_config_init(hwt_engine_config *c); /* 1 x all CPUs, default_one */

/* A new engine for g under cfg (NULL: hwt_engine_config_init's) into *out.
 * Returns HWT_OK, or a negative status with *out NULL and a one-line reason
 * in err: HWT_EINVAL (config, graph, unsupported op), HWT_EISA, HWT_ENOMEM,
 * HWT_ESYS (the thread pool). The engine keeps a pointer to g: g must
 * outlive it. */
HWT_API int hwt_engine_create(const hwt_graph *g, const hwt_engine_config *cfg,
                              hwt_engine **out, char *err, size_t errlen);
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

/* The activation arena the engine's plan sized at create, in bytes: with
 * the scheduler's reuse policy (in_order rows reuse memory in the plan's
 * order, the others only where no two ops can overlap), and without any
 * reuse. HWT_EINVAL for a NULL engine. */
HWT_API int64_t hwt_engine_arena_bytes(const hwt_engine *e);
HWT_API int64_t hwt_engine_arena_bytes_no_reuse(const hwt_engine *e);

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
