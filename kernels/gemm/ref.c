/* Plain-C GEMM reference: the contract and the test oracle. Double
 * accumulation so that it is more accurate than any variant under test. */
#include "hwtune/gemm.h"

static int desc_valid(const hwt_gemm_desc *d) {
  if (d->M < 0 || d->N < 0 || d->K < 0) return 0;
  if (d->ldc < d->N) return 0;
  if (d->lda < (d->trans_a ? d->M : d->K)) return 0;
  if (d->ldb < (d->trans_b ? d->K : d->N)) return 0;
  return 1;
}

int hwt_gemm_ref(const hwt_gemm_desc *d, const float *A, const float *B, float *C,
                 const float *bias) {
  if (!desc_valid(d)) return HWT_EINVAL;
  for (int i = 0; i < d->M; i++) {
    for (int j = 0; j < d->N; j++) {
      double acc = 0.0;
      for (int k = 0; k < d->K; k++) {
        float a = d->trans_a ? A[(size_t)k * d->lda + i] : A[(size_t)i * d->lda + k];
        float b = d->trans_b ? B[(size_t)j * d->ldb + k] : B[(size_t)k * d->ldb + j];
        acc += (double)a * (double)b;
      }
      float *c = &C[(size_t)i * d->ldc + j];
      if (d->beta != 0.0f) acc += (double)d->beta * (double)*c;
      if (bias) acc += bias[j];
      *c = (float)acc;
    }
  }
  return HWT_OK;
}
