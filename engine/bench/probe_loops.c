/* Machine probes: peak FMA throughput and STREAM-triad bandwidth, driven
 * on team 0 through the per-thread probe kernels of kernels/probe. */
#include <stdatomic.h>
#include <stdlib.h>

#include "bench_util.h"
#include "hwtune/bench.h"
#include "hwtune/probe.h"

/* A probe call should last about a millisecond: long against the clock read
 * and the loop around it (~50 ns), short against `seconds`. */
#define PROBE_CALL_S 1e-3

typedef struct {
  hwt_isa isa;
  double seconds;
  double *span;      /* [3 * nth]: flops, start and end of each share */
  _Atomic int status; /* first failure of a probe call */
} fma_job;

static void fma_task(void *arg, int tid, int nth) {
  fma_job *j = arg;
  (void)nth;
  long iters = 1024;
  double flops = 0, t0 = hwt_now(), t = t0;
  while (t - t0 < j->seconds) {
    double c0 = t;
    double f = hwt_probe_fma_thread(j->isa, iters);
    t = hwt_now();
    if (f < 0) {
      atomic_store(&j->status, (int)f);
      break;
    }
    flops += f;
    if (t - c0 < PROBE_CALL_S && iters < (1L << 40)) iters *= 2;
  }
  j->span[3 * tid] = flops;
  j->span[3 * tid + 1] = t0;
  j->span[3 * tid + 2] = t;
}

typedef struct {
  hwt_pool *p;
  int nth;
  void *job;
  hwt_task_fn fn;
} once_ctx;

static void once_team0(void *arg, int team) {
  once_ctx *c = arg;
  if (team == 0) hwt_team_parallel(c->p, 0, c->fn, c->job, c->nth);
}

double hwt_probe_fma_peak(hwt_pool *p, int nth, hwt_isa isa, double seconds) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK || !(seconds > 0)) return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  fma_job j = {isa, seconds, calloc(3 * (size_t)nth, sizeof(double)), HWT_OK};
  if (!j.span) return HWT_ENOMEM;
  once_ctx c = {p, nth, &j, fma_task};
  int rc = hwt_pool_run_teams(p, once_team0, &c);
  /* All flops over the wall-clock window the shares covered together: a
   * share that ran after another (the pool lets an idle thread take a late
   * worker's share) must not count as running beside it. */
  double flops = 0, first = j.span[1], last = j.span[2];
  for (int t = 0; t < nth; t++) {
    flops += j.span[3 * t];
    if (j.span[3 * t + 1] < first) first = j.span[3 * t + 1];
    if (j.span[3 * t + 2] > last) last = j.span[3 * t + 2];
  }
  free(j.span);
  if (rc == HWT_OK) rc = atomic_load(&j.status);
  if (rc == HWT_OK && !(last > first)) rc = HWT_EINVAL;
  return rc == HWT_OK ? flops / (last - first) * 1e-9 : rc;
}

typedef struct {
  hwt_isa isa;
  float *a, *b, *c;
  size_t n;
  int nt_stores;
} triad_job;

static void triad_init_task(void *arg, int tid, int nth) {
  triad_job *j = arg;
  /* First touch by (about) the thread that will stream the range, so pages
   * land on its NUMA node: the probe's split is this even one rounded to
   * cache lines. */
  size_t lo = j->n * (size_t)tid / (size_t)nth, hi = j->n * (size_t)(tid + 1) / (size_t)nth;
  for (size_t i = lo; i < hi; i++) j->a[i] = 0.0f, j->b[i] = 1.0f, j->c[i] = 2.0f;
}

static void triad_task(void *arg, int tid, int nth) {
  triad_job *j = arg;
  hwt_probe_triad_part(j->isa, j->a, j->b, j->c, 3.0f, j->n, j->nt_stores, tid, nth);
}

typedef struct {
  hwt_pool *p;
  int nth;
  triad_job *job;
  double seconds;
  double gbs;
} triad_ctx;

static void triad_team0(void *arg, int team) {
  triad_ctx *c = arg;
  if (team != 0) return;
  hwt_team_parallel(c->p, 0, triad_init_task, c->job, c->nth);
  /* Regular stores pay a read-for-ownership the 12 bytes/element do not
   * count; non-temporal ones avoid it but lose when the arrays fit in cache.
   * Which wins depends on n and the machine, so time both and keep the best. */
  for (int nt = 0; nt <= 1; nt++) {
    c->job->nt_stores = nt;
    hwt_team_parallel(c->p, 0, triad_task, c->job, c->nth);
    long passes = 0;
    double t0 = hwt_now(), t;
    do {
      hwt_team_parallel(c->p, 0, triad_task, c->job, c->nth);
      passes++;
    } while ((t = hwt_now()) - t0 < c->seconds / 2);
    double gbs = 12.0 * (double)c->job->n * (double)passes / (t - t0) * 1e-9;
    if (gbs > c->gbs) c->gbs = gbs;
  }
}

double hwt_probe_triad(hwt_pool *p, int nth, long n, hwt_isa isa, double seconds) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK || n < 1 || !(seconds > 0)) return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  triad_job j = {isa, hwt_bench_alloc((size_t)n), hwt_bench_alloc((size_t)n),
                 hwt_bench_alloc((size_t)n), (size_t)n, 0};
  int rc = HWT_ENOMEM;
  triad_ctx c = {p, nth, &j, seconds, 0.0};
  if (j.a && j.b && j.c) rc = hwt_pool_run_teams(p, triad_team0, &c);
  free(j.a), free(j.b), free(j.c);
  return rc == HWT_OK ? c.gbs : rc;
}
