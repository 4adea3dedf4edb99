/* Plain-C int8 GEMM reference: the contract and the test oracle. Triple
 * loop over the unpacked operands with int64 accumulation of (a - za) *
 * (b - zb), then the epilogue's per-element formula (epi.h). */
#include <stdint.h>
#include "epi.h"
#include "hwtune/qgemm.h"

static int32_t a_at(const hwt_qgemm_desc *d, const void *A, size_t idx) {
  switch (d->a_type) {
    case HWT_QA_U8: return ((const uint8_t *)A)[idx];
    case HWT_QA_S8: return ((const int8_t *)A)[idx];
    default: return (int32_t)((const float *)A)[idx];
  }
}

int hwt_qgemm_ref(const hwt_qgemm_desc *d, const void *A, const int8_t *B,
                  const hwt_qgemm_epi *e) {
  if (!d || !A || !B || !e || d->M < 0 || d->N < 0 || d->K < 0 || d->a_ks < 0 ||
      (d->a_ks <= 1 && d->lda < d->K))
    return HWT_EINVAL;
  const size_t ks = d->a_ks > 1 ? (size_t)d->a_ks : 1;
  int32_t qmin, qmax;
  hwt_q_range(e, &qmin, &qmax);
  const int requant = e->out >= HWT_QOUT_QF32;
  for (int i = 0; i < d->M; i++)
    for (int j = 0; j < d->N; j++) {
      const int32_t zb = e->zb ? e->zb[j] : 0;
      int64_t acc = 0;
      for (int k = 0; k < d->K; k++)
        acc += (int64_t)(a_at(d, A, (size_t)i * d->lda + (size_t)k * ks) - e->za) *
               (int64_t)(B[(size_t)k * d->N + j] - zb);
      if (e->bias_i) acc += e->bias_i[j];
      float v = (float)(int32_t)acc;
      if (e->out != HWT_QOUT_ACC)
        v = hwt_q_value(v, e->scale[j], e->bias ? e->bias[j] : 0.0f, e->relu, requant,
                        (float)(qmin - e->zy), (float)(qmax - e->zy), (float)e->zy);
      const ptrdiff_t at = (ptrdiff_t)i * e->rs_c + (ptrdiff_t)j * e->cs_c;
      if (e->out == HWT_QOUT_U8) ((uint8_t *)e->C)[at] = (uint8_t)(int32_t)v;
      else if (e->out == HWT_QOUT_S8) ((int8_t *)e->C)[at] = (int8_t)(int32_t)v;
      else ((float *)e->C)[at] = v;
    }
  return HWT_OK;
}
