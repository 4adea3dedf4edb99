/* Timed measurement loops: GEMM, element-wise, co-running teams, fork-join.
 * Every loop runs inside hwt_pool_run_teams so that team 0's master (the
 * caller) is pinned like the rest of its team while it is timed. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "hwtune/bench.h"
#include "hwtune/gemm.h"

/* Counting mode (hwt_bench_counting_mode): callgrind's simulated caches
 * index their sets by address bits up to bit 18 (LL 8 MiB 16-way: 512 KiB
 * period), so a count depends on where the heap put the operands; glibc's
 * dynamic mmap threshold moves them with whatever the process freed before
 * (counted gemm-64x512x512-t1 6.59M to 6.68M estimated cycles after a
 * different earlier malloc/free, and one CI run +1.5% for the 2-thread
 * figure). Counting places every operand at a 2 MiB boundary, so every
 * simulated set index is the same in every process. */
#define COUNT_ALIGN ((size_t)2 << 20)
static atomic_int counting;

void hwt_bench_counting_mode(int on) { atomic_store(&counting, on != 0); }

float *hwt_bench_alloc(size_t n) {
  if (n == 0 || n > SIZE_MAX / sizeof(float) / 2) return NULL;
  size_t align = atomic_load_explicit(&counting, memory_order_relaxed) ? COUNT_ALIGN
                                                                       : HWT_CACHELINE;
  size_t bytes = (n * sizeof(float) + align - 1) / align * align;
  return aligned_alloc(align, bytes);
}

void hwt_bench_fill(float *x, size_t n, uint32_t seed, float lo, float hi) {
  /* LCG: reproducible inputs without libc rand()'s global state. */
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
  }
}

int hwt_bench_check_team0(hwt_pool *p, int nth) {
  return p && nth >= 1 && nth <= hwt_pool_team_size(p) ? HWT_OK : HWT_EINVAL;
}

/* ---- one op repeated on team 0 ---- */

typedef struct {
  hwt_pool *p;
  int nth, warmup, reps, inner;
  hwt_task_fn fn;
  void *job;
  double *samples;
  /* A call is `regions` fork-joins; before each, region(job, g) points the
   * job at its slice g. NULL: one fork-join over the whole job. */
  int regions;
  void (*region)(void *job, int g);
} timed_loop;

/* Counting mode, second part: each fork-join's shares run one after
 * another on the calling thread, in thread order. Callgrind simulates one
 * cache for all threads, so its misses depend on how its scheduler
 * interleaved them, which futex wake-up timing decides: the same build
 * counted gemm-64x512x512-t2 at 6,701,704 and 6,804,900 estimated cycles
 * (packing +10%) on the same host. In thread order the counts are the
 * partition's own work, the same every run. */
static void fork_join(const timed_loop *t) {
  if (atomic_load_explicit(&counting, memory_order_relaxed)) {
    for (int tid = 0; tid < t->nth; tid++) t->fn(t->job, tid, t->nth);
    return;
  }
  hwt_team_parallel(t->p, 0, t->fn, t->job, t->nth);
}

static void timed_team0(void *arg, int team) {
  timed_loop *t = arg;
  if (team != 0) return;
  for (int r = -t->warmup; r < t->reps; r++) {
    double t0 = hwt_now();
    for (int i = 0; i < t->inner; i++)
      for (int g = 0; g < t->regions; g++) {
        if (t->region) t->region(t->job, g);
        fork_join(t);
      }
    double dt = (hwt_now() - t0) / t->inner;
    if (r >= 0) t->samples[r] = dt;
  }
}

int hwt_bench_run_timed(hwt_pool *p, int nth, hwt_task_fn fn, void *job, int warmup, int reps,
                        int inner, double *samples) {
  timed_loop t = {p, nth, warmup, reps, inner, fn, job, samples, 1, NULL};
  return hwt_pool_run_teams(p, timed_team0, &t);
}

int hwt_bench_loop_args_ok(int warmup, int reps, int inner, const double *samples) {
  return warmup >= 0 && reps >= 1 && inner >= 1 && samples;
}

/* ---- GEMM ---- */

typedef struct {
  hwt_gemm_plan plan;
  float *A, *B, *C, *ws;
  size_t ws_stride; /* floats between threads' workspaces: whole cache lines */
} gemm_job;

static void gemm_task(void *arg, int tid, int nth) {
  gemm_job *j = arg;
  hwt_gemm_run_part(&j->plan, j->A, j->B, j->C, NULL, j->ws + (size_t)tid * j->ws_stride, tid,
                    nth);
}

static void gemm_job_free(gemm_job *j) {
  free(j->A), free(j->B), free(j->C), free(j->ws);
}

/* Plans [M,K]x[K,N] for nth threads and allocates initialised operands. */
static int gemm_job_make(gemm_job *j, int M, int K, int N, hwt_isa isa, int nth) {
  memset(j, 0, sizeof *j);
  if (M < 1 || K < 1 || N < 1) return HWT_EINVAL;
  hwt_gemm_desc d = {M, N, K, 0, 0, K, N, N, 0.0f};
  int rc = hwt_gemm_plan_make(&d, isa, nth, &j->plan);
  if (rc != HWT_OK) return rc;
  size_t line = HWT_CACHELINE / sizeof(float);
  j->ws_stride = (j->plan.ws_floats + line - 1) / line * line;
  j->A = hwt_bench_alloc((size_t)M * K);
  j->B = hwt_bench_alloc((size_t)K * N);
  j->C = hwt_bench_alloc((size_t)M * N);
  j->ws = hwt_bench_alloc(j->ws_stride ? j->ws_stride * (size_t)nth : 1);
  if (!j->A || !j->B || !j->C || !j->ws) {
    gemm_job_free(j);
    return HWT_ENOMEM;
  }
  hwt_bench_fill(j->A, (size_t)M * K, 1, -1.0f, 1.0f);
  hwt_bench_fill(j->B, (size_t)K * N, 2, -1.0f, 1.0f);
  memset(j->C, 0, (size_t)M * N * sizeof(float));
  return HWT_OK;
}

int hwt_bench_gemm(hwt_pool *p, int nth, int M, int K, int N, hwt_isa isa, int warmup, int reps,
                   int inner, double *samples) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK ||
      !hwt_bench_loop_args_ok(warmup, reps, inner, samples))
    return HWT_EINVAL;
  gemm_job j;
  int rc = gemm_job_make(&j, M, K, N, isa, nth);
  if (rc != HWT_OK) return rc;
  rc = hwt_bench_run_timed(p, nth, gemm_task, &j, warmup, reps, inner, samples);
  gemm_job_free(&j);
  return rc;
}

/* ---- element-wise ---- */

typedef struct {
  hwt_eltwise_desc d;
  float *a, *b, *c, *out;
  /* Regions: the call's n elements as `regions` consecutive slices, one
   * fork-join each; `off` is the current slice's first element. */
  long n, off;
  int regions;
} ew_job;

static void ew_task(void *arg, int tid, int nth) {
  ew_job *j = arg;
  long o = j->off;
  hwt_eltwise_run_part(&j->d, j->a + o, j->b + o, j->c + o, j->out + o, tid, nth);
}

/* Slice g of the n elements: [g n / regions, (g + 1) n / regions). Written by
 * team 0's master between fork-joins, which order it before the workers read. */
static void ew_region(void *arg, int g) {
  ew_job *j = arg;
  long lo = (long)((long long)g * j->n / j->regions);
  long hi = (long)((long long)(g + 1) * j->n / j->regions);
  j->off = lo;
  j->d.n = (size_t)(hi - lo);
}

static void ew_job_free(ew_job *j) {
  free(j->a), free(j->b), free(j->c), free(j->out);
}

static int ew_job_make(ew_job *j, hwt_ew_op op, long n, hwt_isa isa, int nt_stores) {
  memset(j, 0, sizeof *j);
  if (n < 1) return HWT_EINVAL;
  hwt_eltwise_desc_init(&j->d, op, isa, (size_t)n);
  j->n = n, j->off = 0, j->regions = 1;
  j->d.nt_stores = nt_stores != 0;
  int rc = hwt_eltwise_check(&j->d);
  if (rc != HWT_OK) return rc;
  j->a = hwt_bench_alloc((size_t)n);
  j->b = hwt_bench_alloc((size_t)n);
  j->c = hwt_bench_alloc((size_t)n);
  j->out = hwt_bench_alloc((size_t)n);
  if (!j->a || !j->b || !j->c || !j->out) {
    ew_job_free(j);
    return HWT_ENOMEM;
  }
  /* [-4, 4] covers the curved part of sigmoid/tanh and both signs of relu. */
  hwt_bench_fill(j->a, (size_t)n, 3, -4.0f, 4.0f);
  hwt_bench_fill(j->b, (size_t)n, 4, -4.0f, 4.0f);
  hwt_bench_fill(j->c, (size_t)n, 5, -4.0f, 4.0f);
  memset(j->out, 0, (size_t)n * sizeof(float));
  return HWT_OK;
}

int hwt_bench_eltwise(hwt_pool *p, int nth, hwt_ew_op op, long n, hwt_isa isa, int nt_stores,
                      int warmup, int reps, int inner, int regions, double *samples) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK ||
      !hwt_bench_loop_args_ok(warmup, reps, inner, samples) || regions < 1 || regions > n)
    return HWT_EINVAL;
  ew_job j;
  int rc = ew_job_make(&j, op, n, isa, nt_stores);
  if (rc != HWT_OK) return rc;
  j.regions = regions;
  timed_loop t = {p, nth, warmup, reps, inner, ew_task, &j, samples, regions,
                  regions > 1 ? ew_region : NULL};
  rc = hwt_pool_run_teams(p, timed_team0, &t);
  ew_job_free(&j);
  return rc;
}

/* ---- co-running teams ---- */

typedef struct {
  hwt_pool *p;
  int is_gemm, M, K, N;
  long n;
  hwt_isa isa;
  double seconds;
  double *team_gflops;
  _Atomic int arrived;
  _Atomic int status;
} corun_ctx;

static void corun_team(void *arg, int team) {
  corun_ctx *c = arg;
  int nth = hwt_pool_team_size(c->p), n_teams = hwt_pool_n_teams(c->p);
  gemm_job g;
  ew_job e;
  int rc;
  hwt_task_fn fn;
  void *job;
  double flops;
  /* Each team master allocates its own operands: first touch from the
   * team's CPU, no sharing between teams, as in the engine. */
  if (c->is_gemm) {
    rc = gemm_job_make(&g, c->M, c->K, c->N, c->isa, nth);
    fn = gemm_task, job = &g, flops = 2.0 * c->M * c->K * c->N;
  } else {
    rc = ew_job_make(&e, HWT_EW_MUL, c->n, c->isa, 0);
    fn = ew_task, job = &e, flops = (double)c->n;
  }
  if (rc != HWT_OK) atomic_store(&c->status, rc);
  else hwt_team_parallel(c->p, team, fn, job, nth); /* warm caches and pages */
  /* Start together so that the timed windows overlap: co-running is the
   * point of the measurement. */
  atomic_fetch_add(&c->arrived, 1);
  while (atomic_load(&c->arrived) < n_teams) sched_yield();
  if (atomic_load(&c->status) == HWT_OK) {
    long calls = 0;
    double t0 = hwt_now(), t;
    do {
      hwt_team_parallel(c->p, team, fn, job, nth);
      calls++;
    } while ((t = hwt_now()) - t0 < c->seconds);
    c->team_gflops[team] = (double)calls * flops / (t - t0) * 1e-9;
  }
  if (rc == HWT_OK) {
    if (c->is_gemm) gemm_job_free(&g);
    else ew_job_free(&e);
  }
}

int hwt_bench_corun(hwt_pool *p, int is_gemm, int M, int K, int N, long n, hwt_isa isa,
                    double seconds, double *team_gflops) {
  if (!p || !team_gflops || !(seconds > 0)) return HWT_EINVAL;
  if (is_gemm ? (M < 1 || K < 1 || N < 1) : n < 1) return HWT_EINVAL;
  corun_ctx c = {p, is_gemm, M, K, N, n, isa, seconds, team_gflops, 0, HWT_OK};
  int rc = hwt_pool_run_teams(p, corun_team, &c);
  return rc != HWT_OK ? rc : atomic_load(&c.status);
}

/* ---- fork-join overhead ---- */

static void empty_task(void *arg, int tid, int nth) {
  (void)arg, (void)tid, (void)nth;
}

double hwt_bench_forkjoin_pool(hwt_pool *p, int nth, long iters) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK || iters < 1 || iters > INT32_MAX) return HWT_EINVAL;
  double s;
  /* Warm-up of up to 1000 regions wakes parked workers first. */
  int rc = hwt_bench_run_timed(p, nth, empty_task, NULL, 1, 1,
                               (int)(iters < 1000 ? iters : 1000), &s);
  if (rc == HWT_OK) rc = hwt_bench_run_timed(p, nth, empty_task, NULL, 0, 1, (int)iters, &s);
  return rc == HWT_OK ? s : rc;
}
