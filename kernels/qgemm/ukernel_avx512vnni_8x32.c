/* AVX512-VNNI int8 micro-kernel, 8 x 32 tile: vpdpbusd multiplies 4 u8 of A
 * by 4 s8 of B and adds the four products into an int32 lane, without
 * saturation (the "s" form saturates; this one is exact). Compiled with the
 * AVX-512 flags (file name) plus avx512vnni for this function only: it is
 * only called after hwt_qgemm_plan_make saw avx512_vnni in CPUID.
 *
 * The 16 accumulators are named variables, not an array: GCC 12 (-O3) kept
 * c[8][2] as registers but copied every one into another register on each
 * k step (32 vmovdqa per 16 vpdpbusd, two spilled to the stack: objdump of
 * the array form), as vpdpbusd overwrites its accumulator operand; with
 * scalar variables the loop is 16 vpdpbusd, 8 broadcasts and 2 loads.
 * Zen 4 eliminates most register moves at rename: 1.03x in an interleaved
 * A/B of the two forms (K 576, best of 40 x 2000 calls, under load), the
 * new form at ~1 vpdpbusd per cycle, the zmm peak. */
#include <immintrin.h>
#include "qgemm_internal.h"

#define MR 8

#define VNNI_ROW(i)                                     \
  do {                                                  \
    const __m512i av = _mm512_set1_epi32(ap[i]);        \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);     \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);     \
  } while (0)
#define VNNI_STORE(i)                                   \
  do {                                                  \
    _mm512_storeu_si512(acc + (i) * 32, c##i##0);       \
    _mm512_storeu_si512(acc + (i) * 32 + 16, c##i##1);  \
  } while (0)

__attribute__((target("avx512vnni")))
void hwt_qgemm_ukr_avx512vnni_8x32(int kq, const void *a, const void *b, int32_t *acc) {
  const int32_t *ap = a; /* 4 u8 per row and k quad */
  const __m512i *bp = b;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
          c61 = c00, c70 = c00, c71 = c00;
  for (int q = 0; q < kq; q++) {
    const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 1);
    VNNI_ROW(0);
    VNNI_ROW(1);
    VNNI_ROW(2);
    VNNI_ROW(3);
    VNNI_ROW(4);
    VNNI_ROW(5);
    VNNI_ROW(6);
    VNNI_ROW(7);
    ap += MR;
    bp += 2;
  }
  VNNI_STORE(0);
  VNNI_STORE(1);
  VNNI_STORE(2);
  VNNI_STORE(3);
  VNNI_STORE(4);
  VNNI_STORE(5);
  VNNI_STORE(6);
  VNNI_STORE(7);
}
