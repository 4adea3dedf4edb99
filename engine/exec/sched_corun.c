/* The corun scheduler: Strategy 3 of "Runtime Concurrency Control and
 * Operation Scheduling" (co-running operations to keep every core busy).
 *
 * One pinned worker per usable core (the pool runs executors x threads
 * teams of one thread; the caller is worker 0): no core idles as a
 * scheduler. Ready ops wait in one max-heap on priority (the level, as in
 * the critical-path scheduler). Whenever a worker becomes idle it takes the
 * lock and dispatches: for the head op it looks at the op's thread-count
 * candidates (best first) that fit the idle workers, and
 *   - prefers the one with the FEWEST threads whose predicted finish
 *     (now + its seconds) is no later than the latest predicted finish of
 *     the ops already running: it co-runs without delaying anyone and
 *     leaves cores for the next op (the paper's 18-of-20-cores example);
 *   - otherwise takes the first (fastest) candidate that fits;
 *   - if none fits, the head waits for more cores while something runs
 *     (priority order is kept; nothing lower jumps the queue).
 * The op goes to a group of that many idle workers: each gets (op, tid,
 * nth) in its own slot and runs its part, run(ctx, ws, tid, nth). The
 * worker of part 0 (the lowest idle one when the op was placed) completes
 * the op once the other parts are done (an atomic countdown per op; each
 * other part's worker registers as idle before it counts down, so part 0's
 * decisions see it free):
 * decrements its successors, runs the tiny single-thread ones inline (as
 * critical-path does: a dispatch costs more than the op), keeps one
 * single-thread successor for itself when nothing waiting is more critical
 * by more than the graph's slack (as critical-path does, see levels.c), and
 * pushes the others into the heap.
 *
 * Lost wake-ups cannot happen: every decision is taken under the lock, by a
 * worker that is about to wait on its own slot or has just pushed work, and
 * a worker only waits after registering as idle under that lock. The worker
 * whose completion is the run's last writes FINISH into every slot (slots.h).
 * The first ops are placed before any worker starts, with every worker idle,
 * so the first decisions do not depend on which thread wakes first.
 *
 * Why part 0 and not the last finisher: a chain of 1-thread ops after a
 * group op then runs on the same core run after run, where its buffers
 * are. With the last finisher (which of two balanced parts ends last is a
 * coin toss) deepcpu_lstm_i64_h64's recurrence moved between the two cores
 * from run to run, and each step's writes had to take the lines back from
 * the other core's cache: its 1-thread matmuls took 1.30-1.53 us a step on
 * either core against 0.87 in the sequential engine, and the run 1.44x the
 * sequential one's; with the chain kept on worker 0, 0.89-0.90 us and 1.10x
 * (12 rounds of fresh engines in random order, AMD EPYC Zen 3, 2 vCPUs,
 * 2026-12-05). Part 0's worker waits only for parts of
 * the same length (the kernels split work evenly): it polls, then yields,
 * as a slot's waiter does (slots.h).
 *
 * The decisions (corun_core below: Strategy 3's placement, what runs inline,
 * what a worker keeps) are shared with the virtual-time version at the end
 * of this file. */
#include <sched.h>
#include <pthread.h>
#include "hwtune/bench.h"
#include "prio_heap.h"
#include "slots.h"

/* What the decisions read and change (under the lock in a threaded run). */
typedef struct {
  int *heap, heap_size;      /* ready ops, max-heap on prio */
  uint64_t idle;             /* bit w: worker w waits for a part */
  double *busy_until;        /* [workers] predicted end of each busy worker's op */
} corun_core;

typedef struct {
  pthread_mutex_t mu;        /* guards core */
  corun_core k;
  _Alignas(HWT_CACHELINE) _Atomic int completed;
  _Atomic int *remaining;    /* [n_ops] parts other than 0 still running */
  hwt_slot *slot;            /* [workers]: op, and the part (tid, nth) */
  int *local;                /* [workers * 2 * n_ops] inline stacks, ready buffers */
} corun_state;

static int core_init(hwt_engine *e, corun_core *k) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1), w = (size_t)e->executors;
  k->heap = hwt_sched_alloc(e, sizeof(int) * n);
  k->busy_until = hwt_sched_alloc(e, sizeof(double) * w);
  return k->heap && k->busy_until ? HWT_OK : HWT_ENOMEM;
}

/* A run's start: the roots ready, every worker idle. */
static void core_reset(const hwt_engine *e, corun_core *k) {
  k->idle = e->executors >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << e->executors) - 1;
  for (int w = 0; w < e->executors; w++) k->busy_until[w] = 0;
  hwt_prio_heap_roots(e, k->heap, &k->heap_size);
}

static int corun_init(hwt_engine *e, void **state) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1), w = (size_t)e->executors;
  corun_state *c = hwt_sched_alloc(e, sizeof *c);
  if (!c || core_init(e, &c->k) < 0) return HWT_ENOMEM;
  c->remaining = hwt_sched_alloc(e, sizeof(_Atomic int) * n);
  c->local = hwt_sched_alloc(e, sizeof(int) * n * 2 * w);
  c->slot = hwt_slots_alloc(e, e->executors);
  if (!c->remaining || !c->local || !c->slot) return HWT_ENOMEM;
  if (pthread_mutex_init(&c->mu, NULL) != 0) return HWT_ESYS;
  *state = c;
  return HWT_OK;
}

static void corun_release(hwt_engine *e, void *state) {
  (void)e;
  pthread_mutex_destroy(&((corun_state *)state)->mu);
}

/* ---- the decisions ---- */

/* One thread, whatever the idle cores: a worker may run it by itself. */
static int single(const hwt_engine *e, int op) {
  if (e->op_nth[op] != 1) return 0;
  const int *ct = e->cand_threads ? e->cand_threads + (size_t)op * (size_t)e->cand_n : NULL;
  return !ct || ct[0] <= 1;
}

static int runs_inline(const hwt_engine *e, int op) { return e->tiny[op] && single(e, op); }

/* Strategy 3 */

/* Threads for op given `idle` free workers (0: wait), and its predicted
 * seconds in *sec. */
static int choose(const hwt_engine *e, int op, int idle, int running, double now, double horizon,
                  double *sec) {
  const double own = e->op_cost && e->op_cost[op] >= 0 ? e->op_cost[op] : hwt_plan_cost(e->plan)[op];
  int fit = 0, fit_corun = 0;
  double fit_s = own, corun_s = own;
  const int *ct = e->cand_threads ? e->cand_threads + (size_t)op * (size_t)e->cand_n : NULL;
  const double *cs = e->cand_seconds ? e->cand_seconds + (size_t)op * (size_t)e->cand_n : NULL;
  int n = ct && e->cand_n > 0 && ct[0] > 0 ? e->cand_n : 0;
  for (int k = 0; k < n && ct[k] > 0; k++) {
    double s = cs[k] >= 0 ? cs[k] : own;
    if (ct[k] > idle) continue;
    if (!fit) fit = ct[k], fit_s = s;
    if (running > 0 && now + s <= horizon && (!fit_corun || ct[k] < fit_corun))
      fit_corun = ct[k], corun_s = s;
  }
  if (n == 0 && e->op_nth[op] <= idle) fit = e->op_nth[op];
  if (fit_corun) {
    *sec = corun_s;
    return fit_corun;
  }
  *sec = fit_s;
  if (fit) return fit;
  /* Nothing running and still no fit cannot happen (counts are clamped to
   * the workers); guard anyway so the run cannot stall. */
  return running > 0 ? 0 : idle;
}

/* Places ready ops, head first, on groups of idle workers until the head
 * has to wait or nothing is ready; give(arg, w, op, tid, nth) hands each
 * part to its worker. now: the clock the predictions are on. */
static inline void core_place(const hwt_engine *e, corun_core *k, double now,
                              void (*give)(void *arg, int w, int op, int tid, int nth),
                              void *arg) {
  if (k->heap_size == 0 || k->idle == 0) return;
  const int workers = e->executors;
  int idle = __builtin_popcountll(k->idle), running = workers - idle;
  double horizon = 0;
  for (int w = 0; w < workers; w++)
    if (!(k->idle >> w & 1) && k->busy_until[w] > horizon) horizon = k->busy_until[w];
  while (k->heap_size > 0 && idle > 0) {
    int op = k->heap[0];
    double sec;
    int nth = choose(e, op, idle, running, now, horizon, &sec);
    if (nth == 0) return;
    (void)hwt_prio_heap_pop(e, k->heap, &k->heap_size);
    for (int tid = 0; tid < nth; tid++) {
      int w = __builtin_ctzll(k->idle);
      k->idle &= k->idle - 1;
      k->busy_until[w] = now + sec;
      give(arg, w, op, tid, nth);
    }
    if (now + sec > horizon) horizon = now + sec;
    idle -= nth;
    running += nth;
  }
}

/* Heavy successors go to the heap, except one single-thread successor the
 * worker keeps for itself (inputs in its cache) when nothing waiting is
 * more critical by more than the graph's slack (levels.c); with no slack,
 * only while it has no tiny ops of its own waiting (n_inline), which the
 * kept op would hold up (see cp_offers in sched_cp.c). Returns the kept op
 * or -1. */
static inline int core_push_keep(const hwt_engine *e, corun_core *k, const int *heavy,
                                 int n_heavy, int n_inline) {
  int cont = -1;
  for (int i = 0; i < n_heavy; i++) {
    int s = heavy[i];
    if (cont < 0 && (e->slack > 0 || n_inline == 0) && single(e, s))
      cont = s;
    else
      hwt_prio_heap_push(e, k->heap, &k->heap_size, s);
  }
  if (cont < 0) return -1;
  if (hwt_prio_heap_keeps(e, k->heap, k->heap_size, cont)) return cont;
  hwt_prio_heap_push(e, k->heap, &k->heap_size, cont);
  return -1;
}

/* ---- threaded run ---- */

static void give_slot(void *arg, int w, int op, int tid, int nth) {
  corun_state *c = arg;
  /* Before the first part can run (and count down). */
  if (tid == 0) atomic_store_explicit(&c->remaining[op], nth - 1, memory_order_relaxed);
  c->slot[w].tid = tid;
  c->slot[w].nth = nth;
  hwt_slot_give(&c->slot[w], op);
}

static void dispatch(hwt_engine *e, corun_state *c) {
  if (c->k.heap_size == 0 || c->k.idle == 0) return;
  core_place(e, &c->k, e->clock(), give_slot, c);
}

/* ---- workers ---- */

typedef struct {
  hwt_engine *e;
  corun_state *c;
  int *inl, n_inl;   /* tiny single-thread ops this worker runs itself */
  int *heavy, n_heavy; /* ops for the heap */
} ready_ctx;


static void on_ready(void *arg, int s) {
  ready_ctx *r = arg;
  if (runs_inline(r->e, s))
    r->inl[r->n_inl++] = s;
  else
    r->heavy[r->n_heavy++] = s;
}

static void flush(hwt_engine *e, corun_state *c, int w) {
  pthread_mutex_lock(&c->mu);
  c->k.idle |= (uint64_t)1 << w;
  dispatch(e, c);
  pthread_mutex_unlock(&c->mu);
}

/* The heavy successors to the heap (one maybe kept), then idle workers get
 * what fits. Returns the kept op or -1. */
static int flush_keep(hwt_engine *e, ready_ctx *r) {
  corun_state *c = r->c;
  pthread_mutex_lock(&c->mu);
  int keep = core_push_keep(e, &c->k, r->heavy, r->n_heavy, r->n_inl);
  r->n_heavy = 0;
  dispatch(e, c);
  pthread_mutex_unlock(&c->mu);
  return keep;
}

/* Op's parts are done (part 0 ran on worker w, and waited for the others):
 * complete it and every tiny op it (transitively) makes ready, and the
 * successor it keeps. */
static void complete(hwt_engine *e, int w, int op, ready_ctx *r) {
  corun_state *c = r->c;
  for (;;) {
    hwt_exec_complete(e, op, on_ready, r);
    if (atomic_fetch_add(&c->completed, 1) == e->n_run - 1) hwt_slots_finish(c->slot, e->executors);
    /* Heavy successors go to idle workers before the tiny ones run here. */
    if (r->n_heavy) {
      int keep = flush_keep(e, r);
      if (keep >= 0) r->inl[r->n_inl++] = keep;
    }
    if (r->n_inl == 0) return;
    op = r->inl[--r->n_inl];
    hwt_exec_prefetch_succ(e, op);
    hwt_exec_run_op(e, w, op);
  }
}

/* Part 0's wait for the group's other parts: `spin` polls with a pause,
 * then a yield per poll (an oversubscribed machine, where spin is 0, may
 * have queued the part waited for on this CPU). Acquire: every part's
 * output is visible once its count-down is. */
static void wait_parts(const hwt_engine *e, _Atomic int *remaining) {
  for (int i = 0; atomic_load_explicit(remaining, memory_order_acquire) > 0; i++) {
    if (i >= e->spin)
      sched_yield();
    else
      hwt_cpu_relax();
  }
}

/* Runs one part; 1 when it has freed its worker already (a part other than
 * 0 of a group op), 0 when the caller frees it. */
static int run_part(hwt_engine *e, corun_state *c, int w, int op, int tid, int nth) {
  hwt_op_event *ev = &e->events[op];
  double t0 = e->profile ? hwt_now() : 0.0;
  e->impl[op]->run(&e->ctx[op], e->ws + (size_t)w * e->ws_stride, tid, nth);
  if (tid != 0) {
    flush(e, c, w);
    /* release: part 0 sees this part's output */
    atomic_fetch_sub_explicit(&c->remaining[op], 1, memory_order_release);
    return 1;
  }
  if (nth > 1) wait_parts(e, &c->remaining[op]);
  if (e->profile) {
    ev->op = op;
    ev->executor = w;
    ev->threads = nth;
    ev->start_s = t0;
    ev->end_s = hwt_now();
  }
  ready_ctx r = {e, c, c->local + (size_t)w * 2 * (size_t)e->n_ops, 0,
                 c->local + ((size_t)w * 2 + 1) * (size_t)e->n_ops, 0};
  complete(e, w, op, &r);
  return 0;
}

/* The first ops were placed before the workers started (corun_run). */
static void corun_worker(void *arg, int w) {
  hwt_engine *e = arg;
  corun_state *c = e->sched_state;
  for (;;) {
    /* The part was written before the op (hwt_slot_give's release). */
    int op = hwt_slot_take(&c->slot[w], e->spin);
    if (op < 0) return;
    if (!run_part(e, c, w, op, c->slot[w].tid, c->slot[w].nth)) flush(e, c, w);
  }
}

static int corun_run(hwt_engine *e, void *state) {
  corun_state *c = state;
  atomic_store(&c->completed, 0);
  hwt_slots_reset(c->slot, e->executors, e->n_run == 0);
  core_reset(e, &c->k);
  pthread_mutex_lock(&c->mu);
  dispatch(e, c);
  pthread_mutex_unlock(&c->mu);
  return hwt_pool_run_teams(e->pool, corun_worker, e);
}

/* ---- virtual time ----
 * run_part's ending: a part other than 0 frees its worker (flush); part 0,
 * which the driver ends after the others (simulate.c), completes the op
 * (complete()'s loop body), runs the worker's inline stack, then frees the
 * worker. The lock is the serial section. */

typedef struct {
  corun_core k;
  int *inl, *n_inl;  /* [workers * n_ops], [workers]: each worker's inline stack */
  int *heavy;        /* [n_ops] */
  hwt_vrun *v;
  int self;          /* the worker taking the decision */
} corun_vstate;

static int corun_vinit(hwt_engine *e, void **vstate) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1), w = (size_t)e->executors;
  corun_vstate *c = hwt_sched_alloc(e, sizeof *c);
  if (!c || core_init(e, &c->k) < 0 || !(c->inl = hwt_sched_alloc(e, sizeof(int) * n * w)) ||
      !(c->n_inl = hwt_sched_alloc(e, sizeof(int) * w)) ||
      !(c->heavy = hwt_sched_alloc(e, sizeof(int) * n)))
    return HWT_ENOMEM;
  *vstate = c;
  return HWT_OK;
}

static void give_virtual(void *arg, int w, int op, int tid, int nth) {
  corun_vstate *c = arg;
  hwt_vrun_start(c->v, w, op, tid, nth, w != c->self);
}

static void corun_vplace(hwt_vrun *v, corun_vstate *c, int self) {
  hwt_vrun_section(v);
  c->v = v;
  c->self = self;
  core_place(v->e, &c->k, v->now, give_virtual, c);
}

static void corun_vstart(hwt_vrun *v, void *vstate) {
  corun_vstate *c = vstate;
  core_reset(v->e, &c->k);
  for (int w = 0; w < v->e->executors; w++) c->n_inl[w] = 0;
  corun_vplace(v, c, -1);
}

typedef struct {
  const hwt_engine *e;
  int *inl, *n_inl, *heavy, n_heavy;
} corun_vready;

static void corun_von_ready(void *arg, int s) {
  corun_vready *r = arg;
  if (runs_inline(r->e, s))
    r->inl[(*r->n_inl)++] = s;
  else
    r->heavy[r->n_heavy++] = s;
}

static void corun_vdone(hwt_vrun *v, void *vstate, int w, int op, int last) {
  corun_vstate *c = vstate;
  hwt_engine *e = v->e;
  if (last) {
    corun_vready r = {e, c->inl + (size_t)w * (size_t)e->n_ops, &c->n_inl[w], c->heavy, 0};
    hwt_exec_complete(e, op, corun_von_ready, &r);
    if (r.n_heavy) {
      hwt_vrun_section(v);
      int keep = core_push_keep(e, &c->k, r.heavy, r.n_heavy, *r.n_inl);
      c->v = v;
      c->self = w;
      core_place(e, &c->k, v->now, give_virtual, c);
      if (keep >= 0) r.inl[(*r.n_inl)++] = keep;
    }
    if (hwt_vrun_next_inline(v, w, r.inl, r.n_inl)) return;
  }
  c->k.idle |= (uint64_t)1 << w;
  corun_vplace(v, c, w);
}

const hwt_sched_impl hwt_sched_corun = {
    .info = {.name = "corun",
             .summary = "Strategy 3: one pinned worker per core, each op on a group of idle "
                        "workers sized from its thread-count candidates",
             .worker_groups = 1,
             .needs_costs = 1,
             .pins = HWT_PIN_BY_DEFAULT},
    .init = corun_init,
    .run = corun_run,
    .release = corun_release,
    .vinit = corun_vinit,
    .vstart = corun_vstart,
    .vdone = corun_vdone,
    .vplaces = 1,
};
