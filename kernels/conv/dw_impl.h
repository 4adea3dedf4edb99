/* Internal to the depthwise kernels (not installed): the variant table the
 * driver (dw.c) dispatches through, and the staging geometry both share. */
#ifndef HWTUNE_DW_IMPL_H
#define HWTUNE_DW_IMPL_H
#include "hwtune/dwconv.h"

/* One variant, compiled from dw_body.c for one ISA. */
typedef struct {
  /* Output rows [oa, ob) of one output plane: x the input plane it reads,
   * w its R x S filter, res the residual plane (or NULL), y the output
   * plane; ws holds p->ws_floats floats. */
  void (*rows)(const hwt_dwconv_plan *p, const float *x, const float *w, float bias,
               const float *res, float *y, int oa, int ob, float *ws);
} hwt_dwconv_variant;

extern const hwt_dwconv_variant hwt_dwconv_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_dwconv_variant hwt_dwconv_variant_avx2, hwt_dwconv_variant_avx512;
#endif
/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_dwconv_variant *hwt_dwconv_variant_for(hwt_isa isa);

/* Input rows a chunk of `rows` output rows reads. */
static inline long hwt_dwconv_span(const hwt_dwconv_plan *p, int rows) {
  return (long)(rows - 1) * p->d.stride_h + (long)(p->d.R - 1) * p->d.dil_h + 1;
}

#endif
