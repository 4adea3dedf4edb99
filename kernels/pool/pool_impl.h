/* Internal to the pooling kernels (not installed): the variant table the
 * driver (pool.c) dispatches through. */
#ifndef HWTUNE_POOL2D_IMPL_H
#define HWTUNE_POOL2D_IMPL_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/pool2d.h"

/* One variant, compiled from body.c for one ISA. */
typedef struct {
  /* Output rows [oa, ob) of one plane: x and y point at the plane; ws holds
   * hwt_pool2d_ws_floats(d) floats. */
  void (*rows)(const hwt_pool2d_desc *d, const float *x, float *y, int64_t oa, int64_t ob,
               float *ws);
  /* hwt_global_avg_planes: y[p] = the mean of plane p's n floats. */
  void (*global_avg)(const float *x, int64_t n, int64_t planes, float *y);
} hwt_pool2d_variant;

extern const hwt_pool2d_variant hwt_pool2d_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_pool2d_variant hwt_pool2d_variant_avx2, hwt_pool2d_variant_avx512;
#endif

/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_pool2d_variant *hwt_pool2d_variant_for(hwt_isa isa);

/* Output rows per block of the body: the input one block reads, ~16 KiB,
 * stays in L1 from the NaN scan through both passes. */
#define HWT_POOL2D_BLOCK_FLOATS 4096
/* The NCHW strided path's block of padded rows (its results take as many
 * more): 2 x 8 KiB stay in L1 between the passes. */
#define HWT_POOL2D_STRIDED_FLOATS 2048

/* The padded columns one output row's windows read: (ow - 1) * sw + kw. */
static inline int64_t hwt_pool2d_row_cols(const hwt_pool2d_desc *d) {
  return (d->ow - 1) * d->sw + d->kw;
}

#endif
