/* Plain-C CONV reference: the contract and the test oracle. NCHW input,
 * OIHW weights, double accumulation so it is more accurate than any variant. */
#include "hwtune/conv.h"

int hwt_conv_ref(const hwt_conv_desc *d, const float *x, const float *w, const float *bias,
                 float *y) {
  int OH, OW;
  if (!x || !w || !y || hwt_conv_out_dims(d, &OH, &OW) != HWT_OK) return HWT_EINVAL;
  for (int n = 0; n < d->N; n++)
    for (int k = 0; k < d->K; k++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double acc = bias ? bias[k] : 0.0;
          for (int c = 0; c < d->C; c++)
            for (int r = 0; r < d->R; r++) {
              int ih = oh * d->stride_h - d->pad_h + r;
              if (ih < 0 || ih >= d->H) continue;
              for (int s = 0; s < d->S; s++) {
                int iw = ow * d->stride_w - d->pad_w + s;
                if (iw < 0 || iw >= d->W) continue;
                acc += (double)x[(((size_t)n * d->C + c) * d->H + ih) * d->W + iw] *
                       (double)w[(((size_t)k * d->C + c) * d->R + r) * d->S + s];
              }
            }
          if (d->relu && acc < 0.0) acc = 0.0;
          y[(((size_t)n * d->K + k) * OH + oh) * OW + ow] = (float)acc;
        }
  return HWT_OK;
}
