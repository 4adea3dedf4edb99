/* The vector vocabulary that every kernel family's body is written in, mapped
 * once per ISA variant (ggml's simd-mappings idea). A body source includes
 * this header and the build compiles it once per variant (kernels.cmake,
 * HWTUNE_KERNEL_BODIES), defining HWT_VEC_AVX512 or HWT_VEC_AVX2 together with
 * that ISA's -m flags; without either define the portable mapping is used.
 *
 * Per variant:
 *   hv_f32    HV_W floats (portable: one float; the compiler vectorises the
 *             plain loops of a body with the baseline SIMD of the target)
 *   hv_mask   a lane predicate (compares, masked loads and stores)
 *   HV_ISA    the hwt_isa value; HV_REGS the vector registers a body may plan
 *             its register blocks with
 *   HV_BY_ISA(generic, avx2, avx512)   a per-variant parameter of a body
 *   HWT_VARIANT(name)  name_<variant>: the one symbol a body exports per
 *             variant, registered in kernels/common/variants.c
 *
 * Semantics shared by every mapping (bodies rely on them):
 *   hv_min(a, b) = a < b ? a : b and hv_max(a, b) = a > b ? a : b, so the
 *   second operand wins for NaN and for (-0, +0), as x86 minps/maxps do;
 *   compares are ordered (false when either side is NaN);
 *   hv_fmadd(a, b, c) = a*b + c, fused where the ISA has FMA (the portable
 *   mapping rounds twice: a libm fmaf per element would be far slower);
 *   hv_fma_exact rounds once everywhere;
 *   masked loads and stores never touch memory outside the enabled lanes. */
#ifndef HWTUNE_VEC_H
#define HWTUNE_VEC_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "hwtune/isa.h"

#define HV_AI static inline __attribute__((always_inline))

#if defined(HWT_VEC_AVX512)
/* ------------------------------------------------------------ AVX-512 */
#if !defined(__AVX512F__) || !defined(__AVX512DQ__)
#error "HWT_VEC_AVX512 needs the AVX-512 F/BW/VL/DQ compile flags"
#endif
#include <immintrin.h>
#define HV_W 16
#define HV_REGS 32
#define HV_ISA HWT_ISA_AVX512
#define HV_BY_ISA(generic, avx2, avx512) (avx512)
#define HWT_VARIANT(name) name##_avx512
#define HV_MM(op) _mm512_##op
typedef __m512 hv_f32;
typedef __mmask16 hv_mask;

HV_AI hv_mask hv_first(long k) {
  return k >= 16 ? (hv_mask)0xffff : k <= 0 ? (hv_mask)0 : (hv_mask)((1u << k) - 1u);
}
HV_AI hv_f32 hv_load_mask(const float *p, hv_mask m) { return _mm512_maskz_loadu_ps(m, p); }
HV_AI void hv_store_mask(float *p, hv_mask m, hv_f32 v) { _mm512_mask_storeu_ps(p, m, v); }
/* Lane i = base[i * stride] for the enabled lanes, 0 elsewhere. */
HV_AI hv_f32 hv_gather_mask(const float *base, long stride, hv_mask m) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int)stride));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base, 4);
}
HV_AI hv_f32 hv_abs(hv_f32 a) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
/* t with the sign bit of x OR'ed in: copysign(t, x) for t >= 0. */
HV_AI hv_f32 hv_or_sign(hv_f32 t, hv_f32 x) {
  return _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(t),
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}
/* Rounding to an integral float, the mode an immediate (hv_round below). */
#define HV_ROUND_PS(a, mode) _mm512_roundscale_ps(a, mode)
/* p * 2^n for integral n with 2^n a normal float: vscalefps, no integer
 * exponent arithmetic. */
HV_AI hv_f32 hv_ldexp(hv_f32 p, hv_f32 n) { return _mm512_scalef_ps(p, n); }
/* 2^n from t = a + HV_EXP2_MAGIC, the sum that rounded a to n: t's low
 * mantissa bits hold n + 127, shifted into the exponent field. */
HV_AI hv_f32 hv_exp2_of_magic(hv_f32 t) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
}
/* 1/d for d >= 1 (sigmoid's 1 + e^-x, tanh's 1 + e in [1, 2]): the 2^-14
 * estimate plus one Newton step (error 2^-28 before rounding) is far
 * cheaper than vdivps (one per 10 cycles). */
HV_AI hv_f32 hv_recip12(hv_f32 d) {
  __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}
HV_AI hv_mask hv_lt(hv_f32 a, hv_f32 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
HV_AI hv_mask hv_gt(hv_f32 a, hv_f32 b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
HV_AI hv_mask hv_ge(hv_f32 a, hv_f32 b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
HV_AI hv_mask hv_isnan(hv_f32 a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
HV_AI hv_mask hv_mask_or(hv_mask a, hv_mask b) { return (hv_mask)(a | b); }
/* m ? a : b per lane */
HV_AI hv_f32 hv_select(hv_mask m, hv_f32 a, hv_f32 b) { return _mm512_mask_blend_ps(m, b, a); }
/* m ? a : 0 per lane */
HV_AI hv_f32 hv_keep(hv_mask m, hv_f32 a) { return _mm512_maskz_mov_ps(m, a); }
HV_AI float hv_reduce_add(hv_f32 v) { return _mm512_reduce_add_ps(v); }

#elif defined(HWT_VEC_AVX2)
/* ------------------------------------------------------------ AVX2 + FMA */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "HWT_VEC_AVX2 needs -mavx2 -mfma"
#endif
#include <immintrin.h>
#define HV_W 8
#define HV_REGS 16
#define HV_ISA HWT_ISA_AVX2
#define HV_BY_ISA(generic, avx2, avx512) (avx2)
#define HWT_VARIANT(name) name##_avx2
#define HV_MM(op) _mm256_##op
typedef __m256 hv_f32;
typedef __m256 hv_mask; /* all-ones lanes: what compares give and blendv/vmaskmov read */

HV_AI hv_mask hv_first(long k) {
  int lanes = k < 0 ? 0 : k > 8 ? 8 : (int)k;
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
HV_AI hv_f32 hv_load_mask(const float *p, hv_mask m) {
  return _mm256_maskload_ps(p, _mm256_castps_si256(m));
}
HV_AI void hv_store_mask(float *p, hv_mask m, hv_f32 v) {
  _mm256_maskstore_ps(p, _mm256_castps_si256(m), v);
}
HV_AI hv_f32 hv_gather_mask(const float *base, long stride, hv_mask m) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32((int)stride));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx, m, 4);
}
HV_AI hv_f32 hv_abs(hv_f32 a) {
  return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
HV_AI hv_f32 hv_or_sign(hv_f32 t, hv_f32 x) {
  return _mm256_or_ps(t, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
}
#define HV_ROUND_PS(a, mode) _mm256_round_ps(a, mode)
/* 2^n built in the exponent field (n >= -126 keeps it a normal float). */
HV_AI hv_f32 hv_ldexp(hv_f32 p, hv_f32 n) {
  __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
HV_AI hv_f32 hv_exp2_of_magic(hv_f32 t) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
}
/* 1/d for d >= 1 by a true division: vrcpps plus one Newton step was
 * measured at 1.5e-7 max error for sigmoid (vs 8.9e-8) and gave
 * sigmoid(0) != 0.5 exactly; vdivps ymm issues every 5 cycles, hidden
 * behind the ~20 other uops per vector. */
HV_AI hv_f32 hv_recip12(hv_f32 d) { return _mm256_div_ps(_mm256_set1_ps(1.0f), d); }
HV_AI hv_mask hv_lt(hv_f32 a, hv_f32 b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
HV_AI hv_mask hv_gt(hv_f32 a, hv_f32 b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
HV_AI hv_mask hv_ge(hv_f32 a, hv_f32 b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
HV_AI hv_mask hv_isnan(hv_f32 a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
HV_AI hv_mask hv_mask_or(hv_mask a, hv_mask b) { return _mm256_or_ps(a, b); }
HV_AI hv_f32 hv_select(hv_mask m, hv_f32 a, hv_f32 b) { return _mm256_blendv_ps(b, a, m); }
HV_AI hv_f32 hv_keep(hv_mask m, hv_f32 a) { return _mm256_and_ps(m, a); }
HV_AI float hv_reduce_add(hv_f32 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

#else
/* ------------------------------------------------------------ portable C */
/* One float per "vector": bodies stay plain loops, which the compiler
 * vectorises for the target's baseline SIMD (SSE2 on x86-64, NEON on
 * AArch64). Selects work on bit patterns because the compiler keeps `?:` on
 * floats as a branch (it will not if-convert FP under the default
 * -ftrapping-math), which blocks vectorisation; both sides are computed
 * anyway. Non-temporal stores have no portable spelling: plain stores. */
#define HV_W 1
#define HV_REGS 16
#define HV_ISA HWT_ISA_GENERIC
#define HV_BY_ISA(generic, avx2, avx512) (generic)
#define HWT_VARIANT(name) name##_generic
typedef float hv_f32;
typedef int hv_mask;

HV_AI hv_f32 hv_zero(void) { return 0.0f; }
HV_AI hv_f32 hv_set1(float x) { return x; }
HV_AI hv_f32 hv_load(const float *p) { return *p; }
HV_AI void hv_store(float *p, hv_f32 v) { *p = v; }
HV_AI void hv_stream(float *p, hv_f32 v) { *p = v; }
HV_AI void hv_stream_fence(void) {}
HV_AI hv_mask hv_first(long k) { return k > 0; }
HV_AI hv_f32 hv_load_mask(const float *p, hv_mask m) { return m ? *p : 0.0f; }
HV_AI void hv_store_mask(float *p, hv_mask m, hv_f32 v) {
  if (m) *p = v;
}
HV_AI hv_f32 hv_gather_mask(const float *base, long stride, hv_mask m) {
  (void)stride;
  return m ? *base : 0.0f;
}
HV_AI hv_f32 hv_add(hv_f32 a, hv_f32 b) { return a + b; }
HV_AI hv_f32 hv_sub(hv_f32 a, hv_f32 b) { return a - b; }
HV_AI hv_f32 hv_mul(hv_f32 a, hv_f32 b) { return a * b; }
HV_AI hv_f32 hv_div(hv_f32 a, hv_f32 b) { return a / b; }
HV_AI hv_f32 hv_fmadd(hv_f32 a, hv_f32 b, hv_f32 c) { return a * b + c; }
HV_AI hv_f32 hv_fnmadd(hv_f32 a, hv_f32 b, hv_f32 c) { return c - a * b; }
HV_AI hv_f32 hv_fma_exact(hv_f32 a, hv_f32 b, hv_f32 c) { return fmaf(a, b, c); }
HV_AI hv_f32 hv_select(hv_mask m, hv_f32 a, hv_f32 b) {
  uint32_t ua, ub, k = 0u - (uint32_t)(m != 0);
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  ua = (ua & k) | (ub & ~k);
  memcpy(&a, &ua, sizeof a);
  return a;
}
HV_AI hv_f32 hv_keep(hv_mask m, hv_f32 a) { return hv_select(m, a, 0.0f); }
/* Spellings picked by what GCC 12 vectorises (32K floats, 1 thread, Zen 3):
 * hv_max as `?:` gives relu 3.0 us vs 5.1 us through the bit select; the
 * same `?:` in hv_min kept sigmoid's loop scalar (267 us vs 73 us). */
HV_AI hv_f32 hv_min(hv_f32 a, hv_f32 b) { return hv_select(a < b, a, b); }
HV_AI hv_f32 hv_max(hv_f32 a, hv_f32 b) { return a > b ? a : b; }
HV_AI hv_f32 hv_abs(hv_f32 a) { return fabsf(a); }
HV_AI hv_f32 hv_or_sign(hv_f32 t, hv_f32 x) {
  uint32_t ut, ux;
  memcpy(&ut, &t, sizeof ut);
  memcpy(&ux, &x, sizeof ux);
  ut |= ux & 0x80000000u;
  memcpy(&t, &ut, sizeof t);
  return t;
}
/* Round to nearest without libm: adding 1.5 * 2^23 pushes the fraction out
 * of the mantissa (valid for |a| < 2^22). */
HV_AI hv_f32 hv_round(hv_f32 a) { return (a + 12582912.0f) - 12582912.0f; }
/* libm's: exact for every float (NaN, infinities and -0 kept). */
HV_AI hv_f32 hv_floor(hv_f32 a) { return floorf(a); }
HV_AI hv_f32 hv_ceil(hv_f32 a) { return ceilf(a); }
HV_AI hv_f32 hv_sqrt(hv_f32 a) { return sqrtf(a); }
HV_AI hv_f32 hv_ldexp(hv_f32 p, hv_f32 n) {
  uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
HV_AI hv_f32 hv_exp2_of_magic(hv_f32 t) {
  uint32_t bits;
  memcpy(&bits, &t, sizeof bits);
  bits <<= 23;
  memcpy(&t, &bits, sizeof t);
  return t;
}
HV_AI hv_f32 hv_recip12(hv_f32 d) { return 1.0f / d; }
HV_AI hv_mask hv_lt(hv_f32 a, hv_f32 b) { return a < b; }
HV_AI hv_mask hv_gt(hv_f32 a, hv_f32 b) { return a > b; }
HV_AI hv_mask hv_ge(hv_f32 a, hv_f32 b) { return a >= b; }
HV_AI hv_mask hv_isnan(hv_f32 a) { return a != a; }
HV_AI hv_mask hv_mask_or(hv_mask a, hv_mask b) { return a | b; }
HV_AI float hv_reduce_add(hv_f32 v) { return v; }
#endif

#if defined(HV_MM)
/* What AVX2 and AVX-512 spell alike but for the _mm256_/_mm512_ prefix. */
HV_AI hv_f32 hv_zero(void) { return HV_MM(setzero_ps)(); }
HV_AI hv_f32 hv_set1(float x) { return HV_MM(set1_ps)(x); }
HV_AI hv_f32 hv_load(const float *p) { return HV_MM(loadu_ps)(p); }
HV_AI void hv_store(float *p, hv_f32 v) { HV_MM(storeu_ps)(p, v); }
HV_AI void hv_stream(float *p, hv_f32 v) { HV_MM(stream_ps)(p, v); }
HV_AI void hv_stream_fence(void) { _mm_sfence(); }
HV_AI hv_f32 hv_add(hv_f32 a, hv_f32 b) { return HV_MM(add_ps)(a, b); }
HV_AI hv_f32 hv_sub(hv_f32 a, hv_f32 b) { return HV_MM(sub_ps)(a, b); }
HV_AI hv_f32 hv_mul(hv_f32 a, hv_f32 b) { return HV_MM(mul_ps)(a, b); }
HV_AI hv_f32 hv_div(hv_f32 a, hv_f32 b) { return HV_MM(div_ps)(a, b); }
HV_AI hv_f32 hv_sqrt(hv_f32 a) { return HV_MM(sqrt_ps)(a); } /* correctly rounded, as sqrtf */
HV_AI hv_f32 hv_fmadd(hv_f32 a, hv_f32 b, hv_f32 c) { return HV_MM(fmadd_ps)(a, b, c); }
HV_AI hv_f32 hv_fnmadd(hv_f32 a, hv_f32 b, hv_f32 c) { return HV_MM(fnmadd_ps)(a, b, c); }
HV_AI hv_f32 hv_fma_exact(hv_f32 a, hv_f32 b, hv_f32 c) { return HV_MM(fmadd_ps)(a, b, c); }
HV_AI hv_f32 hv_min(hv_f32 a, hv_f32 b) { return HV_MM(min_ps)(a, b); }
HV_AI hv_f32 hv_max(hv_f32 a, hv_f32 b) { return HV_MM(max_ps)(a, b); }
HV_AI hv_f32 hv_round(hv_f32 a) {
  return HV_ROUND_PS(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
HV_AI hv_f32 hv_floor(hv_f32 a) {
  return HV_ROUND_PS(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
HV_AI hv_f32 hv_ceil(hv_f32 a) {
  return HV_ROUND_PS(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
#endif

/* 1.5 * 2^23 + 127: a + HV_EXP2_MAGIC rounds a (|a| < 2^22) to the nearest
 * integer n and leaves n + 127 in the sum's low mantissa bits, from which
 * hv_exp2_of_magic makes 2^n (n + 127 in [1, 254]). */
#define HV_EXP2_MAGIC 12583039.0f

/* Lane-wise scalar function, for ops with no vector form (fmod). */
HV_AI hv_f32 hv_map2(float (*fn)(float, float), hv_f32 a, hv_f32 b) {
#if HV_W == 1
  return fn(a, b);
#else
  float x[HV_W], y[HV_W];
  hv_store(x, a);
  hv_store(y, b);
  for (int i = 0; i < HV_W; i++) x[i] = fn(x[i], y[i]);
  return hv_load(x);
#endif
}

#endif
