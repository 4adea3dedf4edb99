/* Plain-C element-wise reference: the contract and the test oracle (libm). */
#include <math.h>
#include "hwtune/eltwise.h"

int hwt_eltwise_ref(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (op) {
      case HWT_EW_ADD: out[i] = a[i] + b[i]; break;
      case HWT_EW_SUB: out[i] = a[i] - b[i]; break;
      case HWT_EW_MUL: out[i] = a[i] * b[i]; break;
      case HWT_EW_FMA: out[i] = fmaf(a[i], b[i], c[i]); break;
      case HWT_EW_SIGMOID: out[i] = (float)(1.0 / (1.0 + exp(-(double)a[i]))); break;
      case HWT_EW_TANH: out[i] = (float)tanh((double)a[i]); break;
      case HWT_EW_RELU: out[i] = a[i] > 0.0f ? a[i] : 0.0f; break;
      default: return HWT_EINVAL;
    }
  }
  return HWT_OK;
}
