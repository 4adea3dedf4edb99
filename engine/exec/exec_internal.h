/* The engine's private state, shared by the life-cycle code (engine.c), the
 * constant folder (fold.c), the op runner (run_op.c) and the schedulers
 * (sched.h, sched_*.c). Everything the hot path touches is allocated at
 * create/prepare. */
#ifndef HWTUNE_EXEC_INTERNAL_H
#define HWTUNE_EXEC_INTERNAL_H
#include <stdatomic.h>
#include <stdint.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "hwtune/plan.h"
#include "hwtune/pool.h"

/* Polls of an empty slot before a critical-path master sleeps: 2000 pause
 * instructions are ~100 us on Cascade Lake (~140 cycles each at 2.5 GHz),
 * the order of the pool's own default spin (HWTUNE_POOL_SPIN_US = 200), so
 * back-to-back dispatches within a run never pay a futex wake. A pause is
 * far shorter on other cores (the waiter parked after 20-50 us on an AMD
 * EPYC Zen 4); the planner times the polls on the host
 * (hwt_bench_spin_s). */
#define HWT_EXEC_SPIN 2000

/* Executors (or corun's workers) in one idle bitmap word. */
#define HWT_EXEC_MAX_EXECUTORS 64

/* A scheduler's row (sched.h). */
typedef struct hwt_sched_impl hwt_sched_impl;

struct hwt_engine {
  const hwt_graph *g;
  hwt_engine_config cfg;
  hwt_plan *plan;
  int n_ops, n_tensors;
  int executors, team_size;       /* the pool's teams (worker_groups: workers x 1) */
  int max_nth;                    /* most threads one op may get */
  int default_nth;                /* threads of an op with no count configured */
  int spin;                       /* polls of a slot before sleeping */
  double (*clock)(void);          /* seconds for Strategy 3's predictions: hwt_now; a
                                     test may substitute a virtual clock */
  float **tensor;                 /* [n_tensors] storage of each tensor */
  unsigned char *bound;           /* [n_tensors] 1: caller memory */
  void *arena;
  const hwt_op_impl **impl;       /* [n_ops] */
  hwt_op_ctx *ctx;                /* [n_ops] */
  unsigned char *ctx_prepared;    /* [n_ops] 1: release() owed */
  hwt_op_shared *shared;          /* packed constants the ops share (at first prepare) */
  int *op_nth;                    /* [n_ops] threads each op runs with */
  int *op_maxth;                  /* [n_ops] most threads it may run with (candidates) */
  double *prio;                   /* [n_ops] level, or the configured priority */
  double *cost;                   /* [n_ops] seconds used for the levels */
  double slack;                   /* priority gap a master may skip to keep its successor */
  unsigned char *tiny;            /* [n_ops] 1: run inline, never dispatched */
  unsigned char *solo;            /* [n_ops] 1: too small to split over a team */
  int *op_threads;                /* copies of the config's per-op arrays */
  double *op_cost, *op_priority;
  int *cand_threads;              /* [n_ops * cand_n], clamped; <= 0: no candidate */
  double *cand_seconds;
  int cand_n;
  /* Constant folding (fold.c): ops whose inputs are all params, transitively,
   * run once at prepare into const_mem and never again. */
  unsigned char *folded;          /* [n_ops] */
  int n_folded;
  void *const_mem;
  int *run_order;                 /* [n_run] the other ops, in plan order */
  int n_run;
  int *init_pending;              /* [n_ops] unfinished non-folded producers at start */
  int *roots;                     /* [n_roots] non-folded ops with none */
  int n_roots;
  hwt_pool *pool;
  float *ws;                      /* [executors * team_size * ws_stride] */
  size_t ws_stride;               /* floats per thread, multiple of 16 */
  int prepared;
  _Atomic int *pending;           /* [n_ops] unfinished predecessors this run */
  const hwt_sched_impl *sched;    /* the scheduler's row */
  void *sched_state;              /* its state (opaque here) */
  int sched_ready;                /* its init succeeded: release() owed */
  void *sched_mem;                /* hwt_sched_alloc blocks, freed at destroy */
  int profile;
  hwt_op_event *events;           /* [n_ops], indexed by op id */
  int events_valid;               /* the last run recorded events */
  char err[256];
};

/* Runs one op on `team` with its configured thread count (fork-join on the
 * team when more than one thread), recording its event when profiling. */
void hwt_exec_run_op(hwt_engine *e, int team, int op);
/* Resets the per-run dependency counters. */
void hwt_exec_reset_pending(hwt_engine *e);
/* Decrements op's successors; calls ready(arg, s) for each that became ready. */
void hwt_exec_complete(hwt_engine *e, int op, void (*ready)(void *arg, int s), void *arg);

/* The part of create a simulation shares (engine.c, simulate.c): e->cfg
 * and the scheduler row from cfg (validated), the executors, copies of the
 * per-op arrays, levels and op thread counts. Needs e->g, e->plan and the
 * folding plan; may be called again with another config (the previous
 * per-op copies are freed). */
int hwt_exec_configure(hwt_engine *e, const hwt_engine_config *cfg, char *err, size_t errlen);
/* The per-op arrays every engine allocates at create (and destroy frees). */
int hwt_exec_alloc_op_arrays(hwt_engine *e);
void hwt_exec_free_op_arrays(hwt_engine *e);

/* Fills e->cost, e->prio (levels or configured priorities), e->slack,
 * e->tiny and e->solo (cost too small to split over a team). Needs
 * e->folded. */
void hwt_exec_levels(hwt_engine *e);
/* Whether op is too small to be worth a fork-join (levels.c). */
int hwt_exec_solo(const hwt_engine *e, int op);

/* Constant folding (fold.c): marks folded ops and builds run_order,
 * init_pending and roots (at create); hwt_fold_place then gives folded
 * outputs storage in const_mem (after the arena placed the others). */
int hwt_fold_plan(hwt_engine *e);
int hwt_fold_place(hwt_engine *e);
/* Runs the folded ops once (at prepare, after their inputs are bound). */
int hwt_fold_run(hwt_engine *e, int (*prepare_op)(hwt_engine *, int), void (*release_op)(hwt_engine *, int));

/* Prefetches what running op will touch (its context lines and state). */
void hwt_exec_prefetch(const hwt_engine *e, int op);
/* The same for op's first successors: the inline schedulers run them next. */
void hwt_exec_prefetch_succ(const hwt_engine *e, int op);

#endif
