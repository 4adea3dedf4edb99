/* Portable int8 micro-kernel over int16 pairs, 4 x 8 tile: the j loop is a
 * pmaddwd on baseline x86-64 (SSE2). Exact: each pair sums to at most
 * 2 * 255 * 128 < 2^31, and the int32 accumulator is what every variant
 * computes. */
#include "qgemm_internal.h"

#define MR 4
#define NR 8

void hwt_qgemm_ukr_generic_4x8(int kq, const void *a, const void *b, int32_t *acc) {
  const int16_t *ap = a, *bp = b;
  int32_t c[MR][NR] = {{0}};
  for (int q = 0; q < kq; q++) {
    for (int i = 0; i < MR; i++) {
      const int32_t a0 = ap[2 * i], a1 = ap[2 * i + 1];
      for (int j = 0; j < NR; j++) c[i][j] += a0 * bp[2 * j] + a1 * bp[2 * j + 1];
    }
    ap += 2 * MR;
    bp += 2 * NR;
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i * NR + j] = c[i][j];
}
