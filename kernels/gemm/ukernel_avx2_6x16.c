/* AVX2+FMA micro-kernel, 6 x 16 tile: 12 ymm accumulators, 2 ymm of B per k
 * and one broadcast register (the Haswell/Zen sgemm shape of BLIS and
 * OpenBLAS: 12 independent FMA chains cover 2 FMA pipes x 4-cycle latency).
 * Bottom-edge panels run a body with exactly m rows over the same 6-wide
 * packed A panel (M = 64 = 10 x 6 + 4 spends 64 rows of FMAs, not 66); right
 * edges (n < 16) use masked loads and stores, so no tile is spilled and
 * merged in scalar code. The _pack entry reads B unpacked and stores each
 * row into the packed panel as it goes. */
#include <immintrin.h>
#include <stdint.h>
#include "gemm_internal.h"

#define MR 6 /* row stride of the packed A panel */
#define NR 16
/* Prefetch distances in k rows (overridable at build time to repeat the
 * sweeps). In the B-panel order (gemm_internal.h) each kernel streams its A
 * micro-panel from L2, 24 bytes per k: A_PF rows = 768 bytes ahead, into the
 * next micro-panel near the end. B_PF: the packed B panel (64 bytes per k),
 * from L3 or memory on its first kernel; 32 rows beat 8 on [64,512]x
 * [512,2048] with B prepacked (1 thread, Zen 3, min of 101-151 thread-time
 * samples, three runs: +1 to +4%) and tied elsewhere. BC_PF: the unpacked B
 * rows the _pack entry reads; 0 to 64 rows all ran the same (3.4-3.8 ns per
 * k for kc = 256 against 1.9 ns for a packed panel): those rows, one line
 * a page apart, are bound by their misses, not by their latency. */
#ifndef A_PF
#define A_PF 32
#endif
#ifndef B_PF
#define B_PF 32
#endif
#ifndef BC_PF
#define BC_PF 32
#endif

/* Lane masks for n valid columns of an 8-float half: lanes < n all ones. */
static inline __m256i lane_mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

static inline __attribute__((always_inline)) void body(int kc, const float *a, const float *b,
                                                       size_t ldb, float *bcopy, float *c,
                                                       size_t ldc, int n, float beta,
                                                       const float *bias, const int ROWS,
                                                       const int NV, const int COPY) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < ROWS; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  /* Pull the C tile towards L1 while the k loop runs: its rows are ldc apart,
     so no hardware prefetcher would fetch them before the stores need them. */
#pragma GCC unroll 6
  for (int i = 0; i < ROWS; i++) _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
  for (int k = 0; k < kc; k++) {
    /* Integer arithmetic: near the panel's end the addresses lie past it. */
    _mm_prefetch((const char *)((uintptr_t)a + A_PF * MR * sizeof(float)), _MM_HINT_T0);
    __m256 b0, b1;
    if (COPY) { /* n == NR: the callers pack a partial panel first */
      uintptr_t pf = (uintptr_t)b + BC_PF * ldb * sizeof(float);
      _mm_prefetch((const char *)pf, _MM_HINT_T0);
      _mm_prefetch((const char *)(pf + (NR - 1) * sizeof(float)), _MM_HINT_T0);
      b0 = _mm256_loadu_ps(b);
      b1 = _mm256_loadu_ps(b + 8);
      _mm256_store_ps(bcopy, b0);
      _mm256_store_ps(bcopy + 8, b1);
      bcopy += NR;
    } else {
      _mm_prefetch((const char *)((uintptr_t)b + B_PF * ldb * sizeof(float)), _MM_HINT_T0);
      b0 = _mm256_loadu_ps(b);
      b1 = NV == 2 ? _mm256_loadu_ps(b + 8) : _mm256_setzero_ps();
    }
#pragma GCC unroll 6
    for (int i = 0; i < ROWS; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      if (NV == 2) acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += ldb;
  }
  /* Masks only now: live across the k loop they would push two
     accumulators out of the 16 ymm registers (GCC spilled them). */
  const int full = n >= NR;
  const __m256i m0 = lane_mask(n), m1 = lane_mask(n - 8);
  __m256 blo = _mm256_setzero_ps(), bhi = _mm256_setzero_ps();
  if (bias) {
    blo = full ? _mm256_loadu_ps(bias) : _mm256_maskload_ps(bias, m0);
    bhi = full ? _mm256_loadu_ps(bias + 8) : _mm256_maskload_ps(bias + 8, m1);
  }
  const __m256 bv = _mm256_set1_ps(beta);
#pragma GCC unroll 6
  for (int i = 0; i < ROWS; i++) {
    float *ci = c + (size_t)i * ldc;
    __m256 lo = _mm256_add_ps(acc[i][0], blo), hi = _mm256_add_ps(acc[i][1], bhi);
    if (full) {
      if (beta != 0.0f) {
        lo = _mm256_fmadd_ps(bv, _mm256_loadu_ps(ci), lo);
        hi = _mm256_fmadd_ps(bv, _mm256_loadu_ps(ci + 8), hi);
      }
      _mm256_storeu_ps(ci, lo);
      _mm256_storeu_ps(ci + 8, hi);
    } else {
      if (beta != 0.0f) {
        lo = _mm256_fmadd_ps(bv, _mm256_maskload_ps(ci, m0), lo);
        hi = _mm256_fmadd_ps(bv, _mm256_maskload_ps(ci + 8, m1), hi);
      }
      _mm256_maskstore_ps(ci, m0, lo);
      _mm256_maskstore_ps(ci + 8, m1, hi);
    }
  }
}

/* One body per row count (and vector count), so every accumulator loop is
 * fully unrolled. */
#define HWT_ROWS_SWITCH(NV, COPY)                                                     \
  switch (m) {                                                                        \
    case 6: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 6, NV, COPY); return;   \
    case 5: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 5, NV, COPY); return;   \
    case 4: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 4, NV, COPY); return;   \
    case 3: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 3, NV, COPY); return;   \
    case 2: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 2, NV, COPY); return;   \
    default: body(kc, a, b, ldb, bcopy, c, ldc, n, beta, bias, 1, NV, COPY); return;  \
  }

void hwt_gemm_ukr_avx2_6x16(int kc, const float *a, const float *b, size_t ldb, float *c,
                            size_t ldc, int m, int n, float beta, const float *bias) {
  float *bcopy = NULL;
  /* A right edge of at most 8 columns (a 7x7 CONV's 49 = 3 x 16 + 1
   * pixels) spends one vector of FMAs per row, not two. */
  if (n <= 8) HWT_ROWS_SWITCH(1, 0)
  HWT_ROWS_SWITCH(2, 0)
}

/* Right edge (n < 16), once per depth block: pack the panel with masked
 * loads first. Out of line, so that its masks share no registers with the
 * kernel bodies. */
static __attribute__((noinline)) void pack_edge(int kc, const float *b, size_t ldb, int n,
                                                float *bcopy) {
  const __m256i m0 = lane_mask(n), m1 = lane_mask(n - 8);
  for (int k = 0; k < kc; k++) {
    _mm256_store_ps(bcopy + (size_t)k * NR, _mm256_maskload_ps(b + (size_t)k * ldb, m0));
    _mm256_store_ps(bcopy + (size_t)k * NR + 8, _mm256_maskload_ps(b + (size_t)k * ldb + 8, m1));
  }
}

void hwt_gemm_ukr_pack_avx2_6x16(int kc, const float *a, const float *b, size_t ldb,
                                 float *bcopy, float *c, size_t ldc, int m, int n, float beta,
                                 const float *bias) {
  if (n < NR) {
    pack_edge(kc, b, ldb, n, bcopy);
    hwt_gemm_ukr_avx2_6x16(kc, a, bcopy, NR, c, ldc, m, n, beta, bias);
    return;
  }
  HWT_ROWS_SWITCH(2, 1)
}
#undef HWT_ROWS_SWITCH
