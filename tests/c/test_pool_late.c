/* A worker the OS has not run yet must not stall a team's fork-join.
 *
 * This file compiles the pool itself with a hook that holds chosen workers
 * between seeing a region and claiming a share, the window in which a
 * preempted worker sits on a loaded machine. While they are held the master
 * must finish many regions on its own (or with the other workers); once
 * released, the late workers must run nothing of the regions they slept
 * through and must take part again. Every share of every region runs
 * exactly once, counted per (region, share). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static void late_hook(int team, int idx);
#define HWT_POOL_LATE_HOOK(team, idx) late_hook(team, idx)
#include "../../engine/threads/pool.c"

#include <unistd.h>
#include "check.h"


/* A held worker gives up after this long and the test fails: a master that
 * waits for it would otherwise hang the test. */
#define HOLD_TIMEOUT_S 10.0
#define LATE_MAXT 4
#define PHASE1 2000 /* regions while the workers are held */
#define PHASE2 2000 /* regions after their release */
#define LOCKSTEP 50 /* of PHASE2: share 0 waits for share 1 to be run by another thread */

static _Atomic unsigned hold_mask; /* workers (bit idx) to hold at their next region */
static _Atomic int n_held, release, timed_out;

static void late_hook(int team, int idx) {
  (void)team;
  unsigned bit = 1u << idx;
  if (!(atomic_fetch_and(&hold_mask, ~bit) & bit)) return;
  atomic_fetch_add(&n_held, 1);
  double t0 = hwt_now();
  while (!atomic_load(&release)) {
    if (hwt_now() - t0 > HOLD_TIMEOUT_S) {
      atomic_store(&timed_out, 1);
      return;
    }
    usleep(100);
  }
}

typedef struct {
  _Atomic int runs[LATE_MAXT];
  _Atomic int by_master[LATE_MAXT];
  int lockstep;
} region_rec;

static region_rec *recs;
static pthread_t master;

static void late_task(void *arg, int tid, int nth) {
  region_rec *r = arg;
  if (tid < 0 || tid >= nth || nth > LATE_MAXT) return;
  atomic_fetch_add(&r->runs[tid], 1);
  if (pthread_equal(pthread_self(), master)) atomic_fetch_add(&r->by_master[tid], 1);
  if (r->lockstep && tid == 0) {
    /* Share 1 can only be run by another thread while this one waits. */
    double t0 = hwt_now();
    while (!atomic_load(&r->runs[1]) && hwt_now() - t0 < HOLD_TIMEOUT_S) hwt_cpu_relax();
  }
}

static void run_late(const char *what, int tpt, unsigned held) {
  hwt_pool_config cfg = {1, tpt, 0, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  CHECK(p != NULL, "%s: create: %s", what, err);
  if (!p) return;
  int want_held = __builtin_popcount(held);
  atomic_store(&n_held, 0), atomic_store(&release, 0), atomic_store(&timed_out, 0);
  atomic_store(&hold_mask, held);
  recs = calloc(PHASE1 + PHASE2, sizeof *recs);
  master = pthread_self();

  /* Region 0 wakes every worker; the held ones stop in the hook. Wait until
   * they are there, so that the regions below run while they are late. */
  CHECK(hwt_team_parallel(p, 0, late_task, &recs[0], tpt) == HWT_OK, "%s: region 0", what);
  double t0 = hwt_now();
  while (atomic_load(&n_held) < want_held && hwt_now() - t0 < HOLD_TIMEOUT_S) usleep(100);
  CHECK(atomic_load(&n_held) == want_held, "%s: %d of %d workers reached the hook", what,
        atomic_load(&n_held), want_held);
  t0 = hwt_now();
  for (int r = 1; r < PHASE1; r++)
    CHECK(hwt_team_parallel(p, 0, late_task, &recs[r], tpt) == HWT_OK, "%s: region %d", what, r);
  double phase1_s = hwt_now() - t0;
  /* Still held: the master finished without them (had it waited, the hold
   * would have timed out first). */
  CHECK(!atomic_load(&timed_out), "%s: a held worker timed out: the master waited for it", what);
  CHECK(phase1_s < HOLD_TIMEOUT_S / 2, "%s: %d regions took %.3f s with held workers", what,
        PHASE1, phase1_s);
  for (int r = 1; r < PHASE1; r++)
    for (int s = 0; s < tpt; s++)
      if (held & (1u << s)) {
        CHECK(atomic_load(&recs[r].runs[s]) == 1, "%s: region %d share %d of a held worker ran %d",
              what, r, s, atomic_load(&recs[r].runs[s]));
        break;
      }

  atomic_store(&release, 1);
  for (int r = PHASE1; r < PHASE1 + PHASE2; r++) {
    recs[r].lockstep = r < PHASE1 + LOCKSTEP;
    CHECK(hwt_team_parallel(p, 0, late_task, &recs[r], tpt) == HWT_OK, "%s: region %d", what, r);
  }
  hwt_pool_destroy(p);
  CHECK(!atomic_load(&timed_out), "%s: a held worker timed out", what);

  for (int r = 0; r < PHASE1 + PHASE2; r++)
    for (int s = 0; s < tpt; s++)
      if (atomic_load(&recs[r].runs[s]) != 1) {
        CHECK(0, "%s: region %d share %d ran %d times", what, r, s, atomic_load(&recs[r].runs[s]));
        r = PHASE1 + PHASE2;
        break;
      }
  /* In lockstep regions the master held share 0 (or a worker did, and the
   * master took share 1): either way share 1 ran beside share 0, so the
   * workers, late ones included, are back. */
  for (int r = PHASE1; r < PHASE1 + LOCKSTEP; r++)
    CHECK(atomic_load(&recs[r].by_master[0]) + atomic_load(&recs[r].by_master[1]) <= 1,
          "%s: lockstep region %d ran shares 0 and 1 on the master", what, r);
  printf("%s: %d regions in %.3f ms while %d worker(s) were held\n", what, PHASE1 - 1,
         phase1_s * 1e3, want_held);
  free(recs);
}

int main(void) {
  run_late("1x2, worker 1 late", 2, 1u << 1);
  run_late("1x4, workers 1 and 3 late", 4, (1u << 1) | (1u << 3));
  /* Parked workers: the hook runs after the futex wake. */
  setenv("HWTUNE_POOL_SPIN_US", "0", 1);
  run_late("1x2 parked, worker 1 late", 2, 1u << 1);
  unsetenv("HWTUNE_POOL_SPIN_US");
  return check_verdict("test_pool_late: ok\n");
}
