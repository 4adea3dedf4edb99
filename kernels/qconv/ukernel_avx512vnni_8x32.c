/* AVX512-VNNI direct-conv micro-kernel, 8 x 32: the int8 GEMM's tile
 * (kernels/qgemm/ukernel_avx512vnni_8x32.c, named accumulators for the
 * reason given there) with each row's dword of 4 u8 channels broadcast
 * from its pixel's address, tap by tap. Only called after the plan saw
 * avx512_vnni in CPUID. */
#include <immintrin.h>
#include <string.h>
#include "qconv_internal.h"

#define MR 8

static inline int32_t quad(const uint8_t *a) {
  int32_t v;
  memcpy(&v, a, 4);
  return v;
}

#define VNNI_ROW(i)                                     \
  do {                                                  \
    const __m512i av = _mm512_set1_epi32(quad(r##i + 4 * q)); \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);     \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);     \
  } while (0)
#define VNNI_STORE(i)                                   \
  do {                                                  \
    _mm512_storeu_si512(acc + (i) * 32, c##i##0);       \
    _mm512_storeu_si512(acc + (i) * 32 + 16, c##i##1);  \
  } while (0)

__attribute__((target("avx512vnni")))
void hwt_qconv_ukr_avx512vnni_8x32(int taps, int kq, const uint8_t *const *rows, const void *b,
                                   int32_t *acc) {
  const __m512i *bp = b;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
          c61 = c00, c70 = c00, c71 = c00;
  for (int t = 0; t < taps; t++, rows += MR) {
    const uint8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4],
                  *r5 = rows[5], *r6 = rows[6], *r7 = rows[7];
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
      bp += 2;
    }
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

/* The same for tiles of at most 4 output pixels (a pixel tail: rows 4..7
 * of acc are left as they were; the epilogue reads mb rows), over the 8x32
 * tile's address table (8 entries per tap). The int8 ResNet-50's 7x7
 * layers (49 pixels) end in a tile of 1 pixel and its 14x14 ones (196) in
 * one of 4: the full tile spent 8 rows of vpdpbusd on them, 12.5% of the
 * 7x7 layers' micro-kernel work. */
__attribute__((target("avx512vnni")))
void hwt_qconv_ukr_avx512vnni_4x32(int taps, int kq, const uint8_t *const *rows, const void *b,
                                   int32_t *acc) {
  const __m512i *bp = b;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00;
  for (int t = 0; t < taps; t++, rows += MR) {
    const uint8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    for (int q = 0; q < kq; q++) {
      const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 1);
      VNNI_ROW(0);
      VNNI_ROW(1);
      VNNI_ROW(2);
      VNNI_ROW(3);
      bp += 2;
    }
  }
  VNNI_STORE(0);
  VNNI_STORE(1);
  VNNI_STORE(2);
  VNNI_STORE(3);
}
