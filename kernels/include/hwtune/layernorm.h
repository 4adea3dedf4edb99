/* Layer normalisation over rows: y[r, j] = (x[r, j] - mean_r) / sqrt(var_r +
 * eps) * scale[j] (+ bias[j]), mean and (biased) variance over the row's
 * len floats, as src/hwtune/graph/ops/norm.py defines layer_norm.
 *
 * hwt_layernorm_rows() runs rows [r0, r1) with the variant of isa (the
 * portable one when the CPU lacks it): per row one pass for the mean, one
 * for the variance of x - mean (no cancellation for rows far from zero, as
 * the reference), one writing y; the row is read from L1 the second and
 * third time for rows up to a few thousand floats. Sums in float, lane-wise
 * then across lanes: within a few len x 2^-24 of the reference's double
 * sums relative to the row's spread (tests/c/test_kernel_layernorm.c). */
#ifndef HWTUNE_LAYERNORM_H
#define HWTUNE_LAYERNORM_H
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

HWT_API void hwt_layernorm_rows(hwt_isa isa, const float *x, float *y, const float *scale,
                                const float *bias, int64_t len, double eps, int64_t r0,
                                int64_t r1);
/* Plain-C reference (the test oracle): double sums, as the numpy one. */
HWT_API void hwt_layernorm_ref(const float *x, float *y, const float *scale, const float *bias,
                               int64_t len, double eps, int64_t r0, int64_t r1);

#endif
