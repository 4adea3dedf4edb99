/* int8 GEMM (issue #43): C[M,N] = epilogue(A[M,K] (u8) x B[K,N] (s8)), int32
 * accumulation, the ONNX Runtime / oneDNN convention.
 *
 * A (activations) is u8, or s8 shifted by +128 at packing (the zero point
 * moves by +128 with it, so the result is the same), read from bytes or from
 * a float array holding integer values (how the engine's float32 buffers
 * carry quantized activations: docs/onnx.md). B (weights) is s8, packed once
 * at prepare time (hwt_qgemm_pack_b), which also returns its column sums for
 * the zero-point compensation:
 *   sum_k (a - za)(b - zb[j]) = sum_k a*b - za*colsum[j] - zb[j]*rowsum_i + K*za*zb[j].
 * The epilogue turns that exact int32 into the output (hwt_qgemm_epi).
 *
 * Variants (hwt_qgemm_variant_name): the AVX-512 row is vpdpbusd (AVX512-VNNI:
 * 4 u8 x s8 products summed into int32, exact) and only runs where CPUID
 * reports avx512_vnni; the AVX2 row widens both operands to int16 and uses
 * vpmaddwd (2 int16 products summed into int32, exact: vpmaddubsw's int16
 * saturation, which MLAS accepts on AVX2, never happens here); generic is
 * plain C over the same int16 layout. All variants give the same int32
 * accumulators bit for bit, and hwt_qgemm_ref is the oracle.
 */
#ifndef HWTUNE_QGEMM_H
#define HWTUNE_QGEMM_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef enum {
  HWT_QA_U8 = 0,  /* const uint8_t * */
  HWT_QA_S8 = 1,  /* const int8_t * (shifted by +128 into u8) */
  HWT_QA_F32U8 = 2, /* const float * holding integers 0..255 */
  HWT_QA_F32S8 = 3  /* const float * holding integers -128..127 */
} hwt_qa_type;

typedef enum {
  HWT_QOUT_F32 = 0,   /* float: acc * scale[j] + bias[j] (dequantized), relu optional */
  HWT_QOUT_ACC = 1,   /* float: the compensated int32 accumulator (MatMulInteger) */
  HWT_QOUT_QF32 = 2,  /* float holding clamp(rne(acc * scale[j] + bias[j]) + zy, qmin, qmax) */
  HWT_QOUT_U8 = 3,    /* uint8_t: the same, qmin/qmax forced to 0..255 */
  HWT_QOUT_S8 = 4     /* int8_t: the same, qmin/qmax forced to -128..127 */
} hwt_qout_type;

typedef struct {
  int M, N, K;
  int lda;       /* A row stride in elements (>= K when a_ks <= 1) */
  hwt_qa_type a_type;
  int a_ks;      /* A's stride between consecutive k in elements; 0 or 1: contiguous
                    rows. An NCHW 1x1 conv's activations are A with lda 1 and a_ks H*W
                    (pixels are rows, channels the k), packed without an im2col copy */
} hwt_qgemm_desc;

/* The epilogue of one run. scale and bias are per output column (a
 * per-tensor scale is N copies); for requantised outputs scale already
 * holds a_scale * w_scale[j] / y_scale and bias the real bias / y_scale,
 * so that the output is rne(acc * scale[j] + bias[j]) + zy. zb NULL: weight
 * zero points 0 (symmetric weights, the common case: no row sums needed). */
typedef struct {
  int32_t za;           /* activation zero point in A's own type (s8 for HWT_QA_S8) */
  const int32_t *zb;    /* [N] weight zero points (s8 domain) or NULL */
  const float *scale;   /* [N]; unused for HWT_QOUT_ACC */
  const float *bias;    /* [N] or NULL */
  const int32_t *bias_i; /* [N] or NULL: integers added to the accumulator before it becomes a
                            float (ONNX Runtime's QLinearConv form: an int32 bias of scale
                            a_scale * w_scale[j], then one multiply by scale[j]) */
  int32_t zy, qmin, qmax; /* requantised outputs */
  int relu;             /* max(v, 0) before requantisation */
  hwt_qout_type out;
  void *C;
  ptrdiff_t rs_c, cs_c; /* element strides of C's rows and columns (NCHW: 1, H*W) */
} hwt_qgemm_epi;

typedef struct {
  hwt_qgemm_desc d;
  hwt_isa isa;          /* the GEMM variant row used (AVX512 means VNNI) */
  int mr, nr, kg;       /* register tile; k group (4: u8 quads, 2: int16 pairs) */
  int esize;            /* bytes per packed element (1 or 2) */
  int Kp;               /* K rounded up to kg */
  int nc;               /* columns per block (multiple of nr) kept in L2 */
  size_t packed_b_bytes;
  size_t ws_bytes;      /* per-thread workspace */
  int a_once;           /* 1: a thread packs all its A rows once, before the column blocks
                           (N > nc and they fit QGEMM_A_ONCE_BUDGET); 0: per tile and block */
} hwt_qgemm_plan;

/* The int8 variant the ISA row isa would use on this CPU: HWT_ISA_AVX512
 * needs avx512_vnni too (without it the AVX2 row serves). HWT_EISA when the
 * CPU lacks the row. */
HWT_API int hwt_qgemm_variant_for(hwt_isa isa);
/* "avx512_vnni", "avx2", "generic". */
HWT_API const char *hwt_qgemm_variant_name(hwt_isa isa);
/* HWT_OK, HWT_EINVAL or HWT_EISA (isa's int8 row not runnable here: an
 * AVX-512 CPU without VNNI asked for HWT_ISA_AVX512 exactly, see
 * hwt_qgemm_variant_for for the fallback). */
HWT_API int hwt_qgemm_plan_make(const hwt_qgemm_desc *d, hwt_isa isa, hwt_qgemm_plan *out);
/* Packs s8 B ([K,N] with row stride ldb, or [N,K] when trans_b) into
 * `packed` (plan->packed_b_bytes, 64-byte aligned) and writes colsum[N]. */
HWT_API int hwt_qgemm_pack_b(const hwt_qgemm_plan *p, const int8_t *B, int ldb, int trans_b,
                             void *packed, int32_t *colsum);
/* Rows [m0, m1) and columns [n0, n1) (n0 a multiple of nr) of the product,
 * one thread; A points at row 0. ws: plan->ws_bytes, 64-byte aligned. */
HWT_API void hwt_qgemm_compute(const hwt_qgemm_plan *p, const void *A, const void *packed_b,
                               const int32_t *colsum, const hwt_qgemm_epi *e, int m0, int m1,
                               int n0, int n1, void *ws);
/* Thread tid's share of nth (disjoint outputs, no synchronisation). */
HWT_API void hwt_qgemm_run_part(const hwt_qgemm_plan *p, const void *A, const void *packed_b,
                                const int32_t *colsum, const hwt_qgemm_epi *e, void *ws,
                                int tid, int nth);
/* Plain-C reference (the test oracle): B unpacked [K,N] row-major s8. */
HWT_API int hwt_qgemm_ref(const hwt_qgemm_desc *d, const void *A, const int8_t *B,
                          const hwt_qgemm_epi *e);

#endif
