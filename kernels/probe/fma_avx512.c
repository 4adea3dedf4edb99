/* Peak-FMA body for AVX-512: 12 independent zmm chains. An FMA has 4 cycles
 * of latency and two ports issue one each per cycle, so at least 8 chains
 * are needed in flight; 12 leave slack for the loop's own uops and still fit
 * the 32 registers with the two constants. */
#include <immintrin.h>
#include "probe_impl.h"

#define CHAINS 12

double hwt_fma_avx512(long iters) {
  /* acc = acc * m + k converges to k / (1 - m) ~ 1e3: values stay normal,
   * never overflow and never reach denormals, which would slow the FMAs. */
  const __m512 m = _mm512_set1_ps(1.0f - 0x1p-20f), k = _mm512_set1_ps(1e-3f);
  __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(1.0f), a2 = _mm512_set1_ps(2.0f),
         a3 = _mm512_set1_ps(3.0f), a4 = _mm512_set1_ps(4.0f), a5 = _mm512_set1_ps(5.0f),
         a6 = _mm512_set1_ps(6.0f), a7 = _mm512_set1_ps(7.0f), a8 = _mm512_set1_ps(8.0f),
         a9 = _mm512_set1_ps(9.0f), a10 = _mm512_set1_ps(10.0f), a11 = _mm512_set1_ps(11.0f);
  for (long i = 0; i < iters; i++) {
    a0 = _mm512_fmadd_ps(a0, m, k);
    a1 = _mm512_fmadd_ps(a1, m, k);
    a2 = _mm512_fmadd_ps(a2, m, k);
    a3 = _mm512_fmadd_ps(a3, m, k);
    a4 = _mm512_fmadd_ps(a4, m, k);
    a5 = _mm512_fmadd_ps(a5, m, k);
    a6 = _mm512_fmadd_ps(a6, m, k);
    a7 = _mm512_fmadd_ps(a7, m, k);
    a8 = _mm512_fmadd_ps(a8, m, k);
    a9 = _mm512_fmadd_ps(a9, m, k);
    a10 = _mm512_fmadd_ps(a10, m, k);
    a11 = _mm512_fmadd_ps(a11, m, k);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  hwt_probe_sink = _mm512_reduce_add_ps(s);
  return (double)iters * CHAINS * 16 * 2;
}
