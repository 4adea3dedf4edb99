/* The shared-queue scheduler: the naive parallel engine of TensorFlow and
 * MXNet that Graphi compares against. Every executor master pulls the oldest
 * ready op from ONE global FIFO under one mutex, runs it on its (unpinned)
 * team, then decrements its successors' counters and pushes those that
 * became ready. No priorities, no placement: the baseline.
 *
 * The FIFO is an array of n_ops slots: each op is pushed exactly once per
 * run, so head/tail only grow and nothing wraps or allocates. */
#include <stdlib.h>
#include "exec_internal.h"

int hwt_sched_sq_init(hwt_engine *e) {
  hwt_sq_state *s = &e->sq;
  s->q = malloc(sizeof(int) * (size_t)(e->n_ops > 0 ? e->n_ops : 1));
  if (!s->q) return HWT_ENOMEM;
  if (pthread_mutex_init(&s->mu, NULL) != 0) {
    free(s->q);
    s->q = NULL;
    return HWT_ESYS;
  }
  if (pthread_cond_init(&s->cv, NULL) != 0) {
    pthread_mutex_destroy(&s->mu);
    free(s->q);
    s->q = NULL;
    return HWT_ESYS;
  }
  return HWT_OK;
}

void hwt_sched_sq_free(hwt_engine *e) {
  if (!e->sq.q) return;
  pthread_cond_destroy(&e->sq.cv);
  pthread_mutex_destroy(&e->sq.mu);
  free(e->sq.q);
  e->sq.q = NULL;
}

/* Called with the mutex held (from complete()). */
static void push_locked(void *arg, int op) {
  hwt_sq_state *s = arg;
  s->q[s->tail++] = op;
}

static void sq_team(void *arg, int team) {
  hwt_engine *e = arg;
  hwt_sq_state *s = &e->sq;
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

int hwt_sched_sq_run(hwt_engine *e) {
  hwt_sq_state *s = &e->sq;
  s->head = s->tail = s->done = 0;
  for (int i = 0; i < e->n_roots; i++) s->q[s->tail++] = e->roots[i];
  return hwt_pool_run_teams(e->pool, sq_team, e);
}
