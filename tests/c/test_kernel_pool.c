/* Pooling kernels (kernels/pool/) on every ISA variant this CPU runs
 * against the plain-C reference hwt_pool2d_ref: max bit for bit (NaN
 * propagation included), averages within the float summation bound; odd
 * shapes (W = 1, H below the window with padding, ceil mode,
 * count_include_pad both ways, channel blocks of 1, 3, 8, 16 and 24 floats,
 * the same-size stride-1 path and the strided ones), thread shares run in
 * a scrambled order, outputs sized exactly (ASan sees a write past them).
 * And the u8 channels-last max pool of the int8 byte links against the
 * same reference. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/isa.h"
#include "hwtune/pool2d.h"
#include "check.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_val(void) { return -3.0f + 6.0f * (float)(rnd() >> 8) * 0x1p-24f; }

static int same_bits(float a, float b) {
  if (isnan(a) && isnan(b)) return 1;
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Runs d on every ISA and nth 1-3 against the reference; nan_every > 0
 * plants a NaN at every such element (max cases). */
static void check(hwt_pool2d_desc d, int ceil_mode, int nan_every, const char *what) {
  d.oh = hwt_pool2d_out_len(d.h, d.kh, d.sh, d.ph, d.eh, ceil_mode);
  d.ow = hwt_pool2d_out_len(d.w, d.kw, d.sw, d.pw, d.ew, ceil_mode);
  const size_t nx = (size_t)(d.planes * d.h * d.w * d.b), ny = (size_t)(d.planes * d.oh * d.ow * d.b);
  float *x = malloc(nx * sizeof *x + 1), *y = malloc(ny * sizeof *y + 1),
        *want = malloc(ny * sizeof *want + 1);
  for (size_t i = 0; i < nx; i++) x[i] = rnd_val();
  if (nan_every)
    for (size_t i = (size_t)rnd_int(0, nan_every - 1); i < nx; i += (size_t)nan_every) x[i] = NAN;
  d.isa = HWT_ISA_GENERIC;
  CHECK(hwt_pool2d_ref(&d, x, want) == HWT_OK, "%s: ref", what);
  /* averages: float sums over the separable passes, kh - 1 then kw - 1
   * adds, each rounding by at most 2^-24 of the window's sum of |x| (<=
   * count x 3), then one rounded division */
  const double tol = d.is_max ? 0.0 : (double)(d.kh + d.kw) * 0x1p-24 * 3.0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    d.isa = (hwt_isa)isa;
    CHECK(hwt_pool2d_check(&d) == HWT_OK, "%s: check", what);
    float *ws = malloc(hwt_pool2d_ws_floats(&d) * sizeof *ws + 1);
    for (int nth = 1; nth <= 3; nth++) {
      for (size_t i = 0; i < ny; i++) y[i] = -12345.0f;
      for (int k = 0; k < nth; k++) hwt_pool2d_run_part(&d, x, y, ws, (k * 5 + 3) % nth, nth);
      int64_t bad = 0;
      for (size_t i = 0; i < ny && bad < 3; i++) {
        const int ok = d.is_max ? same_bits(y[i], want[i])
                                : fabs((double)y[i] - want[i]) <= tol + 0x1p-24 * fabs(want[i]);
        if (!ok && bad++ == 0)
          CHECK(ok,
                "%s isa=%s nth=%d max=%d b=%lld h=%lld w=%lld k=%lldx%lld s=%lldx%lld "
                "p=%lld,%lld/%lld,%lld ceil=%d incl=%d i=%zu: got %.9g want %.9g",
                what, hwt_isa_name(d.isa), nth, d.is_max, (long long)d.b, (long long)d.h,
                (long long)d.w, (long long)d.kh, (long long)d.kw, (long long)d.sh,
                (long long)d.sw, (long long)d.ph, (long long)d.pw, (long long)d.eh,
                (long long)d.ew, ceil_mode, d.include_pad, i, y[i], want[i]);
      }
    }
    free(ws);
  }
  free(x);
  free(y);
  free(want);
}

/* hwt_pool2d_u8_hwc_max_part (images of channels-last u8 pixels, d.b
 * channels) against the float reference of the same layout (planes x h x
 * w x b) on the bytes' values; images spaced by `gap` bytes beyond their
 * pixels, as the engine's float32 slots space them; the buffers end at the
 * last image's last byte. */
static void check_u8(hwt_pool2d_desc d, int ceil_mode, int64_t gap, const char *what) {
  d.is_max = 1;
  d.oh = hwt_pool2d_out_len(d.h, d.kh, d.sh, d.ph, d.eh, ceil_mode);
  d.ow = hwt_pool2d_out_len(d.w, d.kw, d.sw, d.pw, d.ew, ceil_mode);
  const int64_t xi = d.h * d.w * d.b, yi = d.oh * d.ow * d.b;
  const size_t nx = (size_t)((d.planes - 1) * (xi + gap) + xi);
  const size_t ny = (size_t)((d.planes - 1) * (yi + gap) + yi);
  uint8_t *x = malloc(nx), *y = malloc(ny);
  float *xf = malloc((size_t)(d.planes * xi) * sizeof *xf + 1);
  float *want = malloc((size_t)(d.planes * yi) * sizeof *want + 1);
  for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
  for (int64_t n = 0; n < d.planes; n++)
    for (int64_t i = 0; i < xi; i++) xf[n * xi + i] = (float)x[n * (xi + gap) + i];
  d.isa = HWT_ISA_GENERIC;
  CHECK(hwt_pool2d_ref(&d, xf, want) == HWT_OK, "%s: ref", what);
  for (int nth = 1; nth <= 3; nth++) {
    memset(y, 0xA5, ny);
    for (int k = 0; k < nth; k++)
      hwt_pool2d_u8_hwc_max_part(&d, x, xi + gap, y, yi + gap, (k * 5 + 3) % nth, nth);
    int bad = 0;
    for (int64_t n = 0; n < d.planes; n++)
      for (int64_t i = 0; i < yi; i++)
        bad += (float)y[n * (yi + gap) + i] != want[n * yi + i];
    CHECK(bad == 0, "%s u8 nth=%d b=%lld h=%lld w=%lld k=%lldx%lld s=%lldx%lld ceil=%d: %d wrong",
          what, nth, (long long)d.b, (long long)d.h, (long long)d.w, (long long)d.kh,
          (long long)d.kw, (long long)d.sh, (long long)d.sw, ceil_mode, bad);
  }
  free(x);
  free(y);
  free(xf);
  free(want);
}

static hwt_pool2d_desc geometry(int is_max, int64_t b, int64_t h, int64_t w, int64_t k, int64_t s,
                              int64_t p) {
  hwt_pool2d_desc d;
  memset(&d, 0, sizeof d);
  d.is_max = is_max;
  d.planes = 2, d.b = b, d.h = h, d.w = w;
  d.kh = d.kw = k, d.sh = d.sw = s, d.ph = d.pw = d.eh = d.ew = p;
  return d;
}

int main(void) {
  static const int64_t blocks[] = {1, 3, 8, 16, 24};
  /* named shapes, both modes, every channel block */
  for (int m = 0; m < 2; m++)
    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
      const int64_t b = blocks[bi];
      for (int incl = 0; incl < 2; incl++) {
        hwt_pool2d_desc d = geometry(m, b, 28, 28, 3, 1, 1); /* GoogLeNet's 3x3/1: same size */
        d.include_pad = incl;
        check(d, 0, 0, "3x3/1 pad 1");
        d = geometry(m, b, 13, 17, 3, 2, 1); /* ResNet's stem window */
        d.include_pad = incl;
        check(d, 0, 0, "3x3/2 pad 1");
        if (m == 1 && incl == 0) check_u8(d, 0, 3 * d.h * d.w * d.b, "3x3/2 pad 1");
        check(d, 1, 0, "3x3/2 pad 1 ceil");
        d = geometry(m, b, 7, 1, 3, 1, 1); /* W = 1 */
        d.include_pad = incl;
        check(d, 0, 0, "w=1");
        d = geometry(m, b, 2, 9, 3, 1, 1); /* H below the window, padded */
        d.include_pad = incl;
        check(d, 0, 0, "h<k");
        d = geometry(m, b, 2, 2, 3, 2, 1);
        d.include_pad = incl;
        check(d, 1, 0, "2x2 ceil");
        d = geometry(m, b, 9, 11, 5, 1, 2);
        d.include_pad = incl;
        check(d, 0, 0, "5x5/1 pad 2");
        d = geometry(m, b, 8, 8, 2, 2, 0);
        d.include_pad = incl;
        check(d, 0, 0, "2x2/2");
        d = geometry(m, b, 9, 10, 3, 1, 0); /* stride 1, output narrower */
        d.ew = 1;
        d.include_pad = incl;
        check(d, 0, 0, "3x3/1 end pad");
      }
      /* NaNs, in the same-size path and the strided one */
      if (m == 1) {
        check(geometry(1, b, 9, 12, 3, 1, 1), 0, 37, "nan same-size");
        check(geometry(1, b, 9, 12, 3, 2, 1), 0, 29, "nan strided");
        check(geometry(1, b, 60, 80, 3, 1, 1), 0, 4001, "nan one block");
      }
    }
  /* random geometries */
  for (int rep = 0; rep < 300; rep++) {
    hwt_pool2d_desc d;
    memset(&d, 0, sizeof d);
    d.is_max = rnd_int(0, 1);
    d.include_pad = rnd_int(0, 1);
    d.planes = rnd_int(1, 3);
    d.b = blocks[rnd_int(0, 4)];
    d.h = rnd_int(1, 14);
    d.w = rnd_int(1, 14);
    d.kh = rnd_int(1, 5);
    d.kw = rnd_int(1, 5);
    d.sh = rnd_int(1, 3);
    d.sw = rnd_int(1, 3);
    d.ph = rnd_int(0, (int)d.kh / 2);
    d.pw = rnd_int(0, (int)d.kw / 2);
    d.eh = rep % 3 ? d.ph : rnd_int(0, (int)d.kh / 2);
    d.ew = rep % 3 ? d.pw : rnd_int(0, (int)d.kw / 2);
    if (rep % 5 == 0) d.sh = d.sw = 1, d.ph = (d.kh - 1) / 2, d.pw = (d.kw - 1) / 2,
                      d.eh = d.kh - 1 - d.ph, d.ew = d.kw - 1 - d.pw; /* same size */
    if (2 * d.eh > d.kh || 2 * d.ew > d.kw) d.eh = d.ph, d.ew = d.pw;
    if (d.kh > d.h + d.ph + d.eh || d.kw > d.w + d.pw + d.ew) continue;
    const int ceil_mode = rnd_int(0, 1);
    check(d, ceil_mode, d.is_max && rep % 4 == 0 ? rnd_int(5, 60) : 0, "random");
    if (d.is_max) check_u8(d, ceil_mode, rnd_int(0, 1) * rnd_int(1, 40), "random");
  }
  /* Global averages of NCHW planes (hwt_global_avg_planes): every vector
   * loop and tail length, EfficientNet's 7x7 .. 56x56 planes, against
   * double sums; the output sized exactly. */
  const int64_t lens[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 49, 196, 3136 + 5};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const int64_t n = lens[li], planes = 3;
    float *x = malloc(sizeof(float) * (size_t)(n * planes)), *want = malloc(sizeof(float) * 3);
    for (int64_t i = 0; i < n * planes; i++) x[i] = rnd_val() + (i % 5 == 0 ? 1e3f : 0.0f);
    for (int64_t p = 0; p < planes; p++) {
      double acc = 0.0;
      for (int64_t i = 0; i < n; i++) acc += x[p * n + i];
      want[p] = (float)(acc / (double)n);
    }
    for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
      if (!hwt_isa_supported((hwt_isa)isa)) continue;
      float *y = malloc(sizeof(float) * (size_t)planes);
      hwt_global_avg_planes(x, n, planes, (hwt_isa)isa, y);
      for (int64_t p = 0; p < planes; p++)
        CHECK(fabsf(y[p] - want[p]) <= 1e-6f * (1.0f + fabsf(want[p])),
              "global avg isa=%d n=%lld plane %lld: %g want %g", isa, (long long)n,
              (long long)p, y[p], want[p]);
      free(y);
    }
    free(x), free(want);
  }
  /* refusals */
  hwt_pool2d_desc bad = geometry(1, 8, 4, 4, 3, 1, 2); /* padding over half the window */
  bad.oh = bad.ow = 6;
  CHECK(hwt_pool2d_check(&bad) == HWT_EINVAL, "pad > k/2");
  bad = geometry(1, 8, 4, 4, 3, 1, 1);
  bad.oh = 5, bad.ow = 4;
  CHECK(hwt_pool2d_check(&bad) == HWT_EINVAL, "oh not a window count");
  return check_verdict("ok\n");
}
