/* AVX2+FMA element-wise variant: 8 floats per ymm, 4 vectors per iteration.
 * Heads (until `out` reaches a 32-byte boundary) and tails use vmaskmov,
 * which never touches memory outside [0, n). Only called after runtime
 * dispatch has confirmed AVX2 and FMA. */
#include <immintrin.h>
#include <stdint.h>
#include "approx.h"
#include "eltwise_impl.h"

#define W 8

/* e^y for y in [-HWT_EXP_MIN_ARG, 0]; 2^n is built in the exponent field
 * (n >= -116 keeps it a normal float). */
static inline __m256 exp_neg(__m256 y) {
  __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(HWT_LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(HWT_LN2_HI), y);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(HWT_LN2_LO), r);
  __m256 p = _mm256_set1_ps(HWT_EXP_P0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HWT_EXP_P1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HWT_EXP_P2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HWT_EXP_P3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HWT_EXP_P4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HWT_EXP_P5));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* 1/d for d in [1, 2] by a true division: vrcpps plus one Newton step was
 * measured at 1.5e-7 max error for sigmoid (vs 8.9e-8) and gave
 * sigmoid(0) != 0.5 exactly; vdivps ymm issues every 5 cycles, hidden
 * behind the ~20 other uops per vector. */
static inline __m256 recip(__m256 d) { return _mm256_div_ps(_mm256_set1_ps(1.0f), d); }

static inline __m256 abs_ps(__m256 x) {
  return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

static inline __m256 sigmoid_ps(__m256 x) {
  /* min(|x|, lim) returns lim for NaN: the pipeline stays finite and the
   * input NaN is put back at the end. */
  __m256 e = exp_neg(_mm256_sub_ps(_mm256_setzero_ps(),
                                   _mm256_min_ps(abs_ps(x), _mm256_set1_ps(HWT_EXP_MIN_ARG))));
  __m256 s = recip(_mm256_add_ps(_mm256_set1_ps(1.0f), e));
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-HWT_EXP_MIN_ARG), _CMP_GE_OQ);
  __m256 res = _mm256_and_ps(keep, _mm256_blendv_ps(s, _mm256_mul_ps(e, s), neg));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 tanh_ps(__m256 x) {
  __m256 ax = abs_ps(x);
  __m256 t2 = _mm256_min_ps(_mm256_add_ps(ax, ax), _mm256_set1_ps(HWT_EXP_MIN_ARG));
  __m256 e = exp_neg(_mm256_sub_ps(_mm256_setzero_ps(), t2));
  __m256 q = _mm256_mul_ps(e, recip(_mm256_add_ps(_mm256_set1_ps(1.0f), e)));
  __m256 big = _mm256_fnmadd_ps(q, _mm256_set1_ps(2.0f), _mm256_set1_ps(1.0f));
  __m256 s = _mm256_mul_ps(ax, ax), p = _mm256_set1_ps(HWT_TANH_P0);
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(HWT_TANH_P1));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(HWT_TANH_P2));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(HWT_TANH_P3));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(HWT_TANH_P4));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, s), ax, ax);
  __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(HWT_TANH_SMALL), _CMP_LT_OQ));
  /* t >= 0: OR in the sign of x (also gives tanh(-0) = -0). */
  __m256 res = _mm256_or_ps(t, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __attribute__((always_inline)) __m256 apply(hwt_ew_op op, __m256 a, __m256 b,
                                                          __m256 c) {
  switch (op) {
    case HWT_EW_ADD: return _mm256_add_ps(a, b);
    case HWT_EW_SUB: return _mm256_sub_ps(a, b);
    case HWT_EW_MUL: return _mm256_mul_ps(a, b);
    case HWT_EW_FMA: return _mm256_fmadd_ps(a, b, c);
    case HWT_EW_SIGMOID: return sigmoid_ps(a);
    case HWT_EW_TANH: return tanh_ps(a);
    /* max returns the second operand for NaN and for (-0, +0): exactly the
     * reference's `a > 0 ? a : 0`. */
    case HWT_EW_RELU: return _mm256_max_ps(a, _mm256_setzero_ps());
    default: return a;
  }
}

static inline int arity(hwt_ew_op op) {
  return op == HWT_EW_FMA ? 3 : op <= HWT_EW_MUL ? 2 : 1;
}

/* Lane mask with the first k (0..8) lanes set. */
static inline __m256i first_lanes(size_t k) {
  static const int32_t ramp[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256((const __m256i *)(ramp + 8 - k));
}

static inline __attribute__((always_inline)) void masked(hwt_ew_op op, const float *a,
                                                         const float *b, const float *c,
                                                         float *out, size_t k) {
  __m256i m = first_lanes(k);
  __m256 z = _mm256_setzero_ps();
  __m256 va = _mm256_maskload_ps(a, m);
  __m256 vb = arity(op) >= 2 ? _mm256_maskload_ps(b, m) : z;
  __m256 vc = arity(op) >= 3 ? _mm256_maskload_ps(c, m) : z;
  _mm256_maskstore_ps(out, m, apply(op, va, vb, vc));
}

#define LOAD_APPLY(k)                                                                   \
  apply(op, _mm256_loadu_ps(a + i + (k)*W),                                            \
        arity(op) >= 2 ? _mm256_loadu_ps(b + i + (k)*W) : _mm256_setzero_ps(),          \
        arity(op) >= 3 ? _mm256_loadu_ps(c + i + (k)*W) : _mm256_setzero_ps())

/* `op` is a compile-time constant at every call site below, so each op gets
 * its own loop with the switch folded away. */
static inline __attribute__((always_inline)) void run(hwt_ew_op op, const float *a,
                                                      const float *b, const float *c,
                                                      float *out, size_t n, int nt) {
  uintptr_t addr = (uintptr_t)out;
  if (addr % sizeof(float)) nt = 0; /* a 32-byte boundary is unreachable */
  size_t head = addr % sizeof(float) ? 0 : ((32 - addr % 32) % 32) / sizeof(float);
  if (head > n) head = n;
  if (head) masked(op, a, b, c, out, head);
  size_t i = head;
  if (nt) {
    for (; i + W <= n; i += W) _mm256_stream_ps(out + i, LOAD_APPLY(0));
    _mm_sfence(); /* order the streamed lines before whatever the caller does next */
  } else {
    for (; i + 4 * W <= n; i += 4 * W) {
      __m256 r0 = LOAD_APPLY(0), r1 = LOAD_APPLY(1), r2 = LOAD_APPLY(2), r3 = LOAD_APPLY(3);
      _mm256_storeu_ps(out + i, r0);
      _mm256_storeu_ps(out + i + W, r1);
      _mm256_storeu_ps(out + i + 2 * W, r2);
      _mm256_storeu_ps(out + i + 3 * W, r3);
    }
    for (; i + W <= n; i += W) _mm256_storeu_ps(out + i, LOAD_APPLY(0));
  }
  if (i < n) masked(op, a + i, b ? b + i : 0, c ? c + i : 0, out + i, n - i);
}

void hwt_ew_avx2(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                 size_t n, int nt) {
  switch (op) {
    case HWT_EW_ADD: run(HWT_EW_ADD, a, b, c, out, n, nt); break;
    case HWT_EW_SUB: run(HWT_EW_SUB, a, b, c, out, n, nt); break;
    case HWT_EW_MUL: run(HWT_EW_MUL, a, b, c, out, n, nt); break;
    case HWT_EW_FMA: run(HWT_EW_FMA, a, b, c, out, n, nt); break;
    case HWT_EW_SIGMOID: run(HWT_EW_SIGMOID, a, b, c, out, n, nt); break;
    case HWT_EW_TANH: run(HWT_EW_TANH, a, b, c, out, n, nt); break;
    case HWT_EW_RELU: run(HWT_EW_RELU, a, b, c, out, n, nt); break;
    default: break;
  }
}
