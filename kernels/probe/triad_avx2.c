/* STREAM triad body for AVX2: a = fma(s, c, b). Scalar head until `a`
 * reaches a 32-byte boundary (streaming stores need it), scalar tail; both
 * use fmaf's single rounding so every element matches the vector body. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include "probe_impl.h"

void hwt_triad_avx2(float *a, const float *b, const float *c, float s, size_t n, int nt) {
  const __m256 vs = _mm256_set1_ps(s);
  uintptr_t addr = (uintptr_t)a;
  if (addr % sizeof(float)) nt = 0;
  size_t i = 0, head = addr % sizeof(float) ? 0 : ((32 - addr % 32) % 32) / sizeof(float);
  for (; i < head && i < n; i++) a[i] = fmaf(s, c[i], b[i]);
  if (nt) {
    for (; i + 16 <= n; i += 16) {
      _mm256_stream_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
      _mm256_stream_ps(a + i + 8, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i + 8),
                                                  _mm256_loadu_ps(b + i + 8)));
    }
    _mm_sfence();
  } else {
    for (; i + 16 <= n; i += 16) {
      _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
      _mm256_storeu_ps(a + i + 8, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i + 8),
                                                  _mm256_loadu_ps(b + i + 8)));
    }
  }
  for (; i < n; i++) a[i] = fmaf(s, c[i], b[i]);
}
