/* hwt_qdw_rows (hwtune/qdw.h) per ISA variant this CPU runs against the
 * definition written out here (integer sums, then the int8 GEMM's
 * epilogue one float operation at a time): 3x3 / 5x5 / 1x3 windows,
 * strides 1 and 2, dilation, asymmetric shapes, channel counts that fill
 * 16 / 8 lanes or neither, u8 and float outputs, bias_i and bias, ReLU,
 * inputs starting at a later row (x_row0) and row ranges. Bit for bit;
 * exact buffers, so ASan catches a read or write past them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/isa.h"
#include "hwtune/qdw.h"
#include "check.h"

static unsigned rnd_state = 4242u;
static int rnd(int lo, int hi) { /* inclusive */
  rnd_state = rnd_state * 1664525u + 1013904223u;
  return lo + (int)((rnd_state >> 8) % (unsigned)(hi - lo + 1));
}

static float rne(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* One output value of pixel (oh, ow), channel c. */
static float want_one(const hwt_qdw_desc *d, const uint8_t *x, int oh, int ow, int c) {
  const int cp = hwt_qdw_cp(d->C);
  int32_t acc = 0;
  for (int r = 0; r < d->KH; r++)
    for (int s = 0; s < d->KW; s++) {
      const int ih = oh * d->SH - d->PT + r * d->DH, iw = ow * d->SW - d->PL + s * d->DW;
      if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
      acc += ((int32_t)x[((size_t)ih * d->W + iw) * d->C + c] - d->za) *
             (int32_t)d->w[(size_t)(r * d->KW + s) * cp + c];
    }
  if (d->bias_i) acc += d->bias_i[c];
  float v = (float)acc * d->scale[c];
  if (d->bias) v = v + d->bias[c];
  if (d->relu) v = d->requant ? (v > 0.0f ? v : 0.0f) : (v < 0.0f ? 0.0f : v); /* hwt_q_value */
  if (!d->requant) return v;
  const float lo = (float)(0 - d->zy), hi = (float)(255 - d->zy);
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return rne(v) + (float)d->zy;
}

static void one_case(hwt_isa isa, int C, int H, int W, int K1, int K2, int S, int P, int D,
                     int out_u8, int relu, int with_bias) {
  hwt_qdw_desc d = {0};
  d.C = C, d.H = H, d.W = W, d.KH = K1, d.KW = K2, d.SH = S, d.SW = S, d.PT = P, d.PL = P;
  d.DH = D, d.DW = D;
  d.OH = (H + 2 * P - (K1 - 1) * D - 1) / S + 1;
  d.OW = (W + 2 * P - (K2 - 1) * D - 1) / S + 1;
  if (d.OH < 1 || d.OW < 1) return;
  const int cp = hwt_qdw_cp(C), taps = K1 * K2;
  float *w = calloc((size_t)taps * cp, sizeof(float)), *scale = malloc(sizeof(float) * C);
  float *bias = malloc(sizeof(float) * C);
  int32_t *bias_i = malloc(sizeof(int32_t) * C);
  uint8_t *x = malloc((size_t)H * W * C);
  for (int t = 0; t < taps; t++)
    for (int c = 0; c < C; c++) w[(size_t)t * cp + c] = (float)rnd(-130, 130);
  for (int c = 0; c < C; c++) {
    scale[c] = (float)rnd(1, 400) * 1e-5f;
    bias[c] = (float)rnd(-300, 300) * 0.01f;
    bias_i[c] = rnd(-5000, 5000);
  }
  for (size_t i = 0; i < (size_t)H * W * C; i++) x[i] = (uint8_t)rnd(0, 255);
  d.za = rnd(0, 255), d.zy = rnd(0, 255), d.w = w, d.scale = scale;
  d.bias = with_bias ? bias : NULL, d.bias_i = with_bias ? bias_i : NULL;
  d.relu = relu, d.requant = out_u8 || rnd(0, 1), d.out_u8 = out_u8;
  float *ws = malloc(sizeof(float) * (size_t)hwt_qdw_ws_floats(&d));
  const size_t n = (size_t)d.OH * d.OW * C;
  void *y = malloc(out_u8 ? n : n * sizeof(float));
  /* rows [oh0, oh1) from an input that starts at the first row they read */
  const int oh0 = d.OH > 2 ? 1 : 0, oh1 = d.OH;
  int r0 = oh0 * S - P;
  r0 = r0 < 0 ? 0 : r0;
  const uint8_t *xs = x + (size_t)r0 * W * C;
  uint8_t *xcopy = malloc((size_t)(H - r0) * W * C); /* exactly the rows from r0 */
  memcpy(xcopy, xs, (size_t)(H - r0) * W * C);
  hwt_qdw_rows(&d, isa, xcopy, r0, y, oh0, oh1, ws);
  int bad = 0;
  for (int oh = oh0; oh < oh1 && !bad; oh++)
    for (int ow = 0; ow < d.OW && !bad; ow++)
      for (int c = 0; c < C; c++) {
        const float want = want_one(&d, x, oh, ow, c);
        const float got = out_u8 ? (float)((uint8_t *)y)[((size_t)oh * d.OW + ow) * C + c]
                                 : ((float *)y)[(size_t)c * d.OH * d.OW + (size_t)oh * d.OW + ow];
        if (got != want) {
          fprintf(stderr, "isa %d C%d H%d W%d K%dx%d S%d P%d D%d u8 %d: (%d,%d,%d) got %g want %g\n",
                  (int)isa, C, H, W, K1, K2, S, P, D, out_u8, oh, ow, c, got, want);
          bad = 1;
          break;
        }
      }
  CHECK(!bad);
  free(w), free(scale), free(bias), free(bias_i), free(x), free(xcopy), free(ws), free(y);
}

int main(void) {
  static const int shapes[][7] = {  /* C H W K1 K2 S P, dilation below */
      {16, 9, 11, 3, 3, 1, 1}, {32, 12, 12, 3, 3, 2, 1}, {24, 14, 13, 5, 5, 2, 2},
      {8, 7, 7, 5, 5, 1, 2},   {20, 5, 6, 3, 3, 1, 1},   {48, 3, 30, 1, 3, 1, 1},
      {64, 8, 8, 3, 3, 1, 0},  {3, 6, 5, 3, 3, 2, 1},    {16, 2, 2, 3, 3, 1, 1}};
  int cases = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
      for (int v = 0; v < 4; v++) {
        const int *s = shapes[k];
        one_case((hwt_isa)isa, s[0], s[1], s[2], s[3], s[4], s[5], s[6], v == 3 ? 2 : 1,
                 v & 1, v >> 1, v != 1);
        cases++;
      }
  }
  return check_verdict("test_qdw: %d cases", cases);
}
