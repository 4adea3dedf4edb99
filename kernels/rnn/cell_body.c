/* The LSTM cell's vector body, compiled once per ISA over
 * kernels/common/vec.h (kernels.cmake): per vector of hidden units, the
 * gate sums, the four activations, c and h in registers, one load of each
 * input and one store of each output. The activations and their order of
 * operations are the element-wise kernels' (eltwise/ops.h: sigmoid_vec,
 * tanh_vec, add_vec, mul_vec, fma_vec), so the results are those of the
 * chain of element-wise calls the driver made before, bit for bit. That
 * chain made 16 passes over L1 per row chunk; in LSTM-medium (4 x 512,
 * batch 64, 2 threads, Zen 3 AVX2) it took 5% of the run. */
#include "../common/vec.h"
#include "../eltwise/ops.h"
#include "cell_impl.h"

/* Gate k's pre-activation for lanes at u (masked loads when MASKED). */
HV_AI hv_f32 gate(const float *g, const float *xg, const float *bias, size_t off, hv_mask m,
                  const int MASKED) {
  hv_f32 z = MASKED ? hv_load_mask(g + off, m) : hv_load(g + off);
  if (xg) z = hv_add(z, MASKED ? hv_load_mask(xg + off, m) : hv_load(xg + off));
  if (bias) z = hv_add(z, MASKED ? hv_load_mask(bias + off, m) : hv_load(bias + off));
  return z;
}

HV_AI void step(const float *g, const float *xg, const float *bias, const float *c_prev,
                float *h, float *c, size_t u, size_t H, hv_mask m, const int MASKED) {
  const hv_f32 z = hv_zero();
  hv_f32 si = sigmoid_vec(gate(g, xg, bias, u, m, MASKED), z, z, 0);
  hv_f32 sf = sigmoid_vec(gate(g, xg, bias, H + u, m, MASKED), z, z, 0);
  hv_f32 tg = tanh_vec(gate(g, xg, bias, 2 * H + u, m, MASKED), z, z, 0);
  hv_f32 so = sigmoid_vec(gate(g, xg, bias, 3 * H + u, m, MASKED), z, z, 0);
  hv_f32 cp = MASKED ? hv_load_mask(c_prev + u, m) : hv_load(c_prev + u);
  hv_f32 cn = fma_vec(sf, cp, mul_vec(si, tg, z, 0), 0);
  hv_f32 hn = mul_vec(so, tanh_vec(cn, z, z, 0), z, 0);
  if (MASKED) {
    hv_store_mask(c + u, m, cn);
    hv_store_mask(h + u, m, hn);
  } else {
    hv_store(c + u, cn);
    hv_store(h + u, hn);
  }
}

/* ---- CELL_N vectors at once ----
 * step() is one chain of dependent operations per vector: five
 * activations, each ~25 dependent steps deep (the polynomial, a division,
 * 2^n), c, then tanh(c). A core whose FP scheduler holds only part of one
 * vector's chain runs it at that chain's latency: on a Zen 1 (AVX2, 256-bit
 * operations split in two) one cell of LSTM-medium (64 x 512 units) took
 * 389 us, 5 x the 48 cycles a vector of one activation took alone. Below,
 * every statement is repeated for CELL_N independent vectors before the
 * next one, so CELL_N chains advance side by side in program order. The
 * operations on each lane are those of sigmoid_vec and tanh_vec
 * (eltwise/ops.h, the same approx.h constants), so the results are the
 * same, bit for bit. */
#define CELL_N 4
#define EACH _Pragma("GCC unroll 16") for (int j = 0; j < CELL_N; j++)

/* exp_neg (eltwise/ops.h) of CELL_N vectors. */
HV_AI void exp_neg_n(const hv_f32 *y, hv_f32 *out) {
  static const float P[] = {HWT_EXP_P0, HWT_EXP_P1, HWT_EXP_P2,
                            HWT_EXP_P3, HWT_EXP_P4, HWT_EXP_P5};
  hv_f32 n[CELL_N], r[CELL_N], p[CELL_N];
  EACH n[j] = hv_round(hv_mul(y[j], hv_set1(HWT_LOG2E)));
  EACH r[j] = hv_fnmadd(n[j], hv_set1(HWT_LN2_HI), y[j]);
  EACH r[j] = hv_fnmadd(n[j], hv_set1(HWT_LN2_LO), r[j]);
  EACH p[j] = hv_set1(P[0]);
  for (int i = 1; i < 6; i++) EACH p[j] = hv_fmadd(p[j], r[j], hv_set1(P[i]));
  EACH p[j] = hv_add(hv_fmadd(p[j], hv_mul(r[j], r[j]), r[j]), hv_set1(1.0f));
  EACH out[j] = hv_ldexp(p[j], n[j]);
}

/* sigmoid_vec of CELL_N vectors, in place. */
HV_AI void sigmoid_n(hv_f32 *x) {
  const hv_f32 zero = hv_zero();
  hv_f32 e[CELL_N], s[CELL_N];
  EACH e[j] = hv_sub(zero, hv_min(hv_abs(x[j]), hv_set1(HWT_EXP_MIN_ARG)));
  exp_neg_n(e, e);
  EACH s[j] = hv_recip12(hv_add(hv_set1(1.0f), e[j]));
  EACH {
    hv_f32 r = hv_select(hv_lt(x[j], zero), hv_mul(e[j], s[j]), s[j]);
    r = hv_keep(hv_ge(x[j], hv_set1(-HWT_EXP_MIN_ARG)), r);
    x[j] = hv_select(hv_isnan(x[j]), x[j], r);
  }
}

/* tanh_vec of CELL_N vectors, in place. */
HV_AI void tanh_n(hv_f32 *x) {
  static const float P[] = {HWT_TANH_P0, HWT_TANH_P1, HWT_TANH_P2, HWT_TANH_P3, HWT_TANH_P4};
  hv_f32 ax[CELL_N], e[CELL_N], q[CELL_N], p[CELL_N];
  EACH ax[j] = hv_abs(x[j]);
  EACH e[j] = hv_sub(hv_zero(), hv_min(hv_add(ax[j], ax[j]), hv_set1(HWT_EXP_MIN_ARG)));
  exp_neg_n(e, e);
  EACH q[j] = hv_mul(e[j], hv_recip12(hv_add(hv_set1(1.0f), e[j])));
  EACH p[j] = hv_set1(P[0]);
  for (int i = 1; i < 5; i++) EACH p[j] = hv_fmadd(p[j], hv_mul(ax[j], ax[j]), hv_set1(P[i]));
  EACH {
    hv_f32 big = hv_fnmadd(q[j], hv_set1(2.0f), hv_set1(1.0f));
    hv_f32 small = hv_fmadd(hv_mul(p[j], hv_mul(ax[j], ax[j])), ax[j], ax[j]);
    hv_f32 t = hv_select(hv_lt(ax[j], hv_set1(HWT_TANH_SMALL)), small, big);
    x[j] = hv_select(hv_isnan(x[j]), x[j], hv_or_sign(t, x[j]));
  }
}

/* step() for the CELL_N full vectors from u0. */
HV_AI void step_n(const float *g, const float *xg, const float *bias, const float *c_prev,
                  float *h, float *c, size_t u0, size_t H) {
  const hv_mask all = hv_first(HV_W);
  const hv_f32 z = hv_zero();
  hv_f32 si[CELL_N], sf[CELL_N], tg[CELL_N], so[CELL_N], cn[CELL_N];
  EACH si[j] = gate(g, xg, bias, u0 + (size_t)j * HV_W, all, 0);
  EACH sf[j] = gate(g, xg, bias, H + u0 + (size_t)j * HV_W, all, 0);
  sigmoid_n(si);
  sigmoid_n(sf);
  EACH tg[j] = gate(g, xg, bias, 2 * H + u0 + (size_t)j * HV_W, all, 0);
  tanh_n(tg);
  EACH {
    cn[j] = fma_vec(sf[j], hv_load(c_prev + u0 + (size_t)j * HV_W), mul_vec(si[j], tg[j], z, 0), 0);
    hv_store(c + u0 + (size_t)j * HV_W, cn[j]);
  }
  EACH so[j] = gate(g, xg, bias, 3 * H + u0 + (size_t)j * HV_W, all, 0);
  sigmoid_n(so);
  tanh_n(cn);
  EACH hv_store(h + u0 + (size_t)j * HV_W, mul_vec(so[j], cn[j], z, 0));
}

static void units(const float *g, const float *xg, const float *bias, const float *c_prev,
                  float *h, float *c, size_t n, size_t H) {
  size_t u = 0;
  for (; u + CELL_N * HV_W <= n; u += CELL_N * HV_W) step_n(g, xg, bias, c_prev, h, c, u, H);
  for (; u + HV_W <= n; u += HV_W) step(g, xg, bias, c_prev, h, c, u, H, hv_first(HV_W), 0);
  if (u < n) step(g, xg, bias, c_prev, h, c, u, H, hv_first((long)(n - u)), 1);
}

const hwt_lstm_variant HWT_VARIANT(hwt_lstm_variant) = {units};
