/* What waking a waiter costs, the simulator's wake term (hwtune/simulate.h,
 * park_s and wake_s) as the planner calibrates it (calibrate.py):
 *   - hwt_bench_spin_s: how long an executor polls its empty slot (the
 *     engine's HWT_EXEC_SPIN polls, slots.h) before it parks;
 *   - hwt_bench_wake: how long a parked waiter takes to run again after
 *     another core posts to it and wakes it (a futex wake on Linux).
 * In a fork-join region of two shares on team 0, share 1 (the other
 * thread's core when pinned) parks on a word at once, as a shared-queue
 * master waits on its condition; share 0 lets it sleep for gap_s, then
 * stamps the time, changes the word and wakes it; the waiter stamps the
 * time it runs again. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../exec/exec_internal.h"
#include "../exec/slots.h"
#include "../threads/park.h"
#include "bench_util.h"
#include "hwtune/bench.h"

typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint32_t word;
  _Alignas(HWT_CACHELINE) _Atomic int ack;
  double posted; /* written before `word` changes, read after */
  double gap_s;
  int reps;
  double *out;
} wake_job;

static void wake_task(void *arg, int tid, int nth) {
  (void)nth;
  wake_job *j = arg;
  if (tid == 1) {
    for (int r = 0; r < j->reps; r++) {
      while (atomic_load(&j->word) == (uint32_t)r) hwt_park_wait(&j->word, (uint32_t)r);
      j->out[r] = hwt_now() - j->posted;
      atomic_store(&j->ack, r + 1);
    }
    return;
  }
  for (int r = 0; r < j->reps; r++) {
    double t0 = hwt_now();
    while (hwt_now() - t0 < j->gap_s) {
    }
    j->posted = hwt_now();
    atomic_store(&j->word, (uint32_t)r + 1);
    hwt_park_wake(&j->word);
    while (atomic_load(&j->ack) != r + 1) {
    }
  }
}

typedef struct {
  hwt_pool *p;
  wake_job *job;
  int rc;
} wake_loop;

static void wake_team0(void *arg, int team) {
  wake_loop *l = arg;
  if (team == 0) l->rc = hwt_team_parallel(l->p, 0, wake_task, l->job, 2);
}

int hwt_bench_wake(hwt_pool *p, double gap_s, int reps, double *wake_s) {
  if (!p || hwt_pool_team_size(p) < 2 || !(gap_s >= 0 && gap_s < 1.0) || reps < 1 || !wake_s)
    return HWT_EINVAL;
  wake_job job = {0};
  job.gap_s = gap_s;
  job.reps = reps;
  job.out = wake_s;
  wake_loop l = {p, &job, HWT_OK};
  int rc = hwt_pool_run_teams(p, wake_team0, &l);
  return rc != HWT_OK ? rc : l.rc;
}

double hwt_bench_spin_s(int reps) {
  if (reps < 1) return (double)HWT_EINVAL;
  _Atomic uint32_t slot = 0;
  double best = INFINITY;
  for (int r = 0; r < reps; r++) {
    double t0 = hwt_now();
    (void)hwt_slot_poll(&slot, HWT_EXEC_SPIN); /* nobody posts: every poll runs */
    double t = hwt_now() - t0;
    if (t < best) best = t;
  }
  return best;
}
