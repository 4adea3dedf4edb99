/* Direct NCHW convolution, portable C. One work unit is one output row of a
 * group of HWT_CONV_DIRECT_OCG output channels: each input value loaded is
 * used for every channel of the group, and the inner loop runs along the
 * row (contiguous when stride_w == 1) so the compiler vectorises it. Padding
 * is handled by clipping each tap's range of output columns, not by a copy. */
#include <string.h>
#include "conv_internal.h"

/* Output columns [lo, hi) whose input column ow*sw - pw + s lies in [0, W)
 * (s: the tap's column offset, kernel column times dilation). */
static void tap_range(int s, int sw, int pw, int W, int OW, int *lo, int *hi) {
  int first = pw - s;  /* smallest ow*sw that is in range */
  int l = first <= 0 ? 0 : (first + sw - 1) / sw;
  int last = W - 1 + pw - s;
  int h = last < 0 ? 0 : last / sw + 1;
  *lo = l;
  *hi = h < OW ? h : OW;
}

_Static_assert(HWT_CONV_DIRECT_OCG == 4, "the inner loops below name four accumulator rows");

void hwt_conv_direct_pack(const hwt_conv_desc *d, const float *w_oihw, float *w_packed) {
  const int G = HWT_CONV_DIRECT_OCG, KG = (d->K + G - 1) / G;
  const size_t crs = (size_t)d->C * d->R * d->S;
  for (int kg = 0; kg < KG; kg++)
    for (size_t i = 0; i < crs; i++)
      for (int g = 0; g < G; g++) {
        int k = kg * G + g;
        w_packed[((size_t)kg * crs + i) * G + g] = k < d->K ? w_oihw[(size_t)k * crs + i] : 0.0f;
      }
}

void hwt_conv_direct_units(const hwt_conv_plan *p, const float *x, const float *w,
                           const float *bias, const float *res, float *y, float *ws, long lo,
                           long hi) {
  const hwt_conv_desc *d = &p->d;
  const int G = HWT_CONV_DIRECT_OCG, OH = p->OH, OW = p->OW;
  const int KG = (d->K + G - 1) / G, sw = d->stride_w;
  for (long u = lo; u < hi; u++) {
    int n = (int)(u / ((long)KG * OH)), kg = (int)(u / OH % KG), oh = (int)(u % OH);
    int k0 = kg * G, g_n = d->K - k0 < G ? d->K - k0 : G;
    float *acc[HWT_CONV_DIRECT_OCG];
    for (int g = 0; g < G; g++) {
      acc[g] = ws + (size_t)g * OW;
      float b = (g < g_n && bias) ? bias[k0 + g] : 0.0f;
      for (int ow = 0; ow < OW; ow++) acc[g][ow] = b;
    }
    for (int c = 0; c < d->C; c++) {
      for (int r = 0; r < d->R; r++) {
        int ih = oh * d->stride_h - d->pad_h + r * d->dil_h;
        if (ih < 0 || ih >= d->H) continue;
        const float *xrow = x + (((size_t)n * d->C + c) * d->H + ih) * d->W;
        for (int s = 0; s < d->S; s++) {
          int ow_lo, ow_hi;
          const int col = s * d->dil_w;
          tap_range(col, sw, d->pad_w, d->W, OW, &ow_lo, &ow_hi);
          /* Packed [K/G][C][R][S][G], zero-filled past K: a short last group
           * accumulates with weight 0 into scratch that is never stored. */
          const float *wv = w + ((((size_t)kg * d->C + c) * d->R + r) * d->S + s) * G;
          const float w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3];
          const float *restrict xs = xrow + col - d->pad_w;
          float *restrict a0 = acc[0], *restrict a1 = acc[1], *restrict a2 = acc[2],
                         *restrict a3 = acc[3];
          if (sw == 1) {
            for (int ow = ow_lo; ow < ow_hi; ow++) {
              float xv = xs[ow];
              a0[ow] += w0 * xv;
              a1[ow] += w1 * xv;
              a2[ow] += w2 * xv;
              a3[ow] += w3 * xv;
            }
          } else {
            for (int ow = ow_lo; ow < ow_hi; ow++) {
              float xv = xs[(long)ow * sw];
              a0[ow] += w0 * xv;
              a1[ow] += w1 * xv;
              a2[ow] += w2 * xv;
              a3[ow] += w3 * xv;
            }
          }
        }
      }
    }
    for (int g = 0; g < g_n; g++) {
      const size_t at = (((size_t)n * d->K + k0 + g) * OH + oh) * OW;
      float *yrow = y + at;
      if (res)
        for (int ow = 0; ow < OW; ow++) acc[g][ow] += res[at + ow];
      if (d->relu)
        for (int ow = 0; ow < OW; ow++) yrow[ow] = hwt_conv_act(acc[g][ow], 1, d->relu_max);
      else
        memcpy(yrow, acc[g], (size_t)OW * sizeof(float));
      hwt_conv_act_rows(p->isa, d->act, yrow, 0, 1, OW);
    }
  }
}
