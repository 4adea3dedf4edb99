/* Layer-norm driver: dispatch through the variant table. */
#include "norm_impl.h"

void hwt_layernorm_rows(hwt_isa isa, const float *x, float *y, const float *scale,
                        const float *bias, int64_t len, double eps, int64_t r0, int64_t r1) {
  if (!x || !y || !scale || len < 1 || r0 >= r1) return;
  hwt_norm_variant_for(isa)->rows(x, y, scale, bias, len, eps, r0, r1);
}
