/* The int8 GEMM's output for one element, shared by the per-ISA epilogues
 * (body.c) and the reference (ref.c), so that they round alike. */
#ifndef HWTUNE_QGEMM_EPI_H
#define HWTUNE_QGEMM_EPI_H
#include <stdint.h>
#include "hwtune/qgemm.h"

/* Round to nearest, ties to even, for |v| < 2^22 (the clamped values here
 * are within +-2^9): adding and subtracting 1.5 * 2^23 leaves the float
 * unit in the last place at 1, and the default rounding mode is RNE. Plain
 * float arithmetic, so every variant's loops vectorise it. */
static inline float hwt_q_rne(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* The compensated accumulator c (exact int32) into the output value. lo, hi:
 * the clamp bounds qmin - zy and qmax - zy. */
static inline float hwt_q_value(float c, float scale, float bias, int relu, int requant,
                                float lo, float hi, float zy) {
  float v = c * scale + bias;
  /* A float output keeps a NaN through the ReLU, as ONNX Runtime's Relu; a
     requantised one, which has no NaN, takes 0 (then zy) for it. */
  if (relu) v = requant ? (v > 0.0f ? v : 0.0f) : (v < 0.0f ? 0.0f : v);
  if (!requant) return v;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return hwt_q_rne(v) + zy;
}

/* qmin, qmax as the output type forces them. */
static inline void hwt_q_range(const hwt_qgemm_epi *e, int32_t *qmin, int32_t *qmax) {
  *qmin = e->out == HWT_QOUT_U8 ? 0 : e->out == HWT_QOUT_S8 ? -128 : e->qmin;
  *qmax = e->out == HWT_QOUT_U8 ? 255 : e->out == HWT_QOUT_S8 ? 127 : e->qmax;
}

#endif
