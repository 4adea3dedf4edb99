/* Portable micro-kernel, 4 x 8 tile, written so that GCC/Clang vectorise the
 * j loops (8 SSE2 accumulators on baseline x86-64, 4 NEON ones on AArch64). */
#include "gemm_internal.h"

#define MR 4
#define NR 8

void hwt_gemm_ukr_generic_4x8(int kc, const float *a, const float *b, size_t ldb, float *c,
                              size_t ldc, int m, int n, float beta, const float *bias) {
  float acc[MR][NR] = {{0}};
  for (int k = 0; k < kc; k++) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];
    a += MR;
    b += ldb;
  }
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * ldc;
    for (int j = 0; j < n; j++) {
      float v = acc[i][j] + (bias ? bias[j] : 0.0f);
      ci[j] = beta != 0.0f ? v + beta * ci[j] : v;
    }
  }
}
