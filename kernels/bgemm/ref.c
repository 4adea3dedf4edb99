/* Plain-C bf16 GEMM reference: the contract and the test oracle. Triple
 * loop over the unpacked fp32 operands, each rounded to bf16 at the read,
 * k in pairs with the contract's step (hwtune/bgemm.h). */
#include "bgemm_internal.h"

int hwt_bgemm_ref(const hwt_bgemm_desc *d, const float *A, const float *B,
                  const hwt_bgemm_epi *e) {
  if (!d || !A || !B || !e || !e->C || d->M < 0 || d->N < 0 || d->K < 0 ||
      d->lda < (d->trans_a ? d->M : d->K))
    return HWT_EINVAL;
  const ptrdiff_t rs = d->trans_a ? 1 : d->lda, cs = d->trans_a ? d->lda : 1;
  for (int i = 0; i < d->M; i++)
    for (int j = 0; j < d->N; j++) {
      float acc = 0.0f;
      for (int k = 0; k < d->K; k += 2) {
        const uint32_t a0 = hwt_bf16_from_f32(A[i * rs + k * cs]);
        const uint32_t b0 = hwt_bf16_from_f32(B[(ptrdiff_t)k * d->N + j]);
        const uint32_t a1 = k + 1 < d->K ? hwt_bf16_from_f32(A[i * rs + (k + 1) * cs]) : 0;
        const uint32_t b1 = k + 1 < d->K ? hwt_bf16_from_f32(B[(ptrdiff_t)(k + 1) * d->N + j]) : 0;
        acc = hwt_bf16_pair_step(acc, a0 | a1 << 16, b0 | b1 << 16);
      }
      const float v = acc + (e->bias ? e->bias[j] : 0.0f);
      e->C[(ptrdiff_t)i * e->ldc + j] = e->relu && v < 0.0f ? 0.0f : v;
    }
  return HWT_OK;
}
