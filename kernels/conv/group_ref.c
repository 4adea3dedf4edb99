/* Plain-C reference of a grouped convolution: the oracle of the depthwise
 * kernel (dw.c) and of the engine's grouped conv2d (the dense template
 * once per group). NCHW input, [K][C/group][R][S] weights, double
 * accumulation. */
#include "hwtune/dwconv.h"
#include "conv_internal.h"

int hwt_conv_group_ref(const hwt_conv_desc *d, int group, const float *x, const float *w,
                       const float *bias, const float *res, float *y) {
  int OH, OW;
  if (!x || !w || !y || group < 1 || d->C % group || d->K % group ||
      hwt_conv_out_dims(d, &OH, &OW) != HWT_OK)
    return HWT_EINVAL;
  const int cg = d->C / group, kg = d->K / group;
  for (int n = 0; n < d->N; n++)
    for (int k = 0; k < d->K; k++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double acc = bias ? bias[k] : 0.0;
          for (int j = 0; j < cg; j++) {
            const int c = k / kg * cg + j;
            for (int r = 0; r < d->R; r++)
              for (int s = 0; s < d->S; s++) {
                const int ih = oh * d->stride_h - d->pad_h + r * d->dil_h;
                const int iw = ow * d->stride_w - d->pad_w + s * d->dil_w;
                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                acc += (double)x[(((size_t)n * d->C + c) * d->H + ih) * d->W + iw] *
                       (double)w[(((size_t)k * cg + j) * d->R + r) * d->S + s];
              }
          }
          const size_t at = (((size_t)n * d->K + k) * OH + oh) * OW + ow;
          if (res) acc += res[at];
          if (d->relu && acc < 0.0) acc = 0.0;
          if (d->relu && d->relu_max > 0.0f && acc > d->relu_max) acc = d->relu_max;
          y[at] = hwt_conv_act_ref((float)acc, d->act);
        }
  return HWT_OK;
}
