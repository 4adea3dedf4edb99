/* Packing compiled for the generic variant (see pack_body.h: one source, the
 * vector width comes from this file's compile flags). */
#include "pack_body.h"

void hwt_gemm_pack_a_generic(const hwt_gemm_desc *d, const float *A, int i0, int mb, int p0,
                             int kb, int mr, float *dst) {
  pack_a_body(d, A, i0, mb, p0, kb, mr, dst);
}

void hwt_gemm_pack_b_generic(const hwt_gemm_desc *d, const float *B, int p0, int kb, int j0,
                             int nb, int nr, float *dst) {
  pack_b_body(d, B, p0, kb, j0, nb, nr, dst);
}
