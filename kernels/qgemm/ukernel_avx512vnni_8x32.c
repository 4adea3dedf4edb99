/* AVX512-VNNI int8 micro-kernel, 8 x 32 tile: vpdpbusd multiplies 4 u8 of A
 * by 4 s8 of B and adds the four products into an int32 lane, without
 * saturation (the "s" form saturates; this one is exact). Compiled with the
 * AVX-512 flags (file name) plus avx512vnni for this function only: it is
 * only called after hwt_qgemm_plan_make saw avx512_vnni in CPUID.
 *
 * The 16 accumulators are named variables, not an array: with c[8][2] GCC
 * 12 -O2 kept a second copy of the tile and moved all 16 registers (plus
 * two spills to the stack) every k quad, 34 moves beside the 16 vpdpbusd
 * (objdump); named, the loop is the 8 broadcasts, 2 loads and 16 vpdpbusd
 * and nothing else. */
#include <immintrin.h>
#include "qgemm_internal.h"

#define ROW(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = _mm512_setzero_si512();
#define STEP(i)                                         \
  do {                                                  \
    const __m512i av = _mm512_set1_epi32(ap[i]);        \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);     \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);     \
  } while (0)
#define STORE(i)                                        \
  do {                                                  \
    _mm512_storeu_si512(acc + (i) * 32, c##i##0);       \
    _mm512_storeu_si512(acc + (i) * 32 + 16, c##i##1);  \
  } while (0)

__attribute__((target("avx512vnni")))
void hwt_qgemm_ukr_avx512vnni_8x32(int kq, const void *a, const void *b, int32_t *acc) {
  const int32_t *ap = a; /* 4 u8 per row and k quad, 8 rows per quad */
  const __m512i *bp = b;
  ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
  for (int q = 0; q < kq; q++) {
    const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 1);
    STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7);
    ap += 8;
    bp += 2;
  }
  STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5); STORE(6); STORE(7);
}
