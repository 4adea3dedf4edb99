/* Plain-C direct int8 conv reference: the contract and the test oracle.
 * Loops over output pixels, channels and the window with int64 sums of
 * (x - za) * w (the zero point in the padding), then the int8 GEMM's
 * per-element epilogue (kernels/qgemm/epi.h). */
#include <stdint.h>
#include "../qgemm/epi.h"
#include "hwtune/qconv.h"

int hwt_qconv_ref(const hwt_qconv_desc *d, int icp, const uint8_t *x, const int8_t *w,
                  const hwt_qgemm_epi *e) {
  if (!d || !x || !w || !e || icp < d->ic || e->zb) return HWT_EINVAL;
  int32_t qmin, qmax;
  hwt_q_range(e, &qmin, &qmax);
  const int requant = e->out >= HWT_QOUT_QF32;
  for (int oy = 0; oy < d->oh; oy++)
    for (int ox = 0; ox < d->ow; ox++)
      for (int o = 0; o < d->oc; o++) {
        int64_t acc = 0;
        for (int c = 0; c < d->ic; c++)
          for (int ky = 0; ky < d->kh; ky++)
            for (int kx = 0; kx < d->kw; kx++) {
              const int iy = oy * d->sh - d->pt + ky * d->dh;
              const int ix = ox * d->sw - d->pl + kx * d->dw;
              const int32_t xv = iy < 0 || iy >= d->h || ix < 0 || ix >= d->w
                                     ? e->za
                                     : x[((size_t)iy * (size_t)d->w + (size_t)ix) * (size_t)icp +
                                         (size_t)c];
              const int8_t wv = w[(((size_t)o * (size_t)d->ic + (size_t)c) * (size_t)d->kh +
                                   (size_t)ky) * (size_t)d->kw + (size_t)kx];
              acc += (int64_t)(xv - e->za) * wv;
            }
        if (e->bias_i) acc += e->bias_i[o];
        float v = (float)(int32_t)acc;
        if (e->out != HWT_QOUT_ACC)
          v = hwt_q_value(v, e->scale[o], e->bias ? e->bias[o] : 0.0f, e->relu, requant,
                          (float)(qmin - e->zy), (float)(qmax - e->zy), (float)e->zy);
        const ptrdiff_t at = (ptrdiff_t)(oy * d->ow + ox) * e->rs_c + (ptrdiff_t)o * e->cs_c;
        if (e->out == HWT_QOUT_U8) ((uint8_t *)e->C)[at] = (uint8_t)(int32_t)v;
        else if (e->out == HWT_QOUT_S8) ((int8_t *)e->C)[at] = (int8_t)(int32_t)v;
        else ((float *)e->C)[at] = v;
      }
  return HWT_OK;
}
