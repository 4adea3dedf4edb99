/* AVX512-VNNI int8 micro-kernel, 8 x 32 tile: vpdpbusd multiplies 4 u8 of A
 * by 4 s8 of B and adds the four products into an int32 lane, without
 * saturation (the "s" form saturates; this one is exact). Compiled with the
 * AVX-512 flags (file name) plus avx512vnni for this function only: it is
 * only called after hwt_qgemm_plan_make saw avx512_vnni in CPUID. */
#include <immintrin.h>
#include "qgemm_internal.h"

#define MR 8

__attribute__((target("avx512vnni")))
void hwt_qgemm_ukr_avx512vnni_8x32(int kq, const void *a, const void *b, int32_t *acc) {
  const int32_t *ap = a; /* 4 u8 per row and k quad */
  const __m512i *bp = b;
  __m512i c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = _mm512_setzero_si512();
  for (int q = 0; q < kq; q++) {
    const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 1);
    for (int i = 0; i < MR; i++) {
      const __m512i av = _mm512_set1_epi32(ap[i]);
      c[i][0] = _mm512_dpbusd_epi32(c[i][0], av, b0);
      c[i][1] = _mm512_dpbusd_epi32(c[i][1], av, b1);
    }
    ap += MR;
    bp += 2;
  }
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_si512(acc + i * 32, c[i][0]);
    _mm512_storeu_si512(acc + i * 32 + 16, c[i][1]);
  }
}
