/* Internal to the layer-norm kernels (not installed): the variant table the
 * driver (layernorm.c) dispatches through. */
#ifndef HWTUNE_NORM_IMPL_H
#define HWTUNE_NORM_IMPL_H
#include <stdint.h>
#include "hwtune/layernorm.h"

/* One variant, compiled from body.c for one ISA: rows [r0, r1). */
typedef struct {
  void (*rows)(const float *x, float *y, const float *scale, const float *bias, int64_t len,
               double eps, int64_t r0, int64_t r1);
} hwt_norm_variant;

extern const hwt_norm_variant hwt_norm_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_norm_variant hwt_norm_variant_avx2, hwt_norm_variant_avx512;
#endif

/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_norm_variant *hwt_norm_variant_for(hwt_isa isa);

#endif
