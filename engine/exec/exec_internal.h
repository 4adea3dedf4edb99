/* The engine's private state, shared by the life-cycle code (engine.c), the
 * constant folder (fold.c), the op runner (run_op.c) and the four schedulers
 * (sched_*.c). Everything the hot path touches is allocated at
 * create/prepare. */
#ifndef HWTUNE_EXEC_INTERNAL_H
#define HWTUNE_EXEC_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "hwtune/plan.h"
#include "hwtune/pool.h"
#include "../pool/park.h"

/* Executors in one idle bitmap word (critical-path scheduler). */
#define HWT_EXEC_MAX_EXECUTORS 64

/* One cache line per shared counter or slot so that executors polling their
 * own slot do not invalidate each other's lines. */
typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint32_t v;
  _Atomic uint32_t asleep; /* the waiter is (about to be) parked on v */
  char pad[HWT_CACHELINE - 2 * sizeof(uint32_t)];
} hwt_padded_u32;

/* A slot's wait and post. A futex wake is a system call even with nobody
 * asleep (~1 us, not separately measured here), paid per dispatch (1000 a
 * run on the wide graph) although the waiter usually still spins; so the
 * poster wakes only a waiter that said it sleeps. seq_cst on both sides (post: store v, load asleep; wait: store
 * asleep, load v): at least one sees the other, so no wake-up is lost. */
static inline uint32_t hwt_slot_wait(_Atomic uint32_t *v, _Atomic uint32_t *asleep, int spin) {
  uint32_t x;
  for (int i = 0; i < spin; i++) {
    if ((x = atomic_load_explicit(v, memory_order_acquire)) != 0) return x;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (;;) {
    atomic_store(asleep, 1);
    if ((x = atomic_load(v)) != 0) break;
    hwt_park_wait(v, 0);
  }
  atomic_store_explicit(asleep, 0, memory_order_relaxed);
  return x;
}

static inline void hwt_slot_post(_Atomic uint32_t *v, _Atomic uint32_t *asleep, uint32_t x) {
  atomic_store(v, x);
  if (atomic_load(asleep)) hwt_park_wake(v);
}

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
  hwt_padded_u32 *slot;      /* [executors] op + 1, 0 when empty (SPSC) */
  int *local;                /* [executors * n_ops] per-master inline stacks */
} hwt_cp_state;

/* State of the corun scheduler (see sched_corun.c). */
typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint32_t v; /* op + 1, FINISH, 0 when empty */
  _Atomic uint32_t asleep;
  int tid, nth;                               /* the part: written before v */
} hwt_corun_slot;

typedef struct {
  pthread_mutex_t mu;        /* guards heap, idle, busy_until */
  int mu_ok;
  int *heap, heap_size;      /* ready ops, max-heap on prio */
  uint64_t idle;             /* bit w: worker w waits for a part */
  double *busy_until;        /* [workers] predicted end of each busy worker's op */
  _Alignas(HWT_CACHELINE) _Atomic int completed;
  _Atomic int *remaining;    /* [n_ops] parts of the op still running */
  hwt_corun_slot *slot;      /* [workers] */
  int *local;                /* [workers * 2 * n_ops] inline stacks, ready buffers */
} hwt_corun_state;

struct hwt_engine {
  const hwt_graph *g;
  hwt_engine_config cfg;
  hwt_plan *plan;
  int n_ops, n_tensors;
  int executors, team_size;       /* the pool's teams (corun: workers x 1) */
  int max_nth;                    /* most threads one op may get */
  int default_nth;                /* threads of an op with no count configured */
  int spin;                       /* polls of a slot before sleeping */
  float **tensor;                 /* [n_tensors] storage of each tensor */
  unsigned char *bound;           /* [n_tensors] 1: caller memory */
  void *arena;
  const hwt_op_impl **impl;       /* [n_ops] */
  hwt_op_ctx *ctx;                /* [n_ops] */
  unsigned char *ctx_prepared;    /* [n_ops] 1: release() owed */
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
  hwt_sq_state sq;
  hwt_cp_state cp;
  hwt_corun_state cr;
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

/* Fills e->cost, e->prio (levels or configured priorities), e->slack,
 * e->tiny and e->solo (cost too small to split over a team). Needs
 * e->folded. */
void hwt_exec_levels(hwt_engine *e);
/* Whether op is too small to be worth a fork-join (levels.c). */
int hwt_exec_solo(const hwt_engine *e, int op);

/* Constant folding (fold.c): marks folded ops and builds run_order,
 * init_pending and roots (at create); places folded outputs in const_mem. */
int hwt_fold_plan(hwt_engine *e);
/* Runs the folded ops once (at prepare, after their inputs are bound). */
int hwt_fold_run(hwt_engine *e, int (*prepare_op)(hwt_engine *, int), void (*release_op)(hwt_engine *, int));

/* Prefetches what running op will touch (its context lines and state). */
void hwt_exec_prefetch(const hwt_engine *e, int op);
/* The same for op's first successors: the inline schedulers run them next. */
void hwt_exec_prefetch_succ(const hwt_engine *e, int op);

int hwt_sched_seq_run(hwt_engine *e);
int hwt_sched_sq_init(hwt_engine *e);
void hwt_sched_sq_free(hwt_engine *e);
int hwt_sched_sq_run(hwt_engine *e);
int hwt_sched_cp_init(hwt_engine *e);
void hwt_sched_cp_free(hwt_engine *e);
int hwt_sched_cp_run(hwt_engine *e);
int hwt_sched_corun_init(hwt_engine *e);
void hwt_sched_corun_free(hwt_engine *e);
int hwt_sched_corun_run(hwt_engine *e);

#endif
