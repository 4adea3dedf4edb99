/* The engine's private state, shared by the life-cycle code (engine.c), the
 * op runner (run_op.c) and the three schedulers (sched_*.c). Everything the
 * hot path touches is allocated at create/prepare. */
#ifndef HWTUNE_EXEC_INTERNAL_H
#define HWTUNE_EXEC_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "hwtune/plan.h"
#include "hwtune/pool.h"

/* Executors in one idle bitmap word (critical-path scheduler). */
#define HWT_EXEC_MAX_EXECUTORS 64

/* One cache line per shared counter or slot so that executors polling their
 * own slot do not invalidate each other's lines. */
typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint32_t v;
  char pad[HWT_CACHELINE - sizeof(uint32_t)];
} hwt_padded_u32;

/* State of the shared-queue scheduler: one mutex-protected FIFO. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int *q;          /* [n_ops]: each op is pushed at most once per run */
  int head, tail;
  int done;        /* ops completed */
} hwt_sq_state;

/* State of the critical-path scheduler (see sched_cp.c). */
typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic int token;   /* 1 while someone schedules */
  _Alignas(HWT_CACHELINE) _Atomic uint64_t idle; /* bit e: executor e waits */
  _Alignas(HWT_CACHELINE) _Atomic int inbox_tail;
  _Alignas(HWT_CACHELINE) _Atomic int inbox_head; /* written by the token holder */
  _Alignas(HWT_CACHELINE) _Atomic int completed;
  _Atomic int *inbox;        /* [n_ops] ready ops, -1 until published */
  int *heap;                 /* [n_ops] max-heap on prio, token holder only */
  int heap_size;             /* token holder only */
  int spin;                  /* polls of a slot before sleeping */
  hwt_padded_u32 *slot;      /* [executors] op + 1, 0 when empty (SPSC) */
  int *local;                /* [executors * n_ops] per-master inline stacks */
} hwt_cp_state;

struct hwt_engine {
  const hwt_graph *g;
  hwt_engine_config cfg;
  hwt_plan *plan;
  int n_ops, n_tensors;
  int executors, team_size;
  float **tensor;                 /* [n_tensors] storage of each tensor */
  unsigned char *bound;           /* [n_tensors] 1: caller memory */
  void *arena;
  const hwt_op_impl **impl;       /* [n_ops] */
  hwt_op_ctx *ctx;                /* [n_ops] */
  unsigned char *ctx_prepared;    /* [n_ops] 1: release() owed */
  int *op_nth;                    /* [n_ops] threads each op runs with */
  double *prio;                   /* [n_ops] level, or the configured priority */
  unsigned char *tiny;            /* [n_ops] 1: run inline, never dispatched */
  int *op_threads;                /* copies of the config's per-op arrays */
  double *op_cost, *op_priority;
  hwt_pool *pool;
  float *ws;                      /* [executors * team_size * ws_stride] */
  size_t ws_stride;               /* floats per thread, multiple of 16 */
  int prepared;
  _Atomic int *pending;           /* [n_ops] unfinished predecessors this run */
  hwt_sq_state sq;
  hwt_cp_state cp;
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

/* Fills e->prio (levels or configured priorities) and e->tiny; cost is
 * scratch [n_ops]. */
void hwt_exec_levels(hwt_engine *e, double *cost);

int hwt_sched_seq_run(hwt_engine *e);
int hwt_sched_sq_init(hwt_engine *e);
void hwt_sched_sq_free(hwt_engine *e);
int hwt_sched_sq_run(hwt_engine *e);
int hwt_sched_cp_init(hwt_engine *e);
void hwt_sched_cp_free(hwt_engine *e);
int hwt_sched_cp_run(hwt_engine *e);

#endif
