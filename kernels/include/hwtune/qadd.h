/* The quantized residual add (issue #43: qadd, ONNX QLinearAdd and the
 * QDQ Add of a quantize_static model) on activations held as integer
 * values in float32 buffers:
 *   y = rne(clamp(((a - za) * sa + (b - zb) * sb) / sy, lo, hi)) + zy
 * each step one float operation in this order (two products, their sum,
 * a true division: no fused multiply-add, no reciprocal), so every variant
 * gives the numpy reference's values bit for bit. The clamp is
 * `v > lo ? v : lo` then `v < hi ? v : hi` (NaN gives lo); rne adds and
 * subtracts 1.5 * 2^23 (|v| <= 2^9 here). Vectorised per ISA variant
 * (kernels/qadd/body.c). */
#ifndef HWTUNE_QADD_H
#define HWTUNE_QADD_H
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef struct {
  float sa, za, sb, zb, sy, zy;
  float lo, hi; /* qmin - zy, qmax - zy */
} hwt_qadd_params;

/* Elements [0, n) of y from a and b, one thread, with isa's variant (the
 * portable one when this CPU or build lacks it). */
HWT_API void hwt_qadd(hwt_isa isa, const hwt_qadd_params *p, const float *a, const float *b,
                      float *y, int64_t n);
/* The same on u8 values held as bytes (a u8 output: lo = -zy, hi = 255 -
 * zy), each through the float operations above: the bytes of
 * hwtune.engine.qlayout's links. */
HWT_API void hwt_qadd_u8(hwt_isa isa, const hwt_qadd_params *p, const uint8_t *a,
                         const uint8_t *b, uint8_t *y, int64_t n);

#endif
