/* Which spins of the pool yield the CPU: on an unpinned pool, a thread that
 * has spun on the pool's channel (the once-per-run hand-off between teams)
 * for YIELD_AFTER_S yields at each clock read after it, because the OS may
 * have queued the very thread it waits for on its own CPU; a team's per-op
 * fork-join never yields, and a pinned pool never yields.
 *
 * This file compiles the pool itself with HWT_POOL_YIELD counting the
 * yields (each still yields), per thread: the caller's join and a team
 * master's wait for the next run are told apart. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static _Atomic int yields_caller, yields_other;
static pthread_t caller;
static void count_yield(void) {
  atomic_fetch_add(pthread_equal(pthread_self(), caller) ? &yields_caller : &yields_other, 1);
  sched_yield();
}
#define HWT_POOL_YIELD() count_yield()
#include "../../engine/threads/pool.c"

#include <unistd.h>
#include "check.h"

/* Long enough that a 200 us-budget spin passes YIELD_AFTER_S many times. */
#define BUSY_S 1e-3

static void busy(double s) {
  double t0 = hwt_now();
  while (hwt_now() - t0 < s) {
  }
}

/* Team 1's master works BUSY_S while the caller (team 0) joins at once. */
static void team_slow1(void *arg, int team) {
  (void)arg;
  if (team == 1) busy(BUSY_S);
}

static void share_slow1(void *arg, int tid, int nth) {
  (void)arg, (void)nth;
  if (tid == 1) busy(BUSY_S);
}

static void team_fork(void *arg, int team) {
  hwt_pool *p = arg;
  CHECK(hwt_team_parallel(p, team, share_slow1, NULL, 2) == HWT_OK);
}

static hwt_pool *make(int teams, int tpt, int pin) {
  hwt_pool_config cfg = {teams, tpt, pin, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  if (!p) fprintf(stderr, "skip %dx%d pin=%d: %s\n", teams, tpt, pin, err);
  return p;
}

static void reset(void) { atomic_store(&yields_caller, 0), atomic_store(&yields_other, 0); }

/* Five runs of fn with the caller away for BUSY_S after each: no thread
 * may yield. */
static void expect_no_yield(const char *what, hwt_pool *p, hwt_team_fn fn, void *arg) {
  reset();
  for (int r = 0; r < 5; r++) {
    CHECK(hwt_pool_run_teams(p, fn, arg) == HWT_OK);
    busy(BUSY_S);
  }
  CHECK(atomic_load(&yields_caller) == 0 && atomic_load(&yields_other) == 0, "%s: %d %d", what,
        atomic_load(&yields_caller), atomic_load(&yields_other));
}

int main(void) {
  caller = pthread_self();
  unsetenv("HWTUNE_POOL_SPIN_US");
  /* Unpinned 2x1: the caller's join outlasts YIELD_AFTER_S and yields;
   * then, with the caller away for BUSY_S between runs, team 1's master
   * yields while it waits for the next run. */
  hwt_pool *p = make(2, 1, 0);
  if (p) {
    int spins = p->spin_s > 2 * YIELD_AFTER_S;  /* 0 with more threads than CPUs */
    reset();
    for (int r = 0; r < 5; r++) CHECK(hwt_pool_run_teams(p, team_slow1, NULL) == HWT_OK);
    CHECK(!spins || atomic_load(&yields_caller) > 0, "caller yields %d", atomic_load(&yields_caller));
    reset();
    for (int r = 0; r < 5; r++) {
      CHECK(hwt_pool_run_teams(p, team_slow1, NULL) == HWT_OK);
      busy(BUSY_S);
    }
    CHECK(!spins || atomic_load(&yields_other) > 0, "master yields %d", atomic_load(&yields_other));
    CHECK(p->pool_ch.yields == 1);
    hwt_pool_destroy(p);
  }
  /* Unpinned 1x2: the team's fork-joins spin without yielding, in the
   * master's join and in the worker's wait between regions. */
  p = make(1, 2, 0);
  if (p) {
    expect_no_yield("unpinned 1x2", p, team_fork, p);
    for (int t = 0; t < p->n_teams; t++) CHECK(p->team_ch[t].yields == 0);
    hwt_pool_destroy(p);
  }
  /* Pinned 2x1: no yield anywhere. */
  p = make(2, 1, 1);
  if (p) {
    expect_no_yield("pinned 2x1", p, team_slow1, NULL);
    CHECK(p->pool_ch.yields == 0);
    hwt_pool_destroy(p);
  }
  return failures ? 1 : 0;
}
