/* AVX2+FMA micro-kernel, 6 x 16 tile: 12 ymm accumulators, 2 ymm of B per k,
 * one broadcast register (the classic Haswell sgemm shape). */
#include <immintrin.h>
#include <string.h>
#include "gemm_internal.h"

#define MR 6
#define NR 16

void hwt_gemm_ukr_avx2_6x16(int kc, const float *a, const float *b, size_t ldb, float *c,
                            size_t ldc, int m, int n, float beta, const float *bias) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int i = 0; i < m; i++) _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
  for (int k = 0; k < kc; k++) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += ldb;
  }
  if (m == MR && n == NR) {
    __m256 blo = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    __m256 bhi = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
    __m256 bv = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
      float *ci = c + (size_t)i * ldc;
      __m256 lo = _mm256_add_ps(acc[i][0], blo), hi = _mm256_add_ps(acc[i][1], bhi);
      if (beta != 0.0f) {
        lo = _mm256_fmadd_ps(bv, _mm256_loadu_ps(ci), lo);
        hi = _mm256_fmadd_ps(bv, _mm256_loadu_ps(ci + 8), hi);
      }
      _mm256_storeu_ps(ci, lo);
      _mm256_storeu_ps(ci + 8, hi);
    }
    return;
  }
  /* Edge tile (rare: the right or bottom border): spill and merge in C. */
  float t[MR][NR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    _mm256_storeu_ps(t[i], acc[i][0]);
    _mm256_storeu_ps(t[i] + 8, acc[i][1]);
  }
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * ldc;
    for (int j = 0; j < n; j++) {
      float v = t[i][j] + (bias ? bias[j] : 0.0f);
      ci[j] = beta != 0.0f ? v + beta * ci[j] : v;
    }
  }
}
