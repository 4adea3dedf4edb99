/* AVX2 int8 micro-kernel, 6 x 16 tile over int16 pairs: vpmaddwd multiplies
 * two int16 pairs and adds them into int32 exactly (u8 widened to int16 and
 * s8 widened to int16 at packing), then vpaddd accumulates. The narrower
 * vpmaddubsw path (u8 x s8 into saturating int16, MLAS's AVX2 QGEMM) would
 * halve the packed bytes but can saturate (255 * 127 * 2 > 32767), so the
 * results would depend on the variant; this kernel gives the reference's
 * int32 bit for bit.
 *
 * The 12 accumulators are named variables, not an array: with c[6][2] GCC
 * 12 kept 7 of them on the stack (a vpaddd from memory and a store back
 * per k pair, objdump); named, 12 accumulators + 2 B vectors + the
 * broadcast + one product fill the 16 ymm registers and nothing spills. */
#include <immintrin.h>
#include "qgemm_internal.h"

#define ROW(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = _mm256_setzero_si256();
#define STEP(i)                                                        \
  do {                                                                 \
    const __m256i av = _mm256_set1_epi32(ap[i]);                       \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(av, b0));    \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(av, b1));    \
  } while (0)
#define STORE(i)                                                       \
  do {                                                                 \
    _mm256_storeu_si256((__m256i *)(acc + (i) * 16), c##i##0);         \
    _mm256_storeu_si256((__m256i *)(acc + (i) * 16 + 8), c##i##1);     \
  } while (0)

void hwt_qgemm_ukr_avx2_6x16(int kq, const void *a, const void *b, int32_t *acc) {
  const int32_t *ap = a; /* one int16 pair per row and k pair, 6 rows per pair */
  const __m256i *bp = b;
  ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
  for (int q = 0; q < kq; q++) {
    const __m256i b0 = _mm256_load_si256(bp), b1 = _mm256_load_si256(bp + 1);
    STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
    ap += 6;
    bp += 2;
  }
  STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5);
}
