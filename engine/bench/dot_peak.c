/* int8 and bf16 GEMM peaks (issue #43): every thread of team 0 loops the
 * int8 (kernels/qgemm) or bf16 (kernels/bgemm) GEMM on its own copy of a
 * compute-bound shape kept in L2, as hwt_probe_fma_peak loops FMA chains;
 * the scan reports them beside the FMA peak. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hwtune/bench.h"
#include "hwtune/bgemm.h"
#include "hwtune/qgemm.h"

/* 96 rows (a multiple of every variant's mr: 8, 6, 4) by 256 by 256: the
 * packed B (64-128 KiB), the A rows (24-96 KiB) and the output stay in a
 * Zen 4 core's 1 MiB L2, and each call is 12.6 M multiply-adds, long against
 * the clock read. */
#define DOT_M 96
#define DOT_N 256
#define DOT_K 256

typedef struct {
  int kind;
  hwt_qgemm_plan q;
  hwt_bgemm_plan b;
  void *a, *packed;
  int32_t *colsum;
  char *ws;  /* per thread: workspace then C */
  size_t ws_stride;
  double seconds;
  double *span; /* [3 * nth]: ops, start and end of each share */
} dot_job;

static void dot_task(void *arg, int tid, int nth) {
  dot_job *j = arg;
  (void)nth;
  char *ws = j->ws + (size_t)tid * j->ws_stride;
  float *c = (float *)(ws + (j->kind ? j->b.ws_bytes : j->q.ws_bytes));
  const double per_call = 2.0 * DOT_M * DOT_N * DOT_K;
  double ops = 0, t0 = hwt_now(), t = t0;
  while (t - t0 < j->seconds) {
    if (j->kind) {
      const hwt_bgemm_epi e = {c, DOT_N, NULL, 0};
      hwt_bgemm_compute(&j->b, j->a, j->packed, &e, 0, DOT_M, 0, DOT_N, ws);
    } else {
      hwt_qgemm_epi e = {0}; /* the accumulators as floats: no scale */
      e.out = HWT_QOUT_ACC;
      e.C = c;
      e.rs_c = DOT_N;
      e.cs_c = 1;
      hwt_qgemm_compute(&j->q, j->a, j->packed, j->colsum, &e, 0, DOT_M, 0, DOT_N, ws);
    }
    ops += per_call;
    t = hwt_now();
  }
  j->span[3 * tid] = ops;
  j->span[3 * tid + 1] = t0;
  j->span[3 * tid + 2] = t;
}

typedef struct {
  hwt_pool *p;
  int nth;
  dot_job *job;
} dot_ctx;

static void dot_team0(void *arg, int team) {
  dot_ctx *c = arg;
  if (team == 0) hwt_team_parallel(c->p, 0, dot_task, c->job, c->nth);
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

double hwt_probe_dot_peak(hwt_pool *p, int nth, hwt_isa isa, int kind, double seconds) {
  if (hwt_bench_check_team0(p, nth) != HWT_OK || !(seconds > 0) || (kind != 0 && kind != 1))
    return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  dot_job j;
  memset(&j, 0, sizeof j);
  j.kind = kind;
  j.seconds = seconds;
  int rc;
  size_t packed_bytes, ws_bytes;
  if (kind == 0) {
    const hwt_qgemm_desc d = {DOT_M, DOT_N, DOT_K, DOT_K, HWT_QA_U8, 0};
    if ((rc = hwt_qgemm_plan_make(&d, isa, &j.q)) < 0) return rc;
    packed_bytes = j.q.packed_b_bytes, ws_bytes = j.q.ws_bytes;
  } else {
    const hwt_bgemm_desc d = {DOT_M, DOT_N, DOT_K, DOT_K, 0};
    if ((rc = hwt_bgemm_plan_make(&d, isa, &j.b)) < 0) return rc;
    packed_bytes = j.b.packed_b_bytes, ws_bytes = j.b.ws_bytes;
  }
  j.ws_stride = align64(ws_bytes) + align64((size_t)DOT_M * DOT_N * 4);
  j.a = aligned_alloc(64, (size_t)DOT_M * DOT_K * 4);
  j.packed = aligned_alloc(64, align64(packed_bytes));
  j.colsum = malloc(DOT_N * sizeof(int32_t));
  j.ws = aligned_alloc(64, j.ws_stride * (size_t)nth);
  j.span = calloc(3 * (size_t)nth, sizeof(double));
  float *bf = malloc((size_t)DOT_K * DOT_N * sizeof(float));
  int8_t *b8 = malloc((size_t)DOT_K * DOT_N);
  rc = j.a && j.packed && j.colsum && j.ws && j.span && bf && b8 ? HWT_OK : HWT_ENOMEM;
  if (rc == HWT_OK) {
    /* small values: no overflow or special numbers whatever the kind */
    for (size_t i = 0; i < (size_t)DOT_M * DOT_K; i++) {
      if (kind) ((float *)j.a)[i] = (float)(i % 7) * 0.25f;
      else ((uint8_t *)j.a)[i] = (uint8_t)(i % 251);
    }
    for (size_t i = 0; i < (size_t)DOT_K * DOT_N; i++) {
      bf[i] = (float)(i % 5) * 0.5f - 1.0f;
      b8[i] = (int8_t)(i % 255 - 127);
    }
    rc = kind ? hwt_bgemm_pack_b(&j.b, bf, DOT_N, 0, j.packed)
              : hwt_qgemm_pack_b(&j.q, b8, DOT_N, 0, j.packed, j.colsum);
  }
  if (rc == HWT_OK) {
    dot_ctx c = {p, nth, &j};
    rc = hwt_pool_run_teams(p, dot_team0, &c);
  }
  /* All ops over the wall-clock window the shares covered together (see
   * hwt_probe_fma_peak). */
  double ops = 0, first = 0, last = 0;
  if (rc == HWT_OK) {
    first = j.span[1], last = j.span[2];
    for (int t = 0; t < nth; t++) {
      ops += j.span[3 * t];
      if (j.span[3 * t + 1] < first) first = j.span[3 * t + 1];
      if (j.span[3 * t + 2] > last) last = j.span[3 * t + 2];
    }
    if (!(last > first)) rc = HWT_EINVAL;
  }
  free(j.a), free(j.packed), free(j.colsum), free(j.ws), free(j.span), free(bf), free(b8);
  return rc == HWT_OK ? ops / (last - first) * 1e-9 : rc;
}
