/* Internal to the probes (not installed): the variant table behind probe.c. */
#ifndef HWTUNE_PROBE_IMPL_H
#define HWTUNE_PROBE_IMPL_H
#include <stddef.h>
#include "hwtune/isa.h"

/* One variant, compiled from body.c for one ISA. */
typedef struct {
  double (*fma)(long iters); /* runs the chains; returns the flops executed */
  void (*triad)(float *a, const float *b, const float *c, float s, size_t n, int nt);
} hwt_probe_variant;

extern const hwt_probe_variant hwt_probe_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_probe_variant hwt_probe_variant_avx2, hwt_probe_variant_avx512;
#endif
/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_probe_variant *hwt_probe_variant_for(hwt_isa isa);

/* The chains must reach memory or the compiler may delete them. */
extern volatile float hwt_probe_sink;

#endif
