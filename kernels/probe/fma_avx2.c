/* Peak-FMA body for AVX2: 10 independent ymm chains. An FMA has 4 cycles of
 * latency and two ports issue one each per cycle, so at least 8 chains are
 * needed in flight; 10 leave slack and fit the 16 registers with the two
 * constants. */
#include <immintrin.h>
#include "probe_impl.h"

#define CHAINS 10

double hwt_fma_avx2(long iters) {
  /* acc = acc * m + k converges to k / (1 - m) ~ 1e3: values stay normal. */
  const __m256 m = _mm256_set1_ps(1.0f - 0x1p-20f), k = _mm256_set1_ps(1e-3f);
  __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(1.0f), a2 = _mm256_set1_ps(2.0f),
         a3 = _mm256_set1_ps(3.0f), a4 = _mm256_set1_ps(4.0f), a5 = _mm256_set1_ps(5.0f),
         a6 = _mm256_set1_ps(6.0f), a7 = _mm256_set1_ps(7.0f), a8 = _mm256_set1_ps(8.0f),
         a9 = _mm256_set1_ps(9.0f);
  for (long i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, m, k);
    a1 = _mm256_fmadd_ps(a1, m, k);
    a2 = _mm256_fmadd_ps(a2, m, k);
    a3 = _mm256_fmadd_ps(a3, m, k);
    a4 = _mm256_fmadd_ps(a4, m, k);
    a5 = _mm256_fmadd_ps(a5, m, k);
    a6 = _mm256_fmadd_ps(a6, m, k);
    a7 = _mm256_fmadd_ps(a7, m, k);
    a8 = _mm256_fmadd_ps(a8, m, k);
    a9 = _mm256_fmadd_ps(a9, m, k);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  hwt_probe_sink = _mm_cvtss_f32(h);
  return (double)iters * CHAINS * 8 * 2;
}
