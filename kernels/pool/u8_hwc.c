/* Max pooling of u8 channels-last images: the int8 byte links of issue #43
 * (hwtune.engine.qlayout), where the stem qconv2d's u8 output reaches the
 * layer1 convs through ResNet's 3x3 stride-2 max pool as bytes. Portable C
 * (a byte max GCC vectorises to pmaxub, 16 channels per instruction), its
 * own oracle beside the float kernel's: a max of integers has one result. */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "hwtune/pool2d.h"

static int64_t lo_clamp(int64_t v) { return v < 0 ? 0 : v; }

/* o = max(o, p) over c bytes; restrict parameters (block-scope restrict
   pointers left GCC a run-time alias check per call, -fopt-info-vec) */
static void max_into(uint8_t *restrict o, const uint8_t *restrict p, int64_t c) {
  for (int64_t k = 0; k < c; k++) o[k] = p[k] > o[k] ? p[k] : o[k];
}

/* One output pixel: the max of the window's pixels (rows iy0..iy1, columns
   ix0..ix1 of an image w pixels wide). x86-64 (SSE2 is its baseline): 16
   channels at a time kept in a register over the window, one store;
   max_into's byte loop, also vectorised, loads and stores o at every tap
   (the stem pool, 56x56x64 out of 112x112x64: 79-86 us against ORT's
   NhwcMaxPool 61-65, per-op least of 3 traced runs, 1 thread, under load). */
static void window_max(uint8_t *restrict o, const uint8_t *restrict xi, int64_t w, int64_t c,
                       int64_t iy0, int64_t iy1, int64_t ix0, int64_t ix1) {
  int64_t k = 0;
#if defined(__SSE2__)
  for (; k + 16 <= c; k += 16) {
    __m128i m = _mm_loadu_si128((const __m128i *)(const void *)(xi + (iy0 * w + ix0) * c + k));
    for (int64_t iy = iy0; iy < iy1; iy++)
      for (int64_t ix = ix0; ix < ix1; ix++) {
        const uint8_t *p = xi + (iy * w + ix) * c + k;
        m = _mm_max_epu8(m, _mm_loadu_si128((const __m128i *)(const void *)p));
      }
    _mm_storeu_si128((__m128i *)(void *)(o + k), m);
  }
  if (k == c) return;
#endif
  memcpy(o + k, xi + (iy0 * w + ix0) * c + k, (size_t)(c - k));
  for (int64_t iy = iy0; iy < iy1; iy++)
    for (int64_t ix = ix0; ix < ix1; ix++) max_into(o + k, xi + (iy * w + ix) * c + k, c - k);
}

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
      /* every window holds an input pixel (hwt_pool2d_check: padding at
         most half a window; a ceil-mode window starts inside the input) */
      window_max(yr + ox * c, xi, d->w, c, iy0, iy1, ix0, ix1);
    }
  }
}
