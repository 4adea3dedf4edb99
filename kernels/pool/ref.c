/* Plain-C pooling reference: the contract and the test oracle. Every
 * window visited position by position, sums in double (as the numpy
 * reference), the max NaN-propagating. */
#include <math.h>
#include "hwtune/pool2d.h"

int hwt_pool2d_ref(const hwt_pool2d_desc *d, const float *x, float *y) {
  if (!d || d->planes < 0 || d->oh < 1 || d->ow < 1) return HWT_EINVAL;
  const int64_t B = d->b, H = d->h, W = d->w;
  for (int64_t p = 0; p < d->planes; p++)
    for (int64_t o = 0; o < d->oh; o++)
      for (int64_t j = 0; j < d->ow; j++)
        for (int64_t c = 0; c < B; c++) {
          const int64_t h0 = o * d->sh - d->ph, w0 = j * d->sw - d->pw;
          double acc = d->is_max ? -INFINITY : 0.0, count = 0.0;
          for (int64_t u = h0; u < h0 + d->kh; u++)
            for (int64_t v = w0; v < w0 + d->kw; v++) {
              const int inside = u >= 0 && v >= 0 && u < H && v < W;
              if (d->include_pad ? u < H + d->eh && v < W + d->ew : inside) count += 1.0;
              if (!inside) continue;
              const double val = x[((p * H + u) * W + v) * B + c];
              if (d->is_max)
                acc = (val > acc || isnan(val)) ? val : acc;
              else
                acc += val;
            }
          y[((p * d->oh + o) * d->ow + j) * B + c] = (float)(d->is_max ? acc : acc / count);
        }
  return HWT_OK;
}
