/* Element-wise FP32 ops on contiguous vectors.
 * hwt_eltwise_run_part() computes thread `tid`'s share of [0, n) out of `nth`
 * (chunks aligned to cache lines, disjoint, no synchronisation needed). */
#ifndef HWTUNE_ELTWISE_H
#define HWTUNE_ELTWISE_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef enum {
  HWT_EW_ADD = 0,     /* out = a + b */
  HWT_EW_SUB = 1,     /* out = a - b */
  HWT_EW_MUL = 2,     /* out = a * b */
  HWT_EW_FMA = 3,     /* out = a * b + c */
  HWT_EW_SIGMOID = 4, /* out = 1 / (1 + exp(-a)) */
  HWT_EW_TANH = 5,    /* out = tanh(a) */
  HWT_EW_RELU = 6,    /* out = max(a, 0) */
  HWT_EW_COUNT = 7
} hwt_ew_op;

typedef struct {
  hwt_ew_op op;
  hwt_isa isa;
  size_t n;
  int nt_stores;      /* 1: non-temporal stores for the output (large outputs) */
} hwt_eltwise_desc;

HWT_API int hwt_eltwise_check(const hwt_eltwise_desc *d); /* HWT_OK, HWT_EINVAL or HWT_EISA */
/* b and c may be NULL when the op does not read them. */
HWT_API void hwt_eltwise_run_part(const hwt_eltwise_desc *d, const float *a, const float *b,
                                  const float *c, float *out, int tid, int nth);
/* Plain-C reference (the test oracle), using libm. */
HWT_API int hwt_eltwise_ref(hwt_ew_op op, const float *a, const float *b, const float *c,
                            float *out, size_t n);
HWT_API const char *hwt_eltwise_name(hwt_ew_op op);
/* Documented max error of the fast activations vs libm for this variant,
 * absolute, over all finite inputs (0 for exact ops). */
HWT_API double hwt_eltwise_max_abs_error(hwt_ew_op op, hwt_isa isa);

#endif
