/* STREAM triad body for AVX-512: a = fma(s, c, b). Masked head until `a`
 * reaches a 64-byte line (streaming stores need it), masked tail. */
#include <immintrin.h>
#include <stdint.h>
#include "probe_impl.h"

void hwt_triad_avx512(float *a, const float *b, const float *c, float s, size_t n, int nt) {
  const __m512 vs = _mm512_set1_ps(s);
  uintptr_t addr = (uintptr_t)a;
  if (addr % sizeof(float)) nt = 0;
  size_t i = addr % sizeof(float) ? 0 : ((64 - addr % 64) % 64) / sizeof(float);
  if (i > n) i = n;
  if (i) {
    __mmask16 m = (__mmask16)((1u << i) - 1);
    _mm512_mask_storeu_ps(a, m, _mm512_fmadd_ps(vs, _mm512_maskz_loadu_ps(m, c),
                                                 _mm512_maskz_loadu_ps(m, b)));
  }
  if (nt) {
    for (; i + 32 <= n; i += 32) {
      _mm512_stream_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
      _mm512_stream_ps(a + i + 16, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i + 16),
                                                   _mm512_loadu_ps(b + i + 16)));
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      _mm512_storeu_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
      _mm512_storeu_ps(a + i + 16, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i + 16),
                                                   _mm512_loadu_ps(b + i + 16)));
    }
  }
  for (; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(a + i, m, _mm512_fmadd_ps(vs, _mm512_maskz_loadu_ps(m, c + i),
                                                    _mm512_maskz_loadu_ps(m, b + i)));
  }
  if (nt) _mm_sfence();
}
