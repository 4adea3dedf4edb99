/* Portable C element-wise variant: runs on any CPU. Exact ops match the
 * reference bit for bit; sigmoid/tanh use the same approximation as the SIMD
 * variants (approx.h) with an exact division. Non-temporal stores have no
 * portable spelling, so the `nt` hint is ignored here. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "approx.h"
#include "eltwise_impl.h"

/* exp(y) for y in [-HWT_EXP_MIN_ARG, 0]. */
static inline float exp_neg(float y) {
  float nf = y * HWT_LOG2E;
  /* Round to nearest without libm: adding 1.5 * 2^23 pushes the fraction out
   * of the mantissa (valid for |nf| < 2^22; here |nf| <= 116). */
  nf = (nf + 12582912.0f) - 12582912.0f;
  float r = y - nf * HWT_LN2_HI;
  r = r - nf * HWT_LN2_LO;
  float p = HWT_EXP_P0;
  p = p * r + HWT_EXP_P1;
  p = p * r + HWT_EXP_P2;
  p = p * r + HWT_EXP_P3;
  p = p * r + HWT_EXP_P4;
  p = p * r + HWT_EXP_P5;
  p = p * (r * r) + r + 1.0f;
  uint32_t bits = (uint32_t)((int32_t)nf + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* c ? a : b on bit patterns: the compiler keeps `?:` on floats as a branch
 * (it will not if-convert FP under the default -ftrapping-math), which
 * blocks vectorisation. Both operands are computed anyway. */
static inline float sel(int c, float a, float b) {
  uint32_t ua, ub, m = 0u - (uint32_t)(c != 0);
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  ua = (ua & m) | (ub & ~m);
  memcpy(&a, &ua, sizeof a);
  return a;
}

static inline float clamp_abs(float x, float lim) {
  float ax = fabsf(x);
  return sel(ax < lim, ax, lim); /* NaN maps to lim; the caller restores it */
}

/* Both activations are written without branches (selects only) so that the
 * compiler can vectorise the loops with the baseline SSE2, and so that
 * random input signs cost no branch mispredictions. */
static inline float sigmoid1(float x) {
  float e = exp_neg(-clamp_abs(x, HWT_EXP_MIN_ARG));
  float s = 1.0f / (1.0f + e);
  float r = sel(x < 0.0f, e * s, s);
  r = sel(x < -HWT_EXP_MIN_ARG, 0.0f, r);
  return sel(x != x, x, r);
}

static inline float tanh1(float x) {
  float ax = fabsf(x), s = ax * ax, p = HWT_TANH_P0;
  p = p * s + HWT_TANH_P1;
  p = p * s + HWT_TANH_P2;
  p = p * s + HWT_TANH_P3;
  p = p * s + HWT_TANH_P4;
  float small = (p * s) * ax + ax;
  float e = exp_neg(-2.0f * clamp_abs(x, 0.5f * HWT_EXP_MIN_ARG));
  float big = 1.0f - 2.0f * e / (1.0f + e);
  float t = copysignf(sel(ax < HWT_TANH_SMALL, small, big), x);
  return sel(x != x, x, t);
}

void hwt_ew_generic(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                    size_t n, int nt) {
  (void)nt;
  switch (op) {
    case HWT_EW_ADD: for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i]; break;
    case HWT_EW_SUB: for (size_t i = 0; i < n; i++) out[i] = a[i] - b[i]; break;
    case HWT_EW_MUL: for (size_t i = 0; i < n; i++) out[i] = a[i] * b[i]; break;
    case HWT_EW_FMA: for (size_t i = 0; i < n; i++) out[i] = fmaf(a[i], b[i], c[i]); break;
    case HWT_EW_SIGMOID: for (size_t i = 0; i < n; i++) out[i] = sigmoid1(a[i]); break;
    case HWT_EW_TANH: for (size_t i = 0; i < n; i++) out[i] = tanh1(a[i]); break;
    case HWT_EW_RELU: for (size_t i = 0; i < n; i++) out[i] = a[i] > 0.0f ? a[i] : 0.0f; break;
    default: break;
  }
}
