/* Portable direct-conv micro-kernel, 4 x 8 over int16 pairs: the int8
 * GEMM's generic tile (kernels/qgemm/ukernel_generic_4x8.c) with its A
 * pairs read from the pixels' addresses instead of a packed panel. */
#include "qconv_internal.h"

#define MR 4
#define NR 8

void hwt_qconv_ukr_generic_4x8(int taps, int kq, const uint8_t *const *rows, const void *b,
                               int32_t *acc) {
  const int16_t *bp = b;
  int32_t c[MR][NR] = {{0}};
  for (int t = 0; t < taps; t++, rows += MR)
    for (int q = 0; q < kq; q++) {
      for (int i = 0; i < MR; i++) {
        const int32_t a0 = rows[i][2 * q], a1 = rows[i][2 * q + 1];
        for (int j = 0; j < NR; j++) c[i][j] += a0 * bp[2 * j] + a1 * bp[2 * j + 1];
      }
      bp += 2 * NR;
    }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i * NR + j] = c[i][j];
}
