/* Plain-C LSTM cell reference: the contract and the test oracle. Double
 * precision and libm, so that it is more accurate than any variant under
 * test. */
#include <math.h>
#include "hwtune/rnn.h"

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

int hwt_lstm_cell_ref(const hwt_lstm_cell_desc *d, const float *gates, const float *x_gates,
                      const float *bias, const float *c_prev, float *h, float *c) {
  if (!d || d->batch < 1 || d->hidden < 1) return HWT_EINVAL;
  const size_t H = (size_t)d->hidden;
  for (size_t r = 0; r < (size_t)d->batch; r++) {
    for (size_t u = 0; u < H; u++) {
      double z[4];
      for (size_t k = 0; k < 4; k++) {
        size_t j = r * 4 * H + k * H + u;
        z[k] = gates[j];
        if (d->has_x_gates) z[k] += x_gates[j];
        if (d->has_bias) z[k] += bias[k * H + u];
      }
      double cc = sigmoid(z[1]) * c_prev[r * H + u] + sigmoid(z[0]) * tanh(z[2]);
      c[r * H + u] = (float)cc;
      h[r * H + u] = (float)(sigmoid(z[3]) * tanh(cc));
    }
  }
  return HWT_OK;
}
