/* GEMM driver: plan + partition. (Initial version: row partition over the
 * reference loop; the packed, blocked SIMD driver replaces it.) */
#include <string.h>
#include "hwtune/gemm.h"

int hwt_gemm_plan_make(const hwt_gemm_desc *d, hwt_isa isa, int nth, hwt_gemm_plan *out) {
  if (!d || !out || nth < 1 || d->M < 0 || d->N < 0 || d->K < 0) return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  memset(out, 0, sizeof(*out));
  out->d = *d;
  out->isa = isa;
  out->nth = nth;
  return HWT_OK;
}

void hwt_gemm_run_part(const hwt_gemm_plan *p, const float *A, const float *B, float *C,
                       const float *bias, float *ws, int tid, int nth) {
  (void)ws;
  hwt_gemm_desc d = p->d;
  int m0 = (int)((long)d.M * tid / nth), m1 = (int)((long)d.M * (tid + 1) / nth);
  d.M = m1 - m0;
  const float *a = d.trans_a ? A + m0 : A + (size_t)m0 * d.lda;
  hwt_gemm_ref(&d, a, B, C + (size_t)m0 * d.ldc, bias);
}
