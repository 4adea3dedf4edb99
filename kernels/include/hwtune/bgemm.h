/* bf16 GEMM (issue #43): C[M,N] = A[M,K] x B[K,N] (+ bias[N], ReLU
 * optional) with fp32 inputs and output, both operands rounded to bfloat16
 * when packed and the products accumulated in fp32.
 *
 * Rounding (hwt_bf16_from_f32): round to nearest even, NaN kept quiet, and
 * denormal inputs flushed to a signed zero, as vcvtne2ps2bf16 does (tested
 * bit for bit against it where the CPU has AVX512_BF16). Accumulation: k is
 * taken in pairs (2q, 2q+1); per pair and output element
 *   acc = rne(acc + a[2q+1] * b[2q+1]); acc = rne(acc + a[2q] * b[2q])
 * in fp32, the order of Intel's vdpbf16ps pseudo-code (each bf16 product is
 * exact in fp32, so each step rounds once). An odd K is padded with a zero
 * pair member. The portable C variant and the plain-C reference
 * (hwt_bgemm_ref) compute exactly this; the AVX512_BF16 variant is
 * vdpbf16ps, which flushes denormal results to zero too (tests/c/test_bgemm.c
 * states and checks what they agree to).
 *
 * Variants (hwt_bgemm_variant_name): "avx512_bf16" (8 x 32 tile, vdpbf16ps;
 * only where CPUID reports avx512_bf16) and "generic" (portable C, 4 x 16),
 * which also serves the AVX2 ISA row: AVX2 has no bf16 product. B (weights)
 * is packed once (hwt_bgemm_pack_b); A is packed per tile at run time. */
#ifndef HWTUNE_BGEMM_H
#define HWTUNE_BGEMM_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef struct {
  int M, N, K;
  int lda;      /* A row stride in elements (>= K; >= M when trans_a) */
  int trans_a;  /* A stored [K, M] */
} hwt_bgemm_desc;

typedef struct {
  hwt_bgemm_desc d;
  hwt_isa isa;          /* the variant row: HWT_ISA_AVX512 means AVX512_BF16 */
  int mr, nr;           /* register tile */
  int Kq;               /* k pairs: ceil(K / 2) */
  int nc;               /* columns per block (multiple of nr) kept in L2 */
  int mc;               /* rows whose A tiles are packed at once (multiple of mr) */
  size_t packed_b_bytes;
  size_t ws_bytes;      /* per-thread workspace */
} hwt_bgemm_plan;

/* One run's output: C[i*ldc + j] = acc + bias[j] (bias may be NULL), then
 * max(., 0) when relu. */
typedef struct {
  float *C;
  int ldc;
  const float *bias;
  int relu;
} hwt_bgemm_epi;

/* bfloat16 bits of x, as vcvtne2ps2bf16 rounds it (see above). */
HWT_API uint16_t hwt_bf16_from_f32(float x);
HWT_API float hwt_bf16_to_f32(uint16_t h);
/* The same 16 conversions by vcvtne2ps2bf16 itself (the tests compare the
 * two): HWT_OK, or HWT_EISA without AVX512_BF16. */
HWT_API int hwt_bf16_from_f32_x16_native(const float *x, uint16_t *out);
/* 1 when CPUID reports AVX512_BF16 and the OS saves AVX-512 state. */
HWT_API int hwt_bgemm_has_avx512_bf16(void);
/* The bf16 variant row isa would use on this CPU: HWT_ISA_AVX512 without
 * avx512_bf16, and HWT_ISA_AVX2, give the portable row (HWT_ISA_GENERIC).
 * HWT_EISA when the CPU cannot run isa at all. */
HWT_API int hwt_bgemm_variant_for(hwt_isa isa);
/* "avx512_bf16", "generic". */
HWT_API const char *hwt_bgemm_variant_name(hwt_isa isa);
/* HWT_OK, HWT_EINVAL, or HWT_EISA: isa names no bf16 row (HWT_ISA_AVX2) or
 * one this CPU cannot run (HWT_ISA_AVX512 without avx512_bf16): callers that
 * want a fallback ask hwt_bgemm_variant_for first. */
HWT_API int hwt_bgemm_plan_make(const hwt_bgemm_desc *d, hwt_isa isa, hwt_bgemm_plan *out);
/* Packs fp32 B ([K,N] with row stride ldb, or [N,K] when trans_b) as bf16
 * into `packed` (plan->packed_b_bytes, 64-byte aligned). */
HWT_API int hwt_bgemm_pack_b(const hwt_bgemm_plan *p, const float *B, int ldb, int trans_b,
                             void *packed);
/* Rows [m0, m1), columns [n0, n1) (n0 a multiple of nr), one thread. ws:
 * plan->ws_bytes, 64-byte aligned. */
HWT_API void hwt_bgemm_compute(const hwt_bgemm_plan *p, const float *A, const void *packed_b,
                               const hwt_bgemm_epi *e, int m0, int m1, int n0, int n1,
                               void *ws);
/* Thread tid's share of nth (disjoint outputs, no synchronisation). */
HWT_API void hwt_bgemm_run_part(const hwt_bgemm_plan *p, const float *A, const void *packed_b,
                                const hwt_bgemm_epi *e, void *ws, int tid, int nth);
/* Plain-C reference (the oracle): B unpacked [K,N] row-major, ldb = N. */
HWT_API int hwt_bgemm_ref(const hwt_bgemm_desc *d, const float *A, const float *B,
                          const hwt_bgemm_epi *e);

#endif
