/* Element-wise driver: partition + dispatch. (Initial version: reference loop.) */
#include "hwtune/eltwise.h"

int hwt_eltwise_check(const hwt_eltwise_desc *d) {
  if (!d || d->op < 0 || d->op >= HWT_EW_COUNT) return HWT_EINVAL;
  if (!hwt_isa_supported(d->isa)) return HWT_EISA;
  return HWT_OK;
}

void hwt_eltwise_run_part(const hwt_eltwise_desc *d, const float *a, const float *b,
                          const float *c, float *out, int tid, int nth) {
  size_t lo = d->n * (size_t)tid / (size_t)nth, hi = d->n * (size_t)(tid + 1) / (size_t)nth;
  hwt_eltwise_ref(d->op, a + lo, b ? b + lo : 0, c ? c + lo : 0, out + lo, hi - lo);
}

const char *hwt_eltwise_name(hwt_ew_op op) {
  static const char *const names[HWT_EW_COUNT] = {"add", "sub", "mul", "fma", "sigmoid", "tanh", "relu"};
  return (op >= 0 && op < HWT_EW_COUNT) ? names[op] : "unknown";
}

double hwt_eltwise_max_abs_error(hwt_ew_op op, hwt_isa isa) { (void)op; (void)isa; return 0.0; }
