/* Plain-C layer-norm reference: the contract and the test oracle. Mean and
 * the biased variance of x - mean in double, as the numpy reference. */
#include <math.h>
#include "hwtune/layernorm.h"

void hwt_layernorm_ref(const float *x, float *y, const float *scale, const float *bias,
                       int64_t len, double eps, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++) {
    const float *xr = x + r * len;
    float *yr = y + r * len;
    double sum = 0.0, sq = 0.0;
    for (int64_t j = 0; j < len; j++) sum += xr[j];
    const double mean = sum / (double)len;
    for (int64_t j = 0; j < len; j++) sq += (xr[j] - mean) * (xr[j] - mean);
    const double inv = 1.0 / sqrt(sq / (double)len + eps);
    for (int64_t j = 0; j < len; j++)
      yr[j] = (float)((xr[j] - mean) * inv * scale[j] + (bias ? bias[j] : 0.0));
  }
}
