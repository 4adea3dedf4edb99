/* Max pooling of u8 channels-last images: the int8 byte links of issue #43
 * (hwtune.engine.qlayout), where the stem qconv2d's u8 output reaches the
 * layer1 convs through ResNet's 3x3 stride-2 max pool as bytes. Portable C
 * (a byte max GCC vectorises to pmaxub, 16 channels per instruction), its
 * own oracle beside the float kernel's: a max of integers has one result. */
#include "hwtune/pool2d.h"

static int64_t lo_clamp(int64_t v) { return v < 0 ? 0 : v; }

void hwt_pool2d_u8_hwc_max_part(const hwt_pool2d_desc *d, const uint8_t *x, int64_t x_image,
                                uint8_t *y, int64_t y_image, int tid, int nth) {
  if (!d || nth < 1 || tid < 0 || tid >= nth) return;
  const int64_t c = d->b, n = d->planes * d->oh;
  const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
  for (int64_t r = lo; r < hi; r++) {
    const int64_t img = r / d->oh, oy = r % d->oh;
    const uint8_t *xi = x + img * x_image;
    uint8_t *yr = y + img * y_image + oy * d->ow * c;
    const int64_t iy0 = lo_clamp(oy * d->sh - d->ph);
    int64_t iy1 = oy * d->sh - d->ph + d->kh;
    if (iy1 > d->h) iy1 = d->h;
    for (int64_t ox = 0; ox < d->ow; ox++) {
      const int64_t ix0 = lo_clamp(ox * d->sw - d->pw);
      int64_t ix1 = ox * d->sw - d->pw + d->kw;
      if (ix1 > d->w) ix1 = d->w;
      uint8_t *restrict o = yr + ox * c;
      /* every window holds an input pixel (hwt_pool2d_check: padding at
         most half a window; a ceil-mode window starts inside the input) */
      const uint8_t *first = xi + (iy0 * d->w + ix0) * c;
      for (int64_t k = 0; k < c; k++) o[k] = first[k];
      for (int64_t iy = iy0; iy < iy1; iy++)
        for (int64_t ix = ix0; ix < ix1; ix++) {
          const uint8_t *restrict p = xi + (iy * d->w + ix) * c;
          for (int64_t k = 0; k < c; k++) o[k] = p[k] > o[k] ? p[k] : o[k];
        }
    }
  }
}
