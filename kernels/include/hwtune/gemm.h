/* FP32 GEMM: C = op(A) * op(B) + beta * C (+ bias per column), row-major.
 *
 * Plan, then run: hwt_gemm_plan_make() fixes the blocking (mc, kc, nc) and the
 * per-thread workspace size for a shape, ISA and thread count; the plan is
 * then run many times with no allocation. hwt_gemm_run_part() computes the
 * share of output tiles of thread `tid` out of `nth`; shares are disjoint and
 * need no synchronisation between threads, so any fork-join can drive them.
 *
 * Constant B (weights): hwt_gemm_pack_b() packs op(B) once into the plan's
 * micro-panel layout (packed_b_floats floats); hwt_gemm_run_part_packed()
 * then skips packing B, which is most of the time outside the micro-kernel
 * when M is small.
 */
#ifndef HWTUNE_GEMM_H
#define HWTUNE_GEMM_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef struct {
  int M, N, K;
  int trans_a;  /* 0: A is [M,K] (lda >= K); 1: A is [K,M] (lda >= M) */
  int trans_b;  /* 0: B is [K,N] (ldb >= N); 1: B is [N,K] (ldb >= K) */
  int lda, ldb, ldc;  /* ldc >= N */
  float beta;   /* 0: C is overwritten (never read); otherwise C = AB + beta*C */
} hwt_gemm_desc;

typedef struct {
  hwt_gemm_desc d;
  hwt_isa isa;
  int nth;            /* thread count the partition was made for */
  int mr, nr;         /* micro-kernel register tile */
  int mc, kc, nc;     /* cache blocking */
  size_t ws_floats;   /* workspace floats each thread needs (64-byte aligned) */
  size_t packed_b_floats; /* size of op(B) packed by hwt_gemm_pack_b */
} hwt_gemm_plan;

/* Cache sizes the blocking is derived from, in bytes; 0 means unknown (the
 * blocking then assumes the documented fallback, see blocking.c). l1d and l2
 * are one core's; l3 is one instance of the last level, shared by l3_cpus
 * logical CPUs (the blocking budgets l3 / l3_cpus per thread). */
typedef struct {
  long l1d, l2, l3;
  int l3_cpus;
} hwt_cache_sizes;

/* This host's caches as the fingerprint reads them: sysfs for the first CPU
 * this process may run on (Linux), else sysconf for L1d and L2, else 0.
 * Read once per process. */
HWT_API void hwt_cache_sizes_host(hwt_cache_sizes *out);

/* Returns HWT_OK or HWT_EINVAL / HWT_EISA. Blocking for this host's caches
 * (hwt_cache_sizes_host). */
HWT_API int hwt_gemm_plan_make(const hwt_gemm_desc *d, hwt_isa isa, int nth, hwt_gemm_plan *out);
/* The same for given cache sizes (another machine's fingerprint, a test);
 * caches NULL means this host's. */
HWT_API int hwt_gemm_plan_make_for(const hwt_gemm_desc *d, hwt_isa isa, int nth,
                                   const hwt_cache_sizes *caches, hwt_gemm_plan *out);
/* bias may be NULL; ws is this thread's workspace (plan->ws_floats floats). */
HWT_API void hwt_gemm_run_part(const hwt_gemm_plan *p, const float *A, const float *B,
                               float *C, const float *bias, float *ws, int tid, int nth);
/* Packs all of op(B) (as described by p->d: trans_b, ldb) into `packed`
 * (p->packed_b_floats floats, 64-byte aligned). The layout depends on the
 * plan's K, N, kc and nr only, so it serves every thread count and tid.
 * Returns HWT_OK or HWT_EINVAL. */
HWT_API int hwt_gemm_pack_b(const hwt_gemm_plan *p, const float *B, float *packed);
/* As hwt_gemm_run_part, with B already packed by hwt_gemm_pack_b for a plan
 * with the same N, K, trans_b, isa and blocking (always the case for the same
 * plan). Always takes the packed micro-kernel path, also for M <= 6. */
HWT_API void hwt_gemm_run_part_packed(const hwt_gemm_plan *p, const float *A,
                                      const float *packed_b, float *C, const float *bias,
                                      float *ws, int tid, int nth);
/* Plain-C reference (the test oracle): triple loop, double accumulation. */
HWT_API int hwt_gemm_ref(const hwt_gemm_desc *d, const float *A, const float *B, float *C,
                         const float *bias);

#endif
