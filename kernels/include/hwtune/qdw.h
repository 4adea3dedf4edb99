/* Depthwise int8 convolution on u8 channels-last images (issue #43): the
 * depthwise layers of a quantized MobileNet / EfficientNet between the
 * int8 1x1 convs' byte links (hwtune.engine.qlayout), without the float
 * round trip (dequantize, float depthwise conv, quantize) they took before.
 *
 * y[p][c] = epilogue(sum over the window's taps inside the image of
 *                    (x[q][c] - za) * w[tap][c])
 * with the int8 GEMM's epilogue (kernels/qgemm/epi.h): the sum (an exact
 * integer: |x - za| <= 255, |w| <= 255 and up to 64 taps stay below 2^24,
 * so float FMAs compute it exactly) plus bias_i, times scale[c], plus
 * bias[c], ReLU, then (requant) clamped to [qmin - zy, qmax - zy], rounded
 * to nearest even and + zy. Padding taps are skipped: a padded value is the
 * zero point, which contributes 0. */
#ifndef HWTUNE_QDW_H
#define HWTUNE_QDW_H
#include <stdint.h>
#include "hwtune/isa.h"

typedef struct {
  int C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW;
  int za;                /* the activation zero point (u8) */
  const float *w;        /* [KH * KW][cp] weights minus their zero points, cp = hwt_qdw_cp(C) */
  const int32_t *bias_i; /* [C] or NULL: integers below 2^24 added to the sum */
  const float *scale;    /* [C] */
  const float *bias;     /* [C] or NULL */
  int relu, requant;     /* requant: u8 values (qmin 0, qmax 255 around zy) */
  int zy;                /* requant's zero point */
  int out_u8;            /* 1: y is u8 channels-last [OH * OW][C]; 0: float planes
                            [C][OH * OW] (requantised values as floats, or the
                            dequantized floats without requant) */
} hwt_qdw_desc;

/* The weights' channel stride: C rounded up to a whole vector of the widest
 * variant (16 floats). */
HWT_API int hwt_qdw_cp(int C);

/* Floats of workspace hwt_qdw_rows needs (a row of float outputs when
 * !out_u8, then bias_i as floats). */
HWT_API int64_t hwt_qdw_ws_floats(const hwt_qdw_desc *d);

/* Output rows [oh0, oh1) of one image: x is that image's u8 channels-last
 * input from input row x_row0 on (x holds rows x_row0 .. the last row the
 * output rows read), y the image's output (out_u8: bytes, else floats). */
HWT_API void hwt_qdw_rows(const hwt_qdw_desc *d, hwt_isa isa, const uint8_t *x, int x_row0,
                          void *y, int oh0, int oh1, float *ws);

#endif
