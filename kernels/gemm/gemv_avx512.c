/* GEMV compiled for the avx512 variant (see gemv_body.h: one source, the
 * vector width comes from this file's compile flags). */
#include "gemv_body.h"

void hwt_gemv_avx512(int m, int n, int k, const float *a, size_t lda, const float *b,
                     size_t ldb, int trans_b, float *c, size_t ldc, float beta,
                     const float *bias) {
  gemv_body(m, n, k, a, lda, b, ldb, trans_b, c, ldc, beta, bias);
}
