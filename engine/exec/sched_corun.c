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
 * nth) in its own slot and runs its part, run(ctx, ws, tid, nth); the last
 * finisher of the group (an atomic countdown per op) completes the op:
 * decrements its successors, runs the tiny single-thread ones inline (as
 * critical-path does: a dispatch costs more than the op), keeps one
 * single-thread successor for itself when the graph's slack allows (as
 * critical-path does, see levels.c), and pushes the others into the heap.
 *
 * Lost wake-ups cannot happen: every decision is taken under the lock, by a
 * worker that is about to wait on its own slot or has just pushed work, and
 * a worker only waits after registering as idle under that lock. The worker
 * whose completion is the run's last writes FINISH into every slot (slots.h). */
#include <pthread.h>
#include "hwtune/bench.h"
#include "prio_heap.h"
#include "slots.h"

typedef struct {
  pthread_mutex_t mu;        /* guards heap, idle, busy_until */
  int *heap, heap_size;      /* ready ops, max-heap on prio */
  uint64_t idle;             /* bit w: worker w waits for a part */
  double *busy_until;        /* [workers] predicted end of each busy worker's op */
  _Alignas(HWT_CACHELINE) _Atomic int completed;
  _Atomic int *remaining;    /* [n_ops] parts of the op still running */
  hwt_slot *slot;            /* [workers]: op, and the part (tid, nth) */
  int *local;                /* [workers * 2 * n_ops] inline stacks, ready buffers */
} corun_state;

static int corun_init(hwt_engine *e, void **state) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1), w = (size_t)e->executors;
  corun_state *c = hwt_sched_alloc(e, sizeof *c);
  if (!c) return HWT_ENOMEM;
  c->heap = hwt_sched_alloc(e, sizeof(int) * n);
  c->remaining = hwt_sched_alloc(e, sizeof(_Atomic int) * n);
  c->local = hwt_sched_alloc(e, sizeof(int) * n * 2 * w);
  c->busy_until = hwt_sched_alloc(e, sizeof(double) * w);
  c->slot = hwt_slots_alloc(e, e->executors);
  if (!c->heap || !c->remaining || !c->local || !c->busy_until || !c->slot) return HWT_ENOMEM;
  if (pthread_mutex_init(&c->mu, NULL) != 0) return HWT_ESYS;
  *state = c;
  return HWT_OK;
}

static void corun_release(hwt_engine *e, void *state) {
  (void)e;
  pthread_mutex_destroy(&((corun_state *)state)->mu);
}

/* ---- Strategy 3 (under the lock) ---- */

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

static void dispatch(hwt_engine *e, corun_state *c) {
  if (c->heap_size == 0 || c->idle == 0) return;
  const int workers = e->executors;
  int idle = __builtin_popcountll(c->idle), running = workers - idle;
  double now = hwt_now(), horizon = 0;
  for (int w = 0; w < workers; w++)
    if (!(c->idle >> w & 1) && c->busy_until[w] > horizon) horizon = c->busy_until[w];
  while (c->heap_size > 0 && idle > 0) {
    int op = c->heap[0];
    double sec;
    int nth = choose(e, op, idle, running, now, horizon, &sec);
    if (nth == 0) return;
    (void)hwt_prio_heap_pop(e, c->heap, &c->heap_size);
    atomic_store_explicit(&c->remaining[op], nth, memory_order_relaxed);
    for (int tid = 0; tid < nth; tid++) {
      int w = __builtin_ctzll(c->idle);
      c->idle &= c->idle - 1;
      c->busy_until[w] = now + sec;
      c->slot[w].tid = tid;
      c->slot[w].nth = nth;
      hwt_slot_give(&c->slot[w], op);
    }
    if (now + sec > horizon) horizon = now + sec;
    idle -= nth;
    running += nth;
  }
}

/* ---- workers ---- */

typedef struct {
  hwt_engine *e;
  corun_state *c;
  int *inl, n_inl;   /* tiny single-thread ops this worker runs itself */
  int *heavy, n_heavy; /* ops for the heap */
} ready_ctx;

/* One thread, whatever the idle cores: a worker may run it by itself. */
static int single(const hwt_engine *e, int op) {
  if (e->op_nth[op] != 1) return 0;
  const int *ct = e->cand_threads ? e->cand_threads + (size_t)op * (size_t)e->cand_n : NULL;
  return !ct || ct[0] <= 1;
}

static int runs_inline(const hwt_engine *e, int op) { return e->tiny[op] && single(e, op); }

static void on_ready(void *arg, int s) {
  ready_ctx *r = arg;
  if (runs_inline(r->e, s))
    r->inl[r->n_inl++] = s;
  else
    r->heavy[r->n_heavy++] = s;
}

static void flush(hwt_engine *e, corun_state *c, int w) {
  pthread_mutex_lock(&c->mu);
  c->idle |= (uint64_t)1 << w;
  dispatch(e, c);
  pthread_mutex_unlock(&c->mu);
}

/* Heavy successors go to the heap, except one single-thread successor the
 * worker keeps for itself (inputs in its cache) when nothing waiting is
 * more critical by more than the graph's slack (levels.c); then idle
 * workers get what fits. Returns the kept op or -1. */
static int flush_keep(hwt_engine *e, ready_ctx *r) {
  corun_state *c = r->c;
  int cont = -1, keep = -1;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < r->n_heavy; i++) {
    int s = r->heavy[i];
    if (cont < 0 && e->slack > 0 && single(e, s))
      cont = s;
    else
      hwt_prio_heap_push(e, c->heap, &c->heap_size, s);
  }
  r->n_heavy = 0;
  if (cont >= 0) {
    if (c->heap_size == 0 || e->prio[c->heap[0]] - e->prio[cont] <= e->slack)
      keep = cont;
    else
      hwt_prio_heap_push(e, c->heap, &c->heap_size, cont);
  }
  dispatch(e, c);
  pthread_mutex_unlock(&c->mu);
  return keep;
}

/* The last part of op finished on worker w: complete it and every tiny op
 * it (transitively) makes ready, and the successor it keeps. */
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

static void run_part(hwt_engine *e, corun_state *c, int w, int op, int tid, int nth) {
  hwt_op_event *ev = &e->events[op];
  double t0 = e->profile ? hwt_now() : 0.0;
  e->impl[op]->run(&e->ctx[op], e->ws + (size_t)w * e->ws_stride, tid, nth);
  if (e->profile && tid == 0) {
    ev->op = op;
    ev->executor = w;
    ev->threads = nth;
    ev->start_s = t0;
  }
  /* acq_rel: the last finisher sees every part's output (and tid 0's event
   * fields) before it completes the op. */
  if (atomic_fetch_sub_explicit(&c->remaining[op], 1, memory_order_acq_rel) != 1) return;
  if (e->profile) ev->end_s = hwt_now();
  ready_ctx r = {e, c, c->local + (size_t)w * 2 * (size_t)e->n_ops, 0,
                 c->local + ((size_t)w * 2 + 1) * (size_t)e->n_ops, 0};
  complete(e, w, op, &r);
}

static void corun_worker(void *arg, int w) {
  hwt_engine *e = arg;
  corun_state *c = e->sched_state;
  for (;;) {
    flush(e, c, w);
    /* The part was written before the op (hwt_slot_give's release). */
    int op = hwt_slot_take(&c->slot[w], e->spin);
    if (op < 0) return;
    run_part(e, c, w, op, c->slot[w].tid, c->slot[w].nth);
  }
}

static int corun_run(hwt_engine *e, void *state) {
  corun_state *c = state;
  atomic_store(&c->completed, 0);
  c->idle = 0;
  hwt_slots_reset(c->slot, e->executors, e->n_run == 0);
  for (int w = 0; w < e->executors; w++) c->busy_until[w] = 0;
  hwt_prio_heap_roots(e, c->heap, &c->heap_size);
  return hwt_pool_run_teams(e->pool, corun_worker, e);
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
};
