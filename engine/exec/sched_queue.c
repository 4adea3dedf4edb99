/* The shared-queue scheduler: the naive parallel engine of TensorFlow and
 * MXNet that Graphi compares against. Every executor master pulls the oldest
 * ready op from ONE global FIFO under one mutex, runs it on its (unpinned)
 * team, then decrements its successors' counters and pushes those that
 * became ready. No priorities, no placement: the baseline.
 *
 * The FIFO is an array of n_ops slots: each op is pushed exactly once per
 * run, so head/tail only grow and nothing wraps or allocates. The FIFO's
 * rules (sq_fifo below) are shared with the virtual-time version at the end
 * of this file. */
#include <pthread.h>
#include "sched.h"

/* ---- the decisions: one FIFO of ready ops, oldest first ---- */

typedef struct {
  int *q;          /* [n_ops]: each op is pushed at most once per run */
  int head, tail;
} sq_fifo;

static int sq_fifo_init(hwt_engine *e, sq_fifo *f) {
  f->q = hwt_sched_alloc(e, sizeof(int) * (size_t)(e->n_ops > 0 ? e->n_ops : 1));
  return f->q ? HWT_OK : HWT_ENOMEM;
}

/* A run's start: the roots, in run order. */
static void sq_fifo_reset(const hwt_engine *e, sq_fifo *f) {
  f->head = f->tail = 0;
  for (int i = 0; i < e->n_roots; i++) f->q[f->tail++] = e->roots[i];
}

/* hwt_exec_complete's callback: a successor became ready. */
static void sq_fifo_push(void *arg, int op) {
  sq_fifo *f = arg;
  f->q[f->tail++] = op;
}

static int sq_fifo_empty(const sq_fifo *f) { return f->head == f->tail; }
static int sq_fifo_take(sq_fifo *f) { return f->q[f->head++]; }

/* ---- threaded run ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sq_fifo f;
  int done;        /* ops completed */
} sq_state;

static int sq_init(hwt_engine *e, void **state) {
  sq_state *s = hwt_sched_alloc(e, sizeof *s);
  if (!s || sq_fifo_init(e, &s->f) < 0) return HWT_ENOMEM;
  if (pthread_mutex_init(&s->mu, NULL) != 0) return HWT_ESYS;
  if (pthread_cond_init(&s->cv, NULL) != 0) {
    pthread_mutex_destroy(&s->mu);
    return HWT_ESYS;
  }
  *state = s;
  return HWT_OK;
}

static void sq_release(hwt_engine *e, void *state) {
  (void)e;
  sq_state *s = state;
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
}

static void sq_team(void *arg, int team) {
  hwt_engine *e = arg;
  sq_state *s = e->sched_state;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (sq_fifo_empty(&s->f) && s->done < e->n_run) {
      if (hwt_exec_wait_hook) hwt_exec_wait_hook(1);
      pthread_cond_wait(&s->cv, &s->mu);
      if (hwt_exec_wait_hook) hwt_exec_wait_hook(0);
    }
    if (sq_fifo_empty(&s->f)) break; /* every op done */
    int op = sq_fifo_take(&s->f);
    pthread_mutex_unlock(&s->mu);
    hwt_exec_run_op(e, team, op);
    pthread_mutex_lock(&s->mu);
    int before = s->f.tail;
    hwt_exec_complete(e, op, sq_fifo_push, &s->f);
    s->done++;
    /* Wake others only when there is more than this master will take itself,
     * or when the run is over. */
    if (s->f.tail - before > 1 || s->done == e->n_run) pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

static int sq_run(hwt_engine *e, void *state) {
  sq_state *s = state;
  s->done = 0;
  sq_fifo_reset(e, &s->f);
  return hwt_pool_run_teams(e->pool, sq_team, e);
}

/* ---- virtual time ----
 * A master that completes an op takes the FIFO's head itself under the same
 * lock; idle masters take the next ones (which master wins a wake-up race is
 * not the scheduler's decision: vplaces 0). */

typedef struct {
  sq_fifo f;
  unsigned char *idle; /* [executors] */
} sq_vstate;

static int sq_vinit(hwt_engine *e, void **vstate) {
  sq_vstate *s = hwt_sched_alloc(e, sizeof *s);
  if (!s || sq_fifo_init(e, &s->f) < 0 || !(s->idle = hwt_sched_alloc(e, (size_t)e->executors)))
    return HWT_ENOMEM;
  *vstate = s;
  return HWT_OK;
}

/* Idle masters other than `self` wake and take the oldest ready ops. */
static void sq_vwake(hwt_vrun *v, sq_vstate *s) {
  hwt_engine *e = v->e;
  for (int x = 0; x < e->executors && !sq_fifo_empty(&s->f); x++) {
    if (!s->idle[x]) continue;
    hwt_vrun_section(v);
    int op = sq_fifo_take(&s->f);
    s->idle[x] = 0;
    hwt_vrun_start(v, x, op, 0, e->op_nth[op], 1);
  }
}

static void sq_vstart(hwt_vrun *v, void *vstate) {
  sq_vstate *s = vstate;
  sq_fifo_reset(v->e, &s->f);
  for (int x = 0; x < v->e->executors; x++) s->idle[x] = 1;
  sq_vwake(v, s);
}

static void sq_vdone(hwt_vrun *v, void *vstate, int w, int op, int last) {
  (void)last;
  sq_vstate *s = vstate;
  hwt_engine *e = v->e;
  hwt_vrun_section(v);
  hwt_exec_complete(e, op, sq_fifo_push, &s->f);
  if (!sq_fifo_empty(&s->f)) {
    int next = sq_fifo_take(&s->f);
    hwt_vrun_start(v, w, next, 0, e->op_nth[next], 0);
  } else {
    s->idle[w] = 1;
  }
  sq_vwake(v, s);
}

const hwt_sched_impl hwt_sched_shared_queue = {
    .info = {.name = "shared-queue",
             .summary = "executors pull ready ops from one global FIFO, unpinned (the "
                        "TensorFlow/MXNet baseline)",
             .pins = HWT_PIN_NEVER},
    .init = sq_init,
    .run = sq_run,
    .release = sq_release,
    .vinit = sq_vinit,
    .vstart = sq_vstart,
    .vdone = sq_vdone,
    .vplaces = 0,
};
