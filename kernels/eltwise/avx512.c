/* AVX-512 element-wise variant: 16 floats per zmm, 4 vectors per iteration.
 * Heads (until `out` reaches a 64-byte line) and tails use masked loads and
 * stores, which never touch memory outside [0, n). Only called after runtime
 * dispatch has confirmed AVX-512 F/BW/VL/DQ. */
#include <immintrin.h>
#include <stdint.h>
#include "approx.h"
#include "eltwise_impl.h"

#define W 16

/* e^y for y in [-HWT_EXP_MIN_ARG, 0]; vscalefps applies 2^n without integer
 * exponent arithmetic. */
static inline __m512 exp_neg(__m512 y) {
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(HWT_LOG2E)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(HWT_LN2_HI), y);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(HWT_LN2_LO), r);
  __m512 p = _mm512_set1_ps(HWT_EXP_P0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HWT_EXP_P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HWT_EXP_P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HWT_EXP_P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HWT_EXP_P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HWT_EXP_P5));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* 1/d for d in [1, 2]: the 2^-14 estimate plus one Newton step (error
 * 2^-28 before rounding) is far cheaper than vdivps (one per 10 cycles). */
static inline __m512 recip12(__m512 d) {
  __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}

static inline __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

static inline __m512 sigmoid_ps(__m512 x) {
  /* min(|x|, lim) returns lim for NaN: the pipeline stays finite and the
   * input NaN is put back at the end. */
  __m512 e = exp_neg(_mm512_sub_ps(_mm512_setzero_ps(),
                                   _mm512_min_ps(abs_ps(x), _mm512_set1_ps(HWT_EXP_MIN_ARG))));
  __m512 s = recip12(_mm512_add_ps(_mm512_set1_ps(1.0f), e));
  __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-HWT_EXP_MIN_ARG), _CMP_GE_OQ);
  __m512 res = _mm512_maskz_mov_ps(keep, _mm512_mask_mul_ps(s, neg, e, s));
  return _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

static inline __m512 tanh_ps(__m512 x) {
  __m512 ax = abs_ps(x);
  __m512 t2 = _mm512_min_ps(_mm512_add_ps(ax, ax), _mm512_set1_ps(HWT_EXP_MIN_ARG));
  __m512 e = exp_neg(_mm512_sub_ps(_mm512_setzero_ps(), t2));
  __m512 q = _mm512_mul_ps(e, recip12(_mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  __m512 big = _mm512_fnmadd_ps(q, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f));
  __m512 s = _mm512_mul_ps(ax, ax), p = _mm512_set1_ps(HWT_TANH_P0);
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(HWT_TANH_P1));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(HWT_TANH_P2));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(HWT_TANH_P3));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(HWT_TANH_P4));
  __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, s), ax, ax);
  __mmask16 is_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(HWT_TANH_SMALL), _CMP_LT_OQ);
  __m512 t = _mm512_mask_mov_ps(big, is_small, small);
  /* t >= 0: OR in the sign of x (also gives tanh(-0) = -0). */
  __m512 res = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(t),
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
  return _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

static inline __attribute__((always_inline)) __m512 apply(hwt_ew_op op, __m512 a, __m512 b,
                                                          __m512 c) {
  switch (op) {
    case HWT_EW_ADD: return _mm512_add_ps(a, b);
    case HWT_EW_SUB: return _mm512_sub_ps(a, b);
    case HWT_EW_MUL: return _mm512_mul_ps(a, b);
    case HWT_EW_FMA: return _mm512_fmadd_ps(a, b, c);
    case HWT_EW_SIGMOID: return sigmoid_ps(a);
    case HWT_EW_TANH: return tanh_ps(a);
    /* max returns the second operand for NaN and for (-0, +0): exactly the
     * reference's `a > 0 ? a : 0`. */
    case HWT_EW_RELU: return _mm512_max_ps(a, _mm512_setzero_ps());
    default: return a;
  }
}

static inline int arity(hwt_ew_op op) {
  return op == HWT_EW_FMA ? 3 : op <= HWT_EW_MUL ? 2 : 1;
}

static inline __attribute__((always_inline)) void masked(hwt_ew_op op, const float *a,
                                                         const float *b, const float *c,
                                                         float *out, __mmask16 m) {
  __m512 z = _mm512_setzero_ps();
  __m512 va = _mm512_maskz_loadu_ps(m, a);
  __m512 vb = arity(op) >= 2 ? _mm512_maskz_loadu_ps(m, b) : z;
  __m512 vc = arity(op) >= 3 ? _mm512_maskz_loadu_ps(m, c) : z;
  _mm512_mask_storeu_ps(out, m, apply(op, va, vb, vc));
}

#define LOAD_APPLY(k)                                                                   \
  apply(op, _mm512_loadu_ps(a + i + (k)*W),                                            \
        arity(op) >= 2 ? _mm512_loadu_ps(b + i + (k)*W) : _mm512_setzero_ps(),          \
        arity(op) >= 3 ? _mm512_loadu_ps(c + i + (k)*W) : _mm512_setzero_ps())

/* `op` is a compile-time constant at every call site below, so each op gets
 * its own loop with the switch folded away. */
static inline __attribute__((always_inline)) void run(hwt_ew_op op, const float *a,
                                                      const float *b, const float *c,
                                                      float *out, size_t n, int nt) {
  uintptr_t addr = (uintptr_t)out;
  if (addr % sizeof(float)) nt = 0; /* a line boundary is unreachable */
  size_t head = addr % sizeof(float) ? 0 : ((64 - addr % 64) % 64) / sizeof(float);
  if (head > n) head = n;
  if (head) masked(op, a, b, c, out, (__mmask16)((1u << head) - 1));
  size_t i = head;
  if (nt) {
    for (; i + W <= n; i += W) _mm512_stream_ps(out + i, LOAD_APPLY(0));
    _mm_sfence(); /* order the streamed lines before whatever the caller does next */
  } else {
    for (; i + 4 * W <= n; i += 4 * W) {
      __m512 r0 = LOAD_APPLY(0), r1 = LOAD_APPLY(1), r2 = LOAD_APPLY(2), r3 = LOAD_APPLY(3);
      _mm512_storeu_ps(out + i, r0);
      _mm512_storeu_ps(out + i + W, r1);
      _mm512_storeu_ps(out + i + 2 * W, r2);
      _mm512_storeu_ps(out + i + 3 * W, r3);
    }
    for (; i + W <= n; i += W) _mm512_storeu_ps(out + i, LOAD_APPLY(0));
  }
  if (i < n) masked(op, a + i, b ? b + i : 0, c ? c + i : 0, out + i,
                    (__mmask16)((1u << (n - i)) - 1));
}

void hwt_ew_avx512(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
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
