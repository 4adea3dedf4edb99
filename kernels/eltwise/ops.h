/* The element-wise ops of hwtune/eltwise_ops.def: per op, its scalar
 * reference (the contract and the test oracle, run by ref.c) next to its
 * vector body over kernels/common/vec.h (compiled into every variant by
 * body.c). Signatures: `double name_ref(float a, float b, float c, const
 * float *attr)` and `hv_f32 name_vec(hv_f32 a, hv_f32 b, hv_f32 c, const
 * hv_f32 *attr)`; operands an op does not read are zero, attr[i] holds
 * attribute i of the row (broadcast to every lane in the vector body). A
 * reference returns the float result of an exact op, and the value in
 * double of an approximated one (the oracle rounds it to float; the error
 * tests measure against the double).
 *
 * Exact ops compute the reference's expression with the same roundings, so
 * every variant matches it bit for bit, special values included; the rows'
 * err column is 0 for them. */
#ifndef HWTUNE_ELTWISE_OPS_H
#define HWTUNE_ELTWISE_OPS_H
#include <float.h>
#include <math.h>
#include "../common/vec.h"
#include "approx.h"

#define OP_REF static inline double
#define OP_VEC HV_AI hv_f32

/* add (and the fold of sum), sub, mul, div: one IEEE operation. */
OP_REF add_ref(float a, float b, float c, const float *at) { return a + b; }
OP_VEC add_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_add(a, b); }
OP_REF sub_ref(float a, float b, float c, const float *at) { return a - b; }
OP_VEC sub_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_sub(a, b); }
OP_REF mul_ref(float a, float b, float c, const float *at) { return a * b; }
OP_VEC mul_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_mul(a, b); }
OP_REF div_ref(float a, float b, float c, const float *at) { return a / b; }
OP_VEC div_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_div(a, b); }

/* fma: a * b + c rounded once (fmaf in every variant without the instruction). */
OP_REF fma_ref(float a, float b, float c, const float *at) { return fmaf(a, b, c); }
OP_VEC fma_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_fma_exact(a, b, c); }

/* minimum/maximum as numpy computes them: NaN from either side propagates;
 * between -0 and +0 the second operand wins. */
OP_REF minimum_ref(float a, float b, float c, const float *at) {
  return (a < b || isnan(a)) ? a : b;
}
OP_VEC minimum_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_select(hv_mask_or(hv_lt(a, b), hv_isnan(a)), a, b);
}
OP_REF maximum_ref(float a, float b, float c, const float *at) {
  return (a > b || isnan(a)) ? a : b;
}
OP_VEC maximum_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_select(hv_mask_or(hv_gt(a, b), hv_isnan(a)), a, b);
}

/* mod: floored modulo (the result has b's sign), numpy's npy_divmod: fmod,
 * then moved into b's sign; an exact zero takes b's sign too; b == 0 gives
 * NaN from fmodf. No vector form computes fmod exactly: lane by lane. */
static inline float mod_scalar(float a, float b) {
  float m = fmodf(a, b);
  if (b == 0.0f) return m;
  if (m != 0.0f) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = copysignf(0.0f, b);
  }
  return m;
}
OP_REF mod_ref(float a, float b, float c, const float *at) { return mod_scalar(a, b); }
OP_VEC mod_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_map2(mod_scalar, a, b); }

/* affine: x * scale + shift, two roundings (as numpy's float32 x*s + t). */
OP_REF affine_ref(float a, float b, float c, const float *at) { return a * at[0] + at[1]; }
OP_VEC affine_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_add(hv_mul(a, at[0]), at[1]);
}

OP_REF abs_ref(float a, float b, float c, const float *at) { return fabsf(a); }
OP_VEC abs_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_abs(a); }

/* relu: a < 0 ? 0 : a, so NaN stays NaN and -0 stays -0, as ONNX Runtime's
 * and PyTorch's Relu return them (a NaN that a model's weights or inputs
 * produce must reach its output, not become 0). hv_max(0, a) is that
 * expression in every variant: max returns its second operand when either
 * is NaN and for (+0, -0). */
OP_REF relu_ref(float a, float b, float c, const float *at) { return a < 0.0f ? 0.0f : a; }
OP_VEC relu_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_max(hv_zero(), a); }

/* leaky_relu (ONNX LeakyRelu, alpha 0.01 by default): x for x > 0, alpha * x
 * for x < 0, spelled max(0, x) + alpha * min(0, x) with relu's rule for
 * both halves (x itself where it is NaN or a zero), so NaN stays NaN, as
 * ONNX Runtime and PyTorch return it, and -0 stays -0 for alpha >= 0.
 * Two roundings (the add is exact but for the sign of a zero, which a
 * fused multiply-add would keep negative where alpha * x underflows). */
OP_REF leaky_relu_ref(float a, float b, float c, const float *at) {
  return (a < 0.0f ? 0.0f : a) + at[0] * (a > 0.0f ? 0.0f : a);
}
OP_VEC leaky_relu_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_add(hv_max(hv_zero(), a), hv_mul(at[0], hv_min(hv_zero(), a)));
}

/* sigmoid and tanh: the fast approximation of approx.h.
 *
 * Error bounds, measured by `test_eltwise --exhaustive` (tests/c/
 * test_eltwise.c): every float with 2^-12 <= |x| < 128, both signs, against
 * libm in double, rounded up to two significant digits. Maxima found (x in
 * hex; generic and avx2 on an AMD Zen 3, avx512 on an Intel Cascade Lake,
 * gcc 12):
 *   sigmoid  generic 8.931e-08 (0x1.f6fd5p+2)  avx2 8.931e-08 (0x1.f6fd5p+2)
 *            avx512  8.986e-08 (0x1.44cceep+2)
 *   tanh     generic 8.241e-08 (0x1.4003a8p-1) avx2 8.203e-08 (0x1.42c39ep-1)
 *            avx512  8.203e-08 (0x1.42c39ep-1)
 * Outside that range the default test's strided sweep (denormals up to
 * |x| = 1024) stays below these; beyond, both functions are exactly
 * saturated. About 1.5 ulp of an output in [0.5, 1): the approximation's
 * own error plus the final rounding. The variants differ only where their
 * reciprocal (vec.h: hv_recip12) and fused multiply-adds round differently. */
#define SIGMOID_MAX_ERR HV_BY_ISA(9.0e-8, 9.0e-8, 9.0e-8)
#define TANH_MAX_ERR HV_BY_ISA(8.3e-8, 8.3e-8, 8.3e-8)

OP_REF sigmoid_ref(float a, float b, float c, const float *at) {
  return 1.0 / (1.0 + exp(-(double)a));
}
OP_REF tanh_ref(float a, float b, float c, const float *at) { return tanh((double)a); }

/* c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1] by Horner's rule, one hv_fmadd
 * per coefficient: how every polynomial of approx.h is evaluated. Inlined
 * over a constant table, the loop unrolls into the chain written out. */
HV_AI hv_f32 horner(hv_f32 x, const float *c, int n) {
  hv_f32 p = hv_set1(c[0]);
  for (int i = 1; i < n; i++) p = hv_fmadd(p, x, hv_set1(c[i]));
  return p;
}

/* e^r on the reduced argument r = y - n ln2 of an integral n (Cody-Waite
 * split, degree-7 polynomial): e^y = 2^n times this. */
HV_AI hv_f32 exp_of_reduced(hv_f32 y, hv_f32 n) {
  static const float P[] = {HWT_EXP_P0, HWT_EXP_P1, HWT_EXP_P2,
                            HWT_EXP_P3, HWT_EXP_P4, HWT_EXP_P5};
  hv_f32 r = hv_fnmadd(n, hv_set1(HWT_LN2_HI), y);
  r = hv_fnmadd(n, hv_set1(HWT_LN2_LO), r);
  hv_f32 p = horner(r, P, 6);
  return hv_add(hv_fmadd(p, hv_mul(r, r), r), hv_set1(1.0f));
}

/* e^y = 2^n * p: n = round(y log2 e), p = exp_of_reduced. The callers
 * scale p by 2^n as their range needs. */
HV_AI hv_f32 exp_reduced(hv_f32 y, hv_f32 *n_out) {
  hv_f32 n = hv_round(hv_mul(y, hv_set1(HWT_LOG2E)));
  *n_out = n;
  return exp_of_reduced(y, n);
}

/* e^y for |y| <= HWT_EXP_MIN_ARG, as exp_reduced but with n rounded by
 * adding HV_EXP2_MAGIC, whose sum also gives 2^n (hv_exp2_of_magic): on
 * AVX2 that drops the rounding, the conversion to integers and the
 * exponent's add for one subtraction. */
HV_AI hv_f32 exp_small(hv_f32 y) {
  hv_f32 t = hv_fmadd(y, hv_set1(HWT_LOG2E), hv_set1(HV_EXP2_MAGIC));
  hv_f32 n = hv_sub(t, hv_set1(HV_EXP2_MAGIC));
  return hv_mul(exp_of_reduced(y, n), hv_exp2_of_magic(t));
}

/* Written without branches (selects only): random input signs cost no
 * mispredictions, and the portable variant's loops vectorise.
 * 1 / (1 + e^-x) with e^-x over [-lim, lim] (lim = HWT_EXP_MIN_ARG) for both
 * signs: for x < 0 the sum is large and one division still gives s to
 * ~1.5 ulp, so no e / (1 + e) branch is selected (the form before, on
 * e^-|x|: 27 operations a vector against 22, benchmarks/act_cost.c).
 * -min(x, lim) is max(-x, -lim), spelled with min only: the portable
 * variant's ?: of hv_max left the loop scalar (11.7 against 3.3 ns an
 * element). min returns its second operand for a NaN: z stays finite and
 * the input NaN is put back at the end. */
OP_VEC sigmoid_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  const hv_f32 lim = hv_set1(HWT_EXP_MIN_ARG), zero = hv_zero();
  hv_f32 z = hv_min(hv_sub(zero, hv_min(x, lim)), lim);
  hv_f32 s = hv_recip12(hv_add(hv_set1(1.0f), exp_small(z)));
  s = hv_keep(hv_ge(x, hv_set1(-HWT_EXP_MIN_ARG)), s);
  return hv_select(hv_isnan(x), x, s);
}

OP_VEC tanh_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  static const float P[] = {HWT_TANH_P0, HWT_TANH_P1, HWT_TANH_P2, HWT_TANH_P3, HWT_TANH_P4};
  hv_f32 ax = hv_abs(x);
  hv_f32 t2 = hv_min(hv_add(ax, ax), hv_set1(HWT_EXP_MIN_ARG));
  hv_f32 e = exp_small(hv_sub(hv_zero(), t2));
  hv_f32 q = hv_mul(e, hv_recip12(hv_add(hv_set1(1.0f), e)));
  hv_f32 big = hv_fnmadd(q, hv_set1(2.0f), hv_set1(1.0f));
  hv_f32 s = hv_mul(ax, ax), p = horner(s, P, 5);
  hv_f32 small = hv_fmadd(hv_mul(p, s), ax, ax);
  hv_f32 t = hv_select(hv_lt(ax, hv_set1(HWT_TANH_SMALL)), small, big);
  /* t >= 0: OR in the sign of x (also gives tanh(-0) = -0). */
  return hv_select(hv_isnan(x), x, hv_or_sign(t, x));
}

/* ---- sigmoid and tanh of OPS_CHAINS vectors at once ----
 * sigmoid_vec and tanh_vec are each one chain of ~25 dependent operations
 * (the polynomial, a division, 2^n). A core whose FP scheduler holds only
 * part of such a chain runs it at the chain's latency: on a Zen 1 (AVX2,
 * 256-bit operations split in two) a vector of one activation took 48
 * cycles in the LSTM cell. Below, every statement is repeated for
 * OPS_CHAINS independent vectors before the next one, so their chains
 * advance side by side in program order. The operations on each lane are
 * those of sigmoid_vec and tanh_vec, so the results are the same, bit for
 * bit. One LSTM-medium cell (64 x 512 units, 1 thread, Zen 1, thread CPU
 * time, min of 40 in a C loop): 389 us one vector at a time, 331 us with 2
 * chains, 309 us with 4, 325 us with 8 (AVX2's 16 registers spill). */
#define OPS_CHAINS 4
#define OPS_EACH _Pragma("GCC unroll 16") for (int j = 0; j < OPS_CHAINS; j++)

/* exp_small of OPS_CHAINS vectors. The polynomial by Estrin's scheme
 * (r^2, r^4 and three pairs side by side: half Horner's chain) ran slower
 * here, its 4 x 5 live vectors spilling AVX2's registers: silu 0.66-0.83
 * against 0.54-0.66 ns an element (benchmarks/act_cost.c, Zen 3). */
HV_AI void exp_small_chains(const hv_f32 *y, hv_f32 *out) {
  static const float P[] = {HWT_EXP_P0, HWT_EXP_P1, HWT_EXP_P2,
                            HWT_EXP_P3, HWT_EXP_P4, HWT_EXP_P5};
  hv_f32 t[OPS_CHAINS], n[OPS_CHAINS], r[OPS_CHAINS], p[OPS_CHAINS];
  OPS_EACH t[j] = hv_fmadd(y[j], hv_set1(HWT_LOG2E), hv_set1(HV_EXP2_MAGIC));
  OPS_EACH n[j] = hv_sub(t[j], hv_set1(HV_EXP2_MAGIC));
  OPS_EACH r[j] = hv_fnmadd(n[j], hv_set1(HWT_LN2_HI), y[j]);
  OPS_EACH r[j] = hv_fnmadd(n[j], hv_set1(HWT_LN2_LO), r[j]);
  OPS_EACH p[j] = hv_set1(P[0]);
  for (int i = 1; i < 6; i++) OPS_EACH p[j] = hv_fmadd(p[j], r[j], hv_set1(P[i]));
  OPS_EACH p[j] = hv_add(hv_fmadd(p[j], hv_mul(r[j], r[j]), r[j]), hv_set1(1.0f));
  OPS_EACH out[j] = hv_mul(p[j], hv_exp2_of_magic(t[j]));
}

/* sigmoid_vec of OPS_CHAINS vectors, in place. */
HV_AI void sigmoid_chains(hv_f32 *x) {
  const hv_f32 lim = hv_set1(HWT_EXP_MIN_ARG), zero = hv_zero();
  hv_f32 z[OPS_CHAINS];
  OPS_EACH z[j] = hv_min(hv_sub(zero, hv_min(x[j], lim)), lim);
  exp_small_chains(z, z);
  OPS_EACH {
    hv_f32 s = hv_recip12(hv_add(hv_set1(1.0f), z[j]));
    s = hv_keep(hv_ge(x[j], hv_set1(-HWT_EXP_MIN_ARG)), s);
    x[j] = hv_select(hv_isnan(x[j]), x[j], s);
  }
}

/* tanh_vec of OPS_CHAINS vectors, in place. */
HV_AI void tanh_chains(hv_f32 *x) {
  static const float P[] = {HWT_TANH_P0, HWT_TANH_P1, HWT_TANH_P2, HWT_TANH_P3, HWT_TANH_P4};
  hv_f32 ax[OPS_CHAINS], e[OPS_CHAINS], q[OPS_CHAINS], p[OPS_CHAINS];
  OPS_EACH ax[j] = hv_abs(x[j]);
  OPS_EACH e[j] = hv_sub(hv_zero(), hv_min(hv_add(ax[j], ax[j]), hv_set1(HWT_EXP_MIN_ARG)));
  exp_small_chains(e, e);
  OPS_EACH q[j] = hv_mul(e[j], hv_recip12(hv_add(hv_set1(1.0f), e[j])));
  OPS_EACH p[j] = hv_set1(P[0]);
  for (int i = 1; i < 5; i++) OPS_EACH p[j] = hv_fmadd(p[j], hv_mul(ax[j], ax[j]), hv_set1(P[i]));
  OPS_EACH {
    hv_f32 big = hv_fnmadd(q[j], hv_set1(2.0f), hv_set1(1.0f));
    hv_f32 small = hv_fmadd(hv_mul(p[j], hv_mul(ax[j], ax[j])), ax[j], ax[j]);
    hv_f32 t = hv_select(hv_lt(ax[j], hv_set1(HWT_TANH_SMALL)), small, big);
    x[j] = hv_select(hv_isnan(x[j]), x[j], hv_or_sign(t, x[j]));
  }
}

/* clip (ONNX Clip, ReLU6 = clip(0, 6)): x < min ? min : x, then > max ?
 * max; NaN stays NaN (both compares are false), -0 stays -0. The defaults,
 * -inf and +inf, are no bound. */
OP_REF clip_ref(float a, float b, float c, const float *at) {
  float r = a < at[0] ? at[0] : a;
  return r > at[1] ? at[1] : r;
}
OP_VEC clip_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 r = hv_select(hv_lt(a, at[0]), at[0], a);
  return hv_select(hv_gt(r, at[1]), at[1], r);
}

/* sqrt, floor, ceil: exact in every variant (IEEE sqrt, rounding modes). */
OP_REF sqrt_ref(float a, float b, float c, const float *at) { return sqrtf(a); }
OP_VEC sqrt_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_sqrt(a); }
OP_REF floor_ref(float a, float b, float c, const float *at) { return floorf(a); }
OP_VEC floor_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_floor(a); }
OP_REF ceil_ref(float a, float b, float c, const float *at) { return ceilf(a); }
OP_VEC ceil_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_ceil(a); }

/* pow: a^b as libm's pow in double, rounded once to float (numpy's float32
 * power is not the same in every build; this is). Lane by lane: models use
 * it on small tensors, and the importer turns the common constant exponents
 * (2, 0.5, 1, -1) into mul, sqrt, identity and div. */
static inline float pow_scalar(float a, float b) { return (float)pow((double)a, (double)b); }
OP_REF pow_ref(float a, float b, float c, const float *at) { return pow_scalar(a, b); }
OP_VEC pow_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_map2(pow_scalar, a, b); }

/* Comparisons and logic (ONNX Equal, Less, ..., And, Or, Xor, Not; bool
 * tensors are carried as float 1.0 / 0.0, an operand is true when nonzero,
 * NaN included, as numpy's astype(bool)): 1.0 or 0.0, NaN compares false
 * (not_equal: true). trunc rounds toward zero (ONNX Cast of a float to an
 * integer type). Lane by lane: models apply them to attention masks and
 * position ids ([batch, seq]), a few hundred elements per run; every
 * variant computes the reference's expression, bit for bit. */
static inline float equal_scalar(float a, float b) {
  return (a == b) ? 1.0f : 0.0f;
}
OP_REF equal_ref(float a, float b, float c, const float *at) {
  return equal_scalar(a, b);
}
OP_VEC equal_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(equal_scalar, a, b);
}
static inline float not_equal_scalar(float a, float b) {
  return (a != b) ? 1.0f : 0.0f;
}
OP_REF not_equal_ref(float a, float b, float c, const float *at) {
  return not_equal_scalar(a, b);
}
OP_VEC not_equal_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(not_equal_scalar, a, b);
}
static inline float less_scalar(float a, float b) {
  return (a < b) ? 1.0f : 0.0f;
}
OP_REF less_ref(float a, float b, float c, const float *at) {
  return less_scalar(a, b);
}
OP_VEC less_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(less_scalar, a, b);
}
static inline float less_equal_scalar(float a, float b) {
  return (a <= b) ? 1.0f : 0.0f;
}
OP_REF less_equal_ref(float a, float b, float c, const float *at) {
  return less_equal_scalar(a, b);
}
OP_VEC less_equal_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(less_equal_scalar, a, b);
}
static inline float greater_scalar(float a, float b) {
  return (a > b) ? 1.0f : 0.0f;
}
OP_REF greater_ref(float a, float b, float c, const float *at) {
  return greater_scalar(a, b);
}
OP_VEC greater_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(greater_scalar, a, b);
}
static inline float greater_equal_scalar(float a, float b) {
  return (a >= b) ? 1.0f : 0.0f;
}
OP_REF greater_equal_ref(float a, float b, float c, const float *at) {
  return greater_equal_scalar(a, b);
}
OP_VEC greater_equal_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(greater_equal_scalar, a, b);
}
static inline float logical_and_scalar(float a, float b) {
  return (a != 0.0f && b != 0.0f) ? 1.0f : 0.0f;
}
OP_REF logical_and_ref(float a, float b, float c, const float *at) {
  return logical_and_scalar(a, b);
}
OP_VEC logical_and_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(logical_and_scalar, a, b);
}
static inline float logical_or_scalar(float a, float b) {
  return (a != 0.0f || b != 0.0f) ? 1.0f : 0.0f;
}
OP_REF logical_or_ref(float a, float b, float c, const float *at) {
  return logical_or_scalar(a, b);
}
OP_VEC logical_or_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(logical_or_scalar, a, b);
}
static inline float logical_xor_scalar(float a, float b) {
  return ((a != 0.0f) != (b != 0.0f)) ? 1.0f : 0.0f;
}
OP_REF logical_xor_ref(float a, float b, float c, const float *at) {
  return logical_xor_scalar(a, b);
}
OP_VEC logical_xor_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(logical_xor_scalar, a, b);
}
static inline float logical_not_scalar(float a, float b) {
  return (a == 0.0f) ? 1.0f : 0.0f;
}
OP_REF logical_not_ref(float a, float b, float c, const float *at) {
  return logical_not_scalar(a, b);
}
OP_VEC logical_not_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(logical_not_scalar, a, b);
}
static inline float trunc_scalar(float a, float b) { return truncf(a); }
OP_REF trunc_ref(float a, float b, float c, const float *at) { return truncf(a); }
OP_VEC trunc_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_map2(trunc_scalar, a, b);
}

/* exp, erf and gelu: approximations (approx.h) with error bounds measured
 * as for sigmoid and tanh, relative to max(1, |y|). */
#define EXP_MAX_ERR HV_BY_ISA(1.2e-7, 1.2e-7, 1.2e-7)
#define ERF_MAX_ERR HV_BY_ISA(1.2e-7, 1.2e-7, 1.2e-7)
#define GELU_MAX_ERR HV_BY_ISA(1.2e-7, 1.2e-7, 1.2e-7)

OP_REF exp_ref(float a, float b, float c, const float *at) { return exp((double)a); }
OP_VEC exp_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  /* NaN clamps to the lower bound and is put back at the end. */
  hv_f32 y = hv_min(hv_max(x, hv_set1(HWT_EXP_FLUSH)), hv_set1(HWT_EXP_CLAMP));
  hv_f32 n;
  hv_f32 p = exp_reduced(y, &n);
  /* Two scalings: 2^n alone overflows the exponent near the top of the
     range. */
  hv_f32 n1 = hv_round(hv_mul(n, hv_set1(0.5f)));
  hv_f32 e = hv_ldexp(hv_ldexp(p, n1), hv_sub(n, n1));
  e = hv_keep(hv_ge(x, hv_set1(HWT_EXP_FLUSH)), e);
  return hv_select(hv_isnan(x), x, e);
}

/* erf(|x|) for |x| <= 1: |x| + |x| (P - 1), the large part added last. */
HV_AI hv_f32 erf_small(hv_f32 ax) {
  static const float P[] = {HWT_ERF_P0, HWT_ERF_P1, HWT_ERF_P2, HWT_ERF_P3,
                            HWT_ERF_P4, HWT_ERF_P5, HWT_ERF_P6};
  hv_f32 p = horner(hv_mul(ax, ax), P, 7);
  return hv_fmadd(p, ax, ax);
}

/* erfc(|x|) for 1 <= |x| < HWT_ERF_ONE, 0 from there on; any |x| (NaN
 * too) keeps the polynomial in its range. */
HV_AI hv_f32 erfc_large(hv_f32 ax) {
  static const float R[] = {HWT_ERFC_R0, HWT_ERFC_R1, HWT_ERFC_R2, HWT_ERFC_R3, HWT_ERFC_R4,
                            HWT_ERFC_R5, HWT_ERFC_R6, HWT_ERFC_R7, HWT_ERFC_R8, HWT_ERFC_R9};
  hv_f32 t = hv_min(hv_max(ax, hv_set1(1.0f)), hv_set1(HWT_ERF_ONE));
  t = hv_sub(t, hv_set1(HWT_ERF_MID));
  hv_f32 r = horner(t, R, 10);
  return hv_keep(hv_lt(ax, hv_set1(HWT_ERF_ONE)), exp_small(r)); /* r in [-17, -1.8] */
}

OP_REF erf_ref(float a, float b, float c, const float *at) { return erf((double)a); }
OP_VEC erf_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 ax = hv_abs(x), a1 = hv_min(ax, hv_set1(1.0f));
  hv_f32 small = erf_small(a1);
  hv_f32 e = hv_select(hv_lt(ax, hv_set1(1.0f)), small,
                       hv_sub(hv_set1(1.0f), erfc_large(ax)));
  return hv_select(hv_isnan(x), x, hv_or_sign(e, x)); /* erf(-0) = -0 */
}

/* gelu (exact form, PyTorch's default and ONNX Gelu): x/2 (1 + erf(x/sqrt2)).
 * 1 + erf(z) is formed without cancellation: 2 - erfc(z) or 1 + erf(z) for
 * z >= 0, erfc(|z|) or 1 - erf(|z|) below, so negative x keep their
 * relative accuracy down to z = -HWT_ERF_ONE (then -0). -inf gives NaN
 * (-inf * 0), as the formula does. */
OP_REF gelu_ref(float a, float b, float c, const float *at) {
  return 0.5 * (double)a * erfc(-(double)a * 0.70710678118654752440);
}
OP_VEC gelu_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 az = hv_abs(hv_mul(x, hv_set1(0.70710678118654752440f)));
  hv_f32 a1 = hv_min(az, hv_set1(1.0f));
  hv_f32 s = erf_small(a1), l = erfc_large(az);
  hv_f32 hx = hv_mul(x, hv_set1(0.5f));
  /* hx (1 + s), hx (1 - s), x - hx l and hx l, one rounding fewer each */
  hv_f32 pos = hv_select(hv_lt(az, hv_set1(1.0f)), hv_fmadd(hx, s, hx),
                         hv_select(hv_lt(az, hv_set1(HWT_ERF_ONE)), hv_fnmadd(hx, l, x), x));
  hv_f32 neg = hv_select(hv_lt(az, hv_set1(1.0f)), hv_fnmadd(hx, s, hx), hv_mul(hx, l));
  return hv_select(hv_lt(x, hv_zero()), neg, pos);
}

/* ---- activations of issue #41 ----
 * Exact ops (err 0) compute the reference's float expression with the same
 * roundings. softplus, log, sin and cos go lane by lane through libm in
 * double, rounded once (as pow): exact in every variant; they are rare in
 * the models of the zoo (speech front ends, the odd head), and a vector log
 * or sin with its own range reduction is not worth its error analysis yet. */

/* hard_sigmoid (ONNX HardSigmoid; alpha 0.2, beta 0.5; PyTorch exports
 * alpha 1/6): clamp(alpha x + beta, 0, 1) as clip does, two roundings, NaN
 * kept. hard_swish (ONNX HardSwish): x * hard_sigmoid(x) with alpha 1/6,
 * beta 1/2 (so -inf gives NaN, inf * 0, as the ONNX formula). */
static inline float hard_sigmoid_scalar(float a, float alpha, float beta) {
  float t = a * alpha + beta;
  t = t < 0.0f ? 0.0f : t;
  return t > 1.0f ? 1.0f : t;
}
HV_AI hv_f32 hard_sigmoid_v(hv_f32 a, hv_f32 alpha, hv_f32 beta) {
  hv_f32 t = hv_add(hv_mul(a, alpha), beta);
  t = hv_select(hv_lt(t, hv_zero()), hv_zero(), t);
  return hv_select(hv_gt(t, hv_set1(1.0f)), hv_set1(1.0f), t);
}
OP_REF hard_sigmoid_ref(float a, float b, float c, const float *at) {
  return hard_sigmoid_scalar(a, at[0], at[1]);
}
OP_VEC hard_sigmoid_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hard_sigmoid_v(a, at[0], at[1]);
}
#define HWT_SIXTH (1.0f / 6.0f)
OP_REF hard_swish_ref(float a, float b, float c, const float *at) {
  return a * hard_sigmoid_scalar(a, HWT_SIXTH, 0.5f);
}
OP_VEC hard_swish_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_mul(a, hard_sigmoid_v(a, hv_set1(HWT_SIXTH), hv_set1(0.5f)));
}

/* silu (SiLU / swish, x * sigmoid(x): the importer fuses ONNX's Sigmoid ->
 * Mul pair into it): x times sigmoid_vec, one pass instead of two (1M
 * floats, 1 thread, avx512, Zen 4 under load, interleaved, min of 15:
 * sigmoid then mul 0.59 ms, silu 0.41 ms). mish
 * (x tanh(softplus(x))): with u = e^x, tanh(log(1 + u)) = n / (n + 2), n =
 * u (u + 2), no cancellation at either end; x is clamped at 20 for u, where
 * the ratio is 1 in float (it is from x = 9 on). gelu_tanh (ONNX Gelu
 * approximate="tanh", PyTorch's gelu(approximate="tanh")): x/2 (1 +
 * tanh(u)) = x sigmoid(2u), 2u = x (c1 + c2 x^2) rounded in float (the
 * slope of sigmoid damps that rounding). The references compute the same
 * forms in double. Bounds: the largest error over every float with 0.5 <=
 * |x| < 4 (where they peak: outputs near 1, where the last multiply's
 * rounding adds to sigmoid's error), Zen 4, gcc 12, avx512 (the C suite's
 * sweep, |x| up to 1024, finds the same or less in all three variants):
 * silu 1.54e-7 (x = 0x1.47a02p+0), mish 1.56e-7 (0x1.22f97ep+0),
 * gelu_tanh 1.70e-7 (0x1.30196ep+0); rounded up to two digits. */
#define SILU_MAX_ERR HV_BY_ISA(1.6e-7, 1.6e-7, 1.6e-7)
#define MISH_MAX_ERR HV_BY_ISA(1.6e-7, 1.6e-7, 1.6e-7)
#define GELU_TANH_MAX_ERR HV_BY_ISA(1.8e-7, 1.8e-7, 1.8e-7)
#define HWT_GELU_C1 1.5957691216057308f   /* 2 sqrt(2/pi) */
#define HWT_GELU_C2 0.071354816272919f    /* 2 sqrt(2/pi) 0.044715 */

OP_REF silu_ref(float a, float b, float c, const float *at) {
  return (double)a / (1.0 + exp(-(double)a));
}
OP_VEC silu_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_mul(x, sigmoid_vec(x, b, c, at));
}
OP_REF mish_ref(float a, float b, float c, const float *at) {
  return (double)a * tanh(log1p(exp((double)a)));
}
OP_VEC mish_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 u = exp_vec(hv_min(x, hv_set1(20.0f)), b, c, at); /* NaN -> 20, put back below */
  hv_f32 n = hv_mul(u, hv_add(u, hv_set1(2.0f)));
  hv_f32 r = hv_div(n, hv_add(n, hv_set1(2.0f)));
  return hv_select(hv_isnan(x), x, hv_mul(x, r));
}
OP_REF gelu_tanh_ref(float a, float b, float c, const float *at) {
  double x = a, u2 = 2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return x / (1.0 + exp(-u2));
}
OP_VEC gelu_tanh_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 u2 = hv_mul(x, hv_fmadd(hv_mul(x, x), hv_set1(HWT_GELU_C2), hv_set1(HWT_GELU_C1)));
  return hv_mul(x, sigmoid_vec(u2, b, c, at));
}

/* elu (alpha 1), selu (alpha, gamma: ONNX's defaults, SELU's constants)
 * and celu (alpha 1): x for x > 0, alpha (e^z - 1) below, z = x (elu, selu)
 * or x / alpha rounded to float (celu: ONNX's max(0, x) + min(0, alpha
 * (exp(x / alpha) - 1)), which also holds for a negative alpha; e^z is a
 * float, so alpha e^z is +-inf once e^z overflows, even for |alpha| < 1).
 *
 * e^z - 1 without cancellation (expm1_v): z = n ln2 + r as in exp_reduced,
 * e^z - 1 = 2^n q + (2^n - 1) with q = e^r - 1 = r + r^2 P(r) and 2^n - 1
 * exact; first written as exp_vec(z) - 1, which lost up to 3e-7 relative
 * to alpha (e^z - 1) for z in (0, 1) (celu with alpha < 0). Measured as for
 * silu, but over every third float with 2^-6 <= |x| < 16 (all three
 * variants), at the default attributes: elu and celu 4.0e-8 (x =
 * -0x1.0685bp+0), selu 1.70e-7 (-0x1.f7504p-1, generic; 1.68e-7 in avx2
 * and avx512); the
 * error scales with |alpha| (selu: |alpha gamma|), and the bounds leave
 * room for the |alpha| <= 2 the C suite also draws. */
#define ELU_MAX_ERR HV_BY_ISA(1.0e-7, 1.0e-7, 1.0e-7)
#define SELU_MAX_ERR HV_BY_ISA(1.9e-7, 1.9e-7, 1.9e-7)
#define CELU_MAX_ERR HV_BY_ISA(1.0e-7, 1.0e-7, 1.0e-7)

/* e^z - 1 for z <= 80 (z is clamped to [-88, 80]: below, the result is -1
 * in float; NaN gives -1, callers put it back). */
HV_AI hv_f32 expm1_v(hv_f32 z) {
  static const float P[] = {HWT_EXP_P0, HWT_EXP_P1, HWT_EXP_P2,
                            HWT_EXP_P3, HWT_EXP_P4, HWT_EXP_P5};
  hv_f32 y = hv_min(hv_max(z, hv_set1(-88.0f)), hv_set1(80.0f));
  hv_f32 n = hv_round(hv_mul(y, hv_set1(HWT_LOG2E)));
  hv_f32 r = hv_fnmadd(n, hv_set1(HWT_LN2_HI), y);
  r = hv_fnmadd(n, hv_set1(HWT_LN2_LO), r);
  hv_f32 q = hv_fmadd(horner(r, P, 6), hv_mul(r, r), r);
  hv_f32 t = hv_ldexp(hv_set1(1.0f), n); /* n >= -127: 2^-127 may flush to 0, harmless */
  return hv_fmadd(t, q, hv_sub(t, hv_set1(1.0f)));
}

OP_REF elu_ref(float a, float b, float c, const float *at) {
  return a > 0.0f ? (double)a : at[0] * expm1((double)a);
}
HV_AI hv_f32 elu_v(hv_f32 x, hv_f32 alpha) {
  hv_f32 e = expm1_v(hv_min(x, hv_zero()));
  hv_f32 r = hv_select(hv_gt(x, hv_zero()), x, hv_mul(alpha, e));
  return hv_select(hv_isnan(x), x, r);
}
OP_VEC elu_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) { return elu_v(x, at[0]); }
OP_REF selu_ref(float a, float b, float c, const float *at) {
  return (double)at[1] * (a > 0.0f ? (double)a : at[0] * expm1((double)a));
}
OP_VEC selu_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_mul(at[1], elu_v(x, at[0]));
}
OP_REF celu_ref(float a, float b, float c, const float *at) {
  if (isnan(a)) return a;
  float z = a / at[0];
  double e = expm1((double)z);
  double neg = at[0] * (e > FLT_MAX ? INFINITY : e); /* e^z overflows in float */
  return (a > 0.0f ? (double)a : 0.0) + (neg < 0.0 ? neg : 0.0);
}
OP_VEC celu_vec(hv_f32 x, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 z = hv_div(x, at[0]);
  /* above 80, e^z - 1 is e^z in float */
  hv_f32 e = hv_select(hv_gt(z, hv_set1(80.0f)), exp_vec(z, b, c, at), expm1_v(z));
  hv_f32 neg = hv_mul(at[0], e);
  hv_f32 r = hv_add(hv_max(x, hv_zero()), hv_min(neg, hv_zero()));
  return hv_select(hv_isnan(x), x, r);
}

/* thresholded_relu (ONNX ThresholdedRelu, alpha 1): x > alpha ? x : 0 (NaN
 * gives 0, as ONNX Runtime's). prelu (ONNX PRelu; b the slope, broadcast
 * per channel): relu's and leaky_relu's rule with a tensor slope, max(0, x)
 * + b min(0, x), NaN kept. */
OP_REF thresholded_relu_ref(float a, float b, float c, const float *at) {
  return a > at[0] ? a : 0.0f;
}
OP_VEC thresholded_relu_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_keep(hv_gt(a, at[0]), a);
}
OP_REF prelu_ref(float a, float b, float c, const float *at) {
  return (a < 0.0f ? 0.0f : a) + b * (a > 0.0f ? 0.0f : a);
}
OP_VEC prelu_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_add(hv_max(hv_zero(), a), hv_mul(b, hv_min(hv_zero(), a)));
}

/* softsign x / (1 + |x|) (infinities give NaN, as the formula), reciprocal
 * 1 / x, neg -x (x * -1: neg(0) = -0), sign (1, -1, or x itself for +-0 and
 * NaN): one IEEE operation each. */
OP_REF softsign_ref(float a, float b, float c, const float *at) { return a / (1.0f + fabsf(a)); }
OP_VEC softsign_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_div(a, hv_add(hv_set1(1.0f), hv_abs(a)));
}
OP_REF reciprocal_ref(float a, float b, float c, const float *at) { return 1.0f / a; }
OP_VEC reciprocal_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_div(hv_set1(1.0f), a);
}
OP_REF neg_ref(float a, float b, float c, const float *at) { return a * -1.0f; }
OP_VEC neg_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) { return hv_mul(a, hv_set1(-1.0f)); }
OP_REF sign_ref(float a, float b, float c, const float *at) {
  return a > 0.0f ? 1.0f : a < 0.0f ? -1.0f : a;
}
OP_VEC sign_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  hv_f32 r = hv_select(hv_gt(a, hv_zero()), hv_set1(1.0f), a);
  return hv_select(hv_lt(a, hv_zero()), hv_set1(-1.0f), r);
}

/* Unary math as libm in double, each result rounded once to float, lane by
 * lane (hv_map2, the second operand unused): softplus log(1 + e^x) =
 * max(x, 0) + log1p(e^-|x|), log, sin, cos, and the rest of ONNX's unary
 * math (YOSO's Acos, rotary and positional code, Round in
 * quantisation-aware graphs). Rare ops, read once per element: a polynomial
 * per op would buy nothing a model shows. Round is ONNX's: half to even
 * (nearbyint in the default rounding mode). */
#define HWT_LIBM_UNARY(NAME, EXPR)                                                   \
  static inline float NAME##_scalar(float a, float unused) {                       \
    const double x = a;                                                              \
    return (float)(EXPR);                                                            \
  }                                                                                  \
  OP_REF NAME##_ref(float a, float b, float c, const float *at) {                   \
    return NAME##_scalar(a, 0);                                                      \
  }                                                                                  \
  OP_VEC NAME##_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {               \
    return hv_map2(NAME##_scalar, a, a);                                             \
  }
HWT_LIBM_UNARY(softplus, (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x))))
HWT_LIBM_UNARY(log, log(x))
HWT_LIBM_UNARY(sin, sin(x))
HWT_LIBM_UNARY(cos, cos(x))
HWT_LIBM_UNARY(acos, acos(x))
HWT_LIBM_UNARY(asin, asin(x))
HWT_LIBM_UNARY(atan, atan(x))
HWT_LIBM_UNARY(tan, tan(x))
HWT_LIBM_UNARY(sinh, sinh(x))
HWT_LIBM_UNARY(cosh, cosh(x))
HWT_LIBM_UNARY(asinh, asinh(x))
HWT_LIBM_UNARY(acosh, acosh(x))
HWT_LIBM_UNARY(atanh, atanh(x))
HWT_LIBM_UNARY(round_even, nearbyint(x))
#undef HWT_LIBM_UNARY

/* Quantization (issue #43), ONNX QuantizeLinear / DequantizeLinear per
 * tensor on integer values carried in float32: quantize is
 * clamp(rne(x / scale) + zero_point) to the type's range (clamped before the
 * rounding, which gives the same integers; NaN gives the range's low end, as
 * the comparisons do in every variant), dequantize (x - zero_point) * scale
 * (the subtraction is exact on integers). */
static inline float quantize_ref_(float x, float scale, float zp, float qmin, float qmax) {
  float v = x / scale;
  const float lo = qmin - zp, hi = qmax - zp;
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return nearbyintf(v) + zp;
}
HV_AI hv_f32 quantize_vec_(hv_f32 x, hv_f32 scale, hv_f32 zp, float qmin, float qmax) {
  hv_f32 v = hv_div(x, scale);
  v = hv_max(v, hv_sub(hv_set1(qmin), zp));
  v = hv_min(v, hv_sub(hv_set1(qmax), zp));
  return hv_add(hv_round(v), zp);
}
OP_REF quantize_u8_ref(float a, float b, float c, const float *at) {
  return quantize_ref_(a, at[0], at[1], 0.0f, 255.0f);
}
OP_VEC quantize_u8_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return quantize_vec_(a, at[0], at[1], 0.0f, 255.0f);
}
OP_REF quantize_s8_ref(float a, float b, float c, const float *at) {
  return quantize_ref_(a, at[0], at[1], -128.0f, 127.0f);
}
OP_VEC quantize_s8_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return quantize_vec_(a, at[0], at[1], -128.0f, 127.0f);
}
OP_REF dequantize_ref(float a, float b, float c, const float *at) { return (a - at[1]) * at[0]; }
OP_VEC dequantize_vec(hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  return hv_mul(hv_sub(a, at[1]), at[0]);
}

#undef OP_REF
#undef OP_VEC
#endif
