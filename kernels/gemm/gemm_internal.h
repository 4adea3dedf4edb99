/* Internal contracts of the GEMM family: what a micro-kernel, a packing
 * routine and a GEMV routine promise, and the per-ISA table the driver uses.
 * The contracts are function types: each ISA's routines are declared
 * through them, so a definition that drifts from its contract does not
 * compile. Not installed; only kernels/gemm/ includes it. */
#ifndef HWTUNE_GEMM_INTERNAL_H
#define HWTUNE_GEMM_INTERNAL_H
#include <stddef.h>
#include "hwtune/gemm.h"

/* Micro-kernel: C[0:m, 0:n] (m <= mr, n <= nr) = A_panel * B_panel + beta*C + bias.
 * a: packed A micro-panel, kc x mr, a[k*mr + i] (rows beyond m are zero).
 * b: B micro-panel, kc x nr, b[k*ldb + j] (columns beyond n are zero).
 * beta == 0 never reads C (it may hold NaN). bias is NULL or bias[0:n]. */
typedef void hwt_gemm_ukr_fn(int kc, const float *a, const float *b, size_t ldb, float *c,
                             size_t ldc, int m, int n, float beta, const float *bias);

/* Micro-kernel that packs as it goes: b is op(B) itself, not transposed
 * (b[k*ldb + j], only j < n read), and each row it loads is also stored into
 * bcopy (kc x nr, 64-byte aligned, columns beyond n zeroed), which then is
 * the packed B micro-panel for the remaining row panels. */
typedef void hwt_gemm_ukr_pack_fn(int kc, const float *a, const float *b, size_t ldb,
                                  float *bcopy, float *c, size_t ldc, int m, int n, float beta,
                                  const float *bias);

/* Packing (pack_body.c, compiled per ISA). pack_a: op(A) rows [i0, i0+mb) x
 * depth [p0, p0+kb) into ceil(mb/mr) micro-panels of kb x mr, zero-padded.
 * pack_b: depth [p0, p0+kb) x columns [j0, j0+nb) of op(B) into ceil(nb/nr)
 * micro-panels of kb x nr, zero-padded. Both absorb the transposes. */
typedef void hwt_gemm_pack_a_fn(const hwt_gemm_desc *d, const float *A, int i0, int mb, int p0,
                                int kb, int mr, float *dst);
typedef void hwt_gemm_pack_b_fn(const hwt_gemm_desc *d, const float *B, int p0, int kb, int j0,
                                int nb, int nr, float *dst);

/* GEMV for m <= HWT_GEMV_MAX_M rows of A (row i at a + i*lda, K contiguous
 * floats) times op(B) restricted to n columns: B points at column 0 of the
 * range ([K, n] with row stride ldb, or [n, K] with row stride ldb when
 * trans_b). c, bias likewise point at column 0 of the range. */
typedef void hwt_gemv_fn(int m, int n, int k, const float *a, size_t lda, const float *b,
                         size_t ldb, int trans_b, float *c, size_t ldc, float beta,
                         const float *bias);

/* Rows up to which GEMV (B streamed once for all rows) beats the packed path
 * (12-row AVX-512 tiles padded with zeros + packing). Sweep of M on
 * [M,512]x[512,2048], AVX-512, 1 thread, median GFLOPS gemv/packed:
 * M=1 8.9/2.3, 4 15.2/9.4, 5 11.5/7.1, 6 12.3/8.8, 8 17.4/17.9, 12 13.9/23.5
 * (hwt_gemm_run_part, median thread-CPU time of 41 runs, library built with
 * -DHWT_GEMV_MAX_M=16 and =0). */
#ifndef HWT_GEMV_MAX_M /* overridable at build time to repeat the sweep */
#define HWT_GEMV_MAX_M 6

/* At most this many rows of C, B wider than a page and not transposed: the
 * kernels read B where it lies (run_tiles_direct), no packing pass.
 * benchmarks/bench_pointwise.py --baseline-lib (the 1x1 CONV's NCHW GEMM,
 * 1 thread, Zen 3 AVX2, medians of 21 alternated samples, load ~2 of
 * another benchmark), direct / packed first: 32->16 @112x112 1.19x,
 * 96->24 @56x56 1.07x, 144->24 @56x56 1.32x; with the bound at 128:
 * 96->32 @56 0.98x, 64->48 @112 0.79x, 128->96 @56 0.70x, 64->128 @56
 * 0.80x (more row panels re-read a strip that no longer stays in L1
 * between them). Prefetching each row's line 2, 4 or 8 strips ahead before
 * a strip's kernels: 0.95-1.04x (same harness), not kept. Overridable at
 * build time to repeat the sweep (0: never). */
#ifndef HWT_GEMM_DIRECT_MAX_M
#define HWT_GEMM_DIRECT_MAX_M 24
#endif
#endif

/* Loop order around the micro-kernel, i.e. which packed micro-panel stays
 * in L1 while the other operand streams past it (gemm.c, blocking.c):
 * A_IN_L1: ir (mr rows) outside jr (nr columns): one kc x mr A micro-panel
 *   is reused over the kc x nc B block, which lives in L2. The A block is
 *   repacked for every nc-wide column block.
 * B_IN_L1 (BLIS): jr outside ir: one kc x nr B micro-panel is reused over
 *   the mc x kc A block, which lives in L2; the B block lives in L3, so nc
 *   can span all of N and A is packed once per depth block. */
typedef enum { HWT_GEMM_A_IN_L1 = 0, HWT_GEMM_B_IN_L1 = 1 } hwt_gemm_order;

typedef struct {
  int mr, nr;
  hwt_gemm_ukr_fn *ukr;
  hwt_gemm_pack_a_fn *pack_a;
  hwt_gemm_pack_b_fn *pack_b;
  hwt_gemv_fn *gemv;
  hwt_gemm_ukr_pack_fn *ukr_pack; /* NULL: B is packed ahead by pack_b */
  hwt_gemm_order order;
  /* Cost of packing one float, in flops of micro-kernel time: what the 2-D
     partition (partition.c) charges for the panels each thread packs. */
  double pack_cost_flops;
} hwt_gemm_variant;

/* NULL if the ISA has no variant in this build. */
const hwt_gemm_variant *hwt_gemm_variant_get(hwt_isa isa);

/* Micro-kernels, by ISA and tile (ukernel_<isa>_<tile>.c). */
hwt_gemm_ukr_fn hwt_gemm_ukr_generic_4x8;
/* What pack_body.c and gemv_body.c export per ISA variant (HWT_VARIANT). */
hwt_gemm_pack_a_fn hwt_gemm_pack_a_generic;
hwt_gemm_pack_b_fn hwt_gemm_pack_b_generic;
hwt_gemv_fn hwt_gemv_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_gemm_ukr_fn hwt_gemm_ukr_avx2_6x16, hwt_gemm_ukr_avx512_12x32;
hwt_gemm_ukr_pack_fn hwt_gemm_ukr_pack_avx2_6x16, hwt_gemm_ukr_pack_avx512_12x32;
hwt_gemm_pack_a_fn hwt_gemm_pack_a_avx2, hwt_gemm_pack_a_avx512;
hwt_gemm_pack_b_fn hwt_gemm_pack_b_avx2, hwt_gemm_pack_b_avx512;
hwt_gemv_fn hwt_gemv_avx2, hwt_gemv_avx512;
#endif

/* Blocking (blocking.c): kc, mc, nc for a variant and its loop order from
 * the cache sizes (fields <= 0: the documented fallback). */
void hwt_gemm_blocking(const hwt_gemm_variant *v, const hwt_gemm_desc *d,
                       const hwt_cache_sizes *caches, int *mc, int *kc, int *nc);

/* Partition (partition.c): tm row groups of about nth/tm threads each (tn:
 * threads in the largest group), each group splitting its columns, over the
 * mr x nr output tiles; and the share of one thread. */
typedef struct {
  int i0, i1;  /* rows [i0, i1) */
  int j0, j1;  /* columns [j0, j1) */
} hwt_gemm_share;
void hwt_gemm_grid(const hwt_gemm_variant *v, int M, int N, int K, int nth, int *tm, int *tn);
/* Empty share (i0 == i1 or j0 == j1) when the grid leaves tid idle. */
hwt_gemm_share hwt_gemm_share_of(const hwt_gemm_variant *v, int M, int N, int K, int tid,
                                 int nth);
/* 1-D split of n units among parts: [*lo, *hi) of part `idx`, balanced. */
void hwt_split(int n, int parts, int idx, int *lo, int *hi);

/* Constant A (a 1x1 CONV's weights, kernels/conv/conv.c): hwt_gemm_pack_a
 * packs all of op(A) once, depth block by depth block (kc), each block as
 * ceil(M/mr) micro-panels (hwt_gemm_packed_a_floats floats, 64-byte
 * aligned); hwt_gemm_run_part_packed_a then never packs A. kc depends on K
 * and the caches only (blocking.c), not on nth, so A packed with a plan for
 * one thread count serves the plans of every other one (test_gemm.c checks
 * it). Always the packed path, also for M <= HWT_GEMV_MAX_M; its workspace
 * is the B block alone, hwt_gemm_packed_a_ws_floats floats (not
 * p->ws_floats: a GEMV plan's has no room for a B block). */
size_t hwt_gemm_packed_a_floats(const hwt_gemm_plan *p);
/* The largest ws_floats of d's plans for 1..nth threads: what a caller that
 * runs the plan of whatever thread count it is given at run time (a corun
 * scheduler gives an op fewer threads when few are idle) sizes each
 * thread's workspace for; 0 when no count plans. */
size_t hwt_gemm_ws_floats_upto(const hwt_gemm_desc *d, hwt_isa isa, int nth);
size_t hwt_gemm_packed_a_ws_floats(const hwt_gemm_plan *p);
int hwt_gemm_pack_a(const hwt_gemm_plan *p, const float *A, float *packed);
void hwt_gemm_run_part_packed_a(const hwt_gemm_plan *p, const float *packed_a, const float *B,
                                float *C, const float *bias, float *ws, int tid, int nth);

#endif
