/* Core-to-core transfer: what a read costs when another core wrote the
 * data last, the simulator's per-tensor transfer term (hwtune/simulate.h,
 * xfer_bps and xfer_s) as the planner calibrates it (calibrate.py).
 *
 * Team 0's master (pinned to its core) writes a buffer; then, in a
 * fork-join region of two shares, share 1 reads it, timing only its own
 * read, while share 0 waits for it: the master is busy with share 0, so
 * share 1 runs on the other thread's core (the pool lets a free thread
 * take any share; a read that still ran on the writer's core is reported
 * as NaN). Then the master writes it again and reads it back itself. Both
 * reads do the same work, so remote - local is the transfer alone. */
#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu */
#endif
#include <sched.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench_util.h"
#include "hwtune/bench.h"

static int this_cpu(void) {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

typedef struct {
  uint64_t *buf;
  size_t words;
  uint64_t stamp, sink;
  int writer_cpu, reader_cpu;
  atomic_int read_done;
  double read_s;
} xfer_job;

/* Four independent sums: the read runs at the rate lines arrive, not at the
 * latency of one add chain (which the local read would time instead). */
static uint64_t read_all(const uint64_t *x, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) a += x[i], b += x[i + 1], c += x[i + 2], d += x[i + 3];
  for (; i < n; i++) a += x[i];
  return a + b + c + d;
}

static void write_all(xfer_job *j) {
  j->stamp++;
  for (size_t i = 0; i < j->words; i++) j->buf[i] = j->stamp + i;
  j->writer_cpu = this_cpu();
}

static double timed_read(xfer_job *j) {
  double t0 = hwt_now();
  j->sink += read_all(j->buf, j->words);
  return hwt_now() - t0;
}

static void remote_task(void *arg, int tid, int nth) {
  (void)nth;
  xfer_job *j = arg;
  if (tid == 0) {
    while (!atomic_load_explicit(&j->read_done, memory_order_acquire)) {
    }
    return;
  }
  j->reader_cpu = this_cpu();
  j->read_s = timed_read(j);
  atomic_store_explicit(&j->read_done, 1, memory_order_release);
}

typedef struct {
  hwt_pool *p;
  xfer_job *job;
  int reps;
  double *remote, *local;
  int rc;
} xfer_loop;

static void xfer_team0(void *arg, int team) {
  xfer_loop *l = arg;
  xfer_job *j = l->job;
  if (team != 0) return;
  /* Untimed rounds first: wake the second thread and fault the pages in. */
  for (int r = -3; r < l->reps && l->rc == HWT_OK; r++) {
    write_all(j);
    atomic_store(&j->read_done, 0);
    int rc = hwt_team_parallel(l->p, 0, remote_task, j, 2);
    if (rc != HWT_OK) {
      l->rc = rc;
      break;
    }
    double remote = j->reader_cpu >= 0 && j->reader_cpu == j->writer_cpu ? NAN : j->read_s;
    write_all(j);
    double local = timed_read(j);
    if (r >= 0) l->remote[r] = remote, l->local[r] = local;
  }
}

int hwt_bench_xfer(hwt_pool *p, long bytes, int reps, double *remote_s, double *local_s) {
  if (!p || hwt_pool_team_size(p) < 2 || bytes < 64 || reps < 1 || !remote_s || !local_s)
    return HWT_EINVAL;
  xfer_job job = {0};
  job.words = (size_t)bytes / sizeof(uint64_t);
  job.buf = aligned_alloc(HWT_CACHELINE, (job.words * sizeof(uint64_t) + HWT_CACHELINE - 1) /
                                             HWT_CACHELINE * HWT_CACHELINE);
  if (!job.buf) return HWT_ENOMEM;
  xfer_loop l = {p, &job, reps, remote_s, local_s, HWT_OK};
  int rc = hwt_pool_run_teams(p, xfer_team0, &l);
  free(job.buf);
  return rc != HWT_OK ? rc : l.rc;
}
