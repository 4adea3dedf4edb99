/* Plain-C CONV references: the contract and the test oracles. NCHW input,
 * OIHW weights ([K][C/group][R][S] when grouped), double accumulation so
 * they are more accurate than any variant. */
#include <stdlib.h>
#include "hwtune/conv.h"
#include "hwtune/dwconv.h"
#include "conv_internal.h"

/* The input pixel (*ih, *iw) that output pixel (oh, ow) meets at window tap
 * (r, s); 0 where it falls in the padding. The window geometry both
 * references walk; what each does at a tap (gather, scatter) stays its own. */
static int tap(const hwt_conv_desc *d, int oh, int ow, int r, int s, int *ih, int *iw) {
  *ih = oh * d->stride_h - d->pad_h + r * d->dil_h;
  *iw = ow * d->stride_w - d->pad_w + s * d->dil_w;
  return *ih >= 0 && *ih < d->H && *iw >= 0 && *iw < d->W;
}

int hwt_conv_ref(const hwt_conv_desc *d, const float *x, const float *w, const float *bias,
                 float *y) {
  return hwt_conv_ref_res(d, x, w, bias, NULL, y);
}

/* Grouped convolution: the oracle of the depthwise kernel (dw.c) and of
 * the engine's grouped conv2d (the dense template once per group).
 * [K][C/group][R][S] weights. */
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
                int ih, iw;
                if (!tap(d, oh, ow, r, s, &ih, &iw)) continue;
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

/* The dense conv is the grouped reference at one group: the same loops, the
 * same summation order (bias, then channels, rows, columns), so the two
 * oracles cannot drift apart. */
int hwt_conv_ref_res(const hwt_conv_desc *d, const float *x, const float *w, const float *bias,
                     const float *res, float *y) {
  return hwt_conv_group_ref(d, 1, x, w, bias, res, y);
}

/* Scatter form: every input value spreads over the R x S window it would
 * have been gathered from, so the loops are the forward conv's with the
 * roles of x and y swapped. */
int hwt_conv_transpose_ref(const hwt_conv_desc *d, const float *x, const float *w,
                           const float *bias, float *y) {
  int OH, OW;
  if (!x || !w || !y || hwt_conv_out_dims(d, &OH, &OW) != HWT_OK) return HWT_EINVAL;
  const size_t plane = (size_t)d->H * d->W;
  double *acc = malloc(plane * sizeof *acc);
  if (!acc) return HWT_ENOMEM;
  for (int n = 0; n < d->N; n++)
    for (int c = 0; c < d->C; c++) {
      for (size_t i = 0; i < plane; i++) acc[i] = bias ? bias[c] : 0.0;
      for (int k = 0; k < d->K; k++)
        for (int oh = 0; oh < OH; oh++)
          for (int ow = 0; ow < OW; ow++) {
            double v = x[(((size_t)n * d->K + k) * OH + oh) * OW + ow];
            for (int r = 0; r < d->R; r++)
              for (int s = 0; s < d->S; s++) {
                int ih, iw;
                if (!tap(d, oh, ow, r, s, &ih, &iw)) continue;
                acc[(size_t)ih * d->W + iw] +=
                    v * (double)w[(((size_t)k * d->C + c) * d->R + r) * d->S + s];
              }
          }
      float *yp = y + ((size_t)n * d->C + c) * plane;
      for (size_t i = 0; i < plane; i++) yp[i] = (float)acc[i];
    }
  free(acc);
  return HWT_OK;
}
