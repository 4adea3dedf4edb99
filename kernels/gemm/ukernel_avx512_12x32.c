/* AVX-512 micro-kernel, 12 x 32 tile: 24 zmm accumulators, 2 zmm of B per k
 * and each A value broadcast from memory. Bottom-edge panels (m <= 8 or
 * m <= 4 rows) run an 8- or 4-row body over the same 12-wide packed panel,
 * so e.g. M = 64 (5 x 12 + 4) spends 64 rows of FMAs, not 72. The _pack
 * entry reads B unpacked and stores each row into the packed panel as it
 * goes (2 stores per 12-cycle k step: the store port has room). */
#include <immintrin.h>
#include <stdint.h>
#include "gemm_internal.h"

#define MR 12 /* row stride of the packed A panel */
/* Prefetch the B panel this many k rows (2 KiB) ahead into L1: the panel
 * streams from L2, 128 bytes per 12-cycle k step, and the L1 prefetchers do
 * not run that far ahead. Full run, 1 thread, median of 201: [256,1024]x
 * [1024,1024] 103.7 GFLOPS without, 108.6 at 8 or 16 rows, 107.6-111 at 24
 * (noisy); [64,512]x[512,512] 95 -> 98-99. */
#define B_PF 16

static inline void store_row(float *c, __m512 lo, __m512 hi, __mmask16 k0, __mmask16 k1,
                             float beta, __m512 blo, __m512 bhi) {
  lo = _mm512_add_ps(lo, blo);
  hi = _mm512_add_ps(hi, bhi);
  if (beta != 0.0f) {
    __m512 bv = _mm512_set1_ps(beta);
    lo = _mm512_fmadd_ps(bv, _mm512_maskz_loadu_ps(k0, c), lo);
    hi = _mm512_fmadd_ps(bv, _mm512_maskz_loadu_ps(k1, c + 16), hi);
  }
  _mm512_mask_storeu_ps(c, k0, lo);
  _mm512_mask_storeu_ps(c + 16, k1, hi);
}

/* COPY: b is op(B) itself (row stride ldb, n valid columns) and every B row
 * read is also stored, zero-padded, into the packed panel bcopy (kc x 32). */
static inline __attribute__((always_inline)) void body(int kc, const float *a, const float *b,
                                                       size_t ldb, float *bcopy, float *c,
                                                       size_t ldc, int m, int n, float beta,
                                                       const float *bias, const int ROWS,
                                                       const int COPY) {
  __m512 acc[MR][2];
  __mmask16 k0 = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
  __mmask16 k1 = n >= 32 ? (__mmask16)0xFFFF : n > 16 ? (__mmask16)((1u << (n - 16)) - 1u) : 0;
#pragma GCC unroll 12
  for (int i = 0; i < ROWS; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  /* Pull the C tile towards L1 while the k loop runs: its rows are ldc apart,
     so no hardware prefetcher would fetch them before the stores need them. */
  for (int i = 0; i < m; i++) {
    _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + (size_t)i * ldc + 16), _MM_HINT_T0);
  }
  /* Unrolled x4: a 12-row iteration is 41 uops, near the 4/cycle front end
     for its 12 FMA cycles; unrolling drops the loop overhead (~+3% median,
     the kernel alone over an L2-resident 132x256 A / 256x512 B block). */
#pragma GCC unroll 4
  for (int k = 0; k < kc; k++) {
    /* Integer arithmetic: near the panel's end the address lies past it. */
    uintptr_t pf = (uintptr_t)b + B_PF * ldb * sizeof(float);
    _mm_prefetch((const char *)pf, _MM_HINT_T0);
    _mm_prefetch((const char *)(pf + 64), _MM_HINT_T0);
    __m512 b0, b1;
    if (COPY) {
      b0 = _mm512_maskz_loadu_ps(k0, b);
      b1 = _mm512_maskz_loadu_ps(k1, b + 16);
      _mm512_store_ps(bcopy, b0);
      _mm512_store_ps(bcopy + 16, b1);
      bcopy += 32;
    } else {
      b0 = _mm512_loadu_ps(b);
      b1 = _mm512_loadu_ps(b + 16);
    }
#pragma GCC unroll 12
    for (int i = 0; i < ROWS; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += ldb;
  }
  __m512 blo = _mm512_setzero_ps(), bhi = _mm512_setzero_ps();
  if (bias) {
    blo = _mm512_maskz_loadu_ps(k0, bias);
    bhi = _mm512_maskz_loadu_ps(k1, bias + 16);
  }
#pragma GCC unroll 12
  for (int i = 0; i < ROWS; i++)
    if (i < m) store_row(c + (size_t)i * ldc, acc[i][0], acc[i][1], k0, k1, beta, blo, bhi);
}

/* The body for the panel's rows: 12, or the 8- or 4-row edge. */
static inline __attribute__((always_inline)) void rows_body(int kc, const float *a,
                                                            const float *b, size_t ldb,
                                                            float *bcopy, float *c, size_t ldc,
                                                            int m, int n, float beta,
                                                            const float *bias, const int COPY) {
  if (m > 8)
    body(kc, a, b, ldb, bcopy, c, ldc, m, n, beta, bias, 12, COPY);
  else if (m > 4)
    body(kc, a, b, ldb, bcopy, c, ldc, m, n, beta, bias, 8, COPY);
  else
    body(kc, a, b, ldb, bcopy, c, ldc, m, n, beta, bias, 4, COPY);
}

void hwt_gemm_ukr_avx512_12x32(int kc, const float *a, const float *b, size_t ldb, float *c,
                               size_t ldc, int m, int n, float beta, const float *bias) {
  rows_body(kc, a, b, ldb, NULL, c, ldc, m, n, beta, bias, 0);
}

void hwt_gemm_ukr_pack_avx512_12x32(int kc, const float *a, const float *b, size_t ldb,
                                    float *bcopy, float *c, size_t ldc, int m, int n,
                                    float beta, const float *bias) {
  rows_body(kc, a, b, ldb, bcopy, c, ldc, m, n, beta, bias, 1);
}
