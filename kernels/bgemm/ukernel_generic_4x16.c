/* Portable bf16 micro-kernel, 4 x 16 tile: the contract's pair step
 * (bgemm_internal.h) per output element, in k order. Also the AVX2 row:
 * AVX2 has no bf16 product. */
#include "bgemm_internal.h"

#define MR 4
#define NR 16

void hwt_bgemm_ukr_generic_4x16(int kq, const uint32_t *a, const uint32_t *b, float *acc) {
  float c[MR][NR] = {{0}};
  for (int q = 0; q < kq; q++) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) c[i][j] = hwt_bf16_pair_step(c[i][j], a[i], b[j]);
    a += MR;
    b += NR;
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i * NR + j] = c[i][j];
}
