/* Plain-C element-wise reference: the contract and the test oracle. Each
 * op's scalar reference (ops.h, named by its row of eltwise_ops.def) applied
 * element by element; the approximated ops use libm in double. */
#include "hwtune/eltwise.h"
#include "ops.h"

typedef double (*ref_fn)(float a, float b, float c, const float *attr);

static const ref_fn k_refs[HWT_EW_COUNT] = {
#define HWT_EW_OP(id, name, kind, flops, ref, ...) [id] = ref,
#include "hwtune/eltwise_ops.def"
};

/* Element i of op d, in double. */
static double ref_at(const hwt_eltwise_desc *d, const float *a, const float *b, const float *c,
                     size_t i) {
  const int k = hwt_eltwise_operands(d->op);
  return k_refs[d->op](a[i], k >= 2 ? b[i] : 0.0f, k >= 3 ? c[i] : 0.0f, d->attr);
}

int hwt_eltwise_ref(const hwt_eltwise_desc *d, const float *a, const float *b, const float *c,
                    float *out) {
  if (!d || (int)d->op < 0 || d->op >= HWT_EW_COUNT) return HWT_EINVAL;
  for (size_t i = 0; i < d->n; i++) out[i] = (float)ref_at(d, a, b, c, i);
  return HWT_OK;
}

int hwt_eltwise_ref_f64(const hwt_eltwise_desc *d, const float *a, const float *b,
                        const float *c, double *out) {
  if (!d || (int)d->op < 0 || d->op >= HWT_EW_COUNT) return HWT_EINVAL;
  for (size_t i = 0; i < d->n; i++) out[i] = ref_at(d, a, b, c, i);
  return HWT_OK;
}
