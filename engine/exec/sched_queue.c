/* The shared-queue scheduler: the naive parallel engine of TensorFlow and
 * MXNet that Graphi compares against. Every executor master pulls the oldest
 * ready op from ONE global FIFO under one mutex, runs it on its (unpinned)
 * team, then decrements its successors' counters and pushes those that
 * became ready. No priorities, no placement: the baseline.
 *
 * The FIFO is an array of n_ops slots: each op is pushed exactly once per
 * run, so head/tail only grow and nothing wraps or allocates. */
#include <pthread.h>
#include "sched.h"

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int *q;          /* [n_ops]: each op is pushed at most once per run */
  int head, tail;
  int done;        /* ops completed */
} sq_state;

static int sq_init(hwt_engine *e, void **state) {
  sq_state *s = hwt_sched_alloc(e, sizeof *s);
  if (!s || !(s->q = hwt_sched_alloc(e, sizeof(int) * (size_t)(e->n_ops > 0 ? e->n_ops : 1))))
    return HWT_ENOMEM;
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

/* Called with the mutex held (from complete()). */
static void push_locked(void *arg, int op) {
  sq_state *s = arg;
  s->q[s->tail++] = op;
}

static void sq_team(void *arg, int team) {
  hwt_engine *e = arg;
  sq_state *s = e->sched_state;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == s->tail && s->done < e->n_run) pthread_cond_wait(&s->cv, &s->mu);
    if (s->head == s->tail) break; /* every op done */
    int op = s->q[s->head++];
    pthread_mutex_unlock(&s->mu);
    hwt_exec_run_op(e, team, op);
    pthread_mutex_lock(&s->mu);
    int before = s->tail;
    hwt_exec_complete(e, op, push_locked, s);
    s->done++;
    /* Wake others only when there is more than this master will take itself,
     * or when the run is over. */
    if (s->tail - before > 1 || s->done == e->n_run) pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

static int sq_run(hwt_engine *e, void *state) {
  sq_state *s = state;
  s->head = s->tail = s->done = 0;
  for (int i = 0; i < e->n_roots; i++) s->q[s->tail++] = e->roots[i];
  return hwt_pool_run_teams(e->pool, sq_team, e);
}

const hwt_sched_impl hwt_sched_shared_queue = {
    .info = {.name = "shared-queue",
             .summary = "executors pull ready ops from one global FIFO, unpinned (the "
                        "TensorFlow/MXNet baseline)",
             .pins = HWT_PIN_NEVER},
    .init = sq_init,
    .run = sq_run,
    .release = sq_release,
};
