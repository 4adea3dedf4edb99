/* AVX2 direct-conv micro-kernel, 6 x 16 over int16 pairs (vpmaddwd, exact,
 * as kernels/qgemm/ukernel_avx2_6x16.c): each row's two u8 of a k pair are
 * read from its pixel and widened into one int16 pair before the
 * broadcast. Named accumulators: the array form's register copies are
 * described in kernels/qgemm/ukernel_avx512vnni_8x32.c. */
#include <immintrin.h>
#include <string.h>
#include "qconv_internal.h"

#define MR 6

/* u8 a[0], a[1] as 8 int16 pairs (a[0], a[1]) */
static inline __m256i pair(const uint8_t *a) {
  int16_t v;
  memcpy(&v, a, 2);
  return _mm256_cvtepu8_epi16(_mm_set1_epi16(v));
}

#define AVX2_ROW(i)                                                          \
  do {                                                                       \
    const __m256i av = pair(r##i + 2 * q);                                   \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(av, b0));          \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(av, b1));          \
  } while (0)
#define AVX2_STORE(i)                                                        \
  do {                                                                       \
    _mm256_storeu_si256((__m256i *)(acc + (i) * 16), c##i##0);               \
    _mm256_storeu_si256((__m256i *)(acc + (i) * 16 + 8), c##i##1);           \
  } while (0)

void hwt_qconv_ukr_avx2_6x16(int taps, int kq, const uint8_t *const *rows, const void *b,
                             int32_t *acc) {
  const __m256i *bp = b;
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int t = 0; t < taps; t++, rows += MR) {
    const uint8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4],
                  *r5 = rows[5];
    for (int q = 0; q < kq; q++) {
      const __m256i b0 = _mm256_load_si256(bp), b1 = _mm256_load_si256(bp + 1);
      AVX2_ROW(0);
      AVX2_ROW(1);
      AVX2_ROW(2);
      AVX2_ROW(3);
      AVX2_ROW(4);
      AVX2_ROW(5);
      bp += 2;
    }
  }
  AVX2_STORE(0);
  AVX2_STORE(1);
  AVX2_STORE(2);
  AVX2_STORE(3);
  AVX2_STORE(4);
  AVX2_STORE(5);
}
