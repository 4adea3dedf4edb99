/* AVX512_BF16 micro-kernel, 8 x 32 tile: 16 zmm accumulators + 2 B vectors
 * + 1 broadcast A pair; one vdpbf16ps per accumulator and k pair (two bf16
 * products added into each fp32 lane). Compiled with the AVX-512 flags (file
 * name) plus avx512bf16 for this function only: it is only called after
 * hwt_bgemm_plan_make saw avx512_bf16 in CPUID. */
#include <immintrin.h>
#include "bgemm_internal.h"

#define MR 8

__attribute__((target("avx512bf16")))
void hwt_bgemm_ukr_avx512bf16_8x32(int kq, const uint32_t *a, const uint32_t *b, float *acc) {
  __m512 c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
  for (int q = 0; q < kq; q++) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
    for (int i = 0; i < MR; i++) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[i]);
      c[i][0] = _mm512_dpbf16_ps(c[i][0], av, b0);
      c[i][1] = _mm512_dpbf16_ps(c[i][1], av, b1);
    }
    a += MR;
    b += 32;
  }
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(acc + i * 32, c[i][0]);
    _mm512_storeu_ps(acc + i * 32 + 16, c[i][1]);
  }
}

/* Test hook: vcvtne2ps2bf16 on 16 floats (hi ignored, results of lo), so
 * tests/c/test_bgemm.c can compare hwt_bf16_from_f32 with the instruction. */
__attribute__((target("avx512bf16")))
void hwt_bgemm_cvt16_avx512bf16(const float *x, uint16_t *out) {
  const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_loadu_ps(x));
  _mm256_storeu_si256((__m256i *)out, _mm512_castsi512_si256((__m512i)r));
}

/* The bf16 CONV's pair packing for the 32-pixel B panel: vcvtne2ps2bf16
 * rounds 16 pixels of both rows at once (as hwt_bf16_from_f32 does, tested
 * bit for bit), one word permute interleaves them into 16 (lo, hi) dwords.
 * width: a multiple of 16 (the nr of this variant's tile). */
__attribute__((target("avx512bf16")))
void hwt_bgemm_pair_avx512bf16(const float *lo, const float *hi, int tiles, int width,
                               size_t stride, uint32_t *dst) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                       24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                       16, 0);
  for (int t = 0; t < tiles; t++, dst += stride)
    for (int j = 0; j < width; j += 16, lo += 16, hi += 16) {
      const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(hi), _mm512_loadu_ps(lo));
      _mm512_storeu_si512(dst + j, _mm512_permutexvar_epi16(idx, (__m512i)r));
    }
}
