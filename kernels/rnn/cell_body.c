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

/* step() for the OPS_CHAINS full vectors from u0, their chains side by
 * side with the activations' _chains forms (eltwise/ops.h: why, and what
 * it gave). Same operations on each lane, so the same results. */
HV_AI void step_n(const float *g, const float *xg, const float *bias, const float *c_prev,
                  float *h, float *c, size_t u0, size_t H) {
  const hv_mask all = hv_first(HV_W);
  const hv_f32 z = hv_zero();
  hv_f32 si[OPS_CHAINS], sf[OPS_CHAINS], tg[OPS_CHAINS], so[OPS_CHAINS], cn[OPS_CHAINS];
  OPS_EACH si[j] = gate(g, xg, bias, u0 + (size_t)j * HV_W, all, 0);
  OPS_EACH sf[j] = gate(g, xg, bias, H + u0 + (size_t)j * HV_W, all, 0);
  sigmoid_chains(si);
  sigmoid_chains(sf);
  OPS_EACH tg[j] = gate(g, xg, bias, 2 * H + u0 + (size_t)j * HV_W, all, 0);
  tanh_chains(tg);
  OPS_EACH {
    cn[j] = fma_vec(sf[j], hv_load(c_prev + u0 + (size_t)j * HV_W), mul_vec(si[j], tg[j], z, 0), 0);
    hv_store(c + u0 + (size_t)j * HV_W, cn[j]);
  }
  OPS_EACH so[j] = gate(g, xg, bias, 3 * H + u0 + (size_t)j * HV_W, all, 0);
  sigmoid_chains(so);
  tanh_chains(cn);
  OPS_EACH hv_store(h + u0 + (size_t)j * HV_W, mul_vec(so[j], cn[j], z, 0));
}

static void units(const float *g, const float *xg, const float *bias, const float *c_prev,
                  float *h, float *c, size_t n, size_t H) {
  size_t u = 0;
  for (; u + OPS_CHAINS * HV_W <= n; u += OPS_CHAINS * HV_W) step_n(g, xg, bias, c_prev, h, c, u, H);
  for (; u + HV_W <= n; u += HV_W) step(g, xg, bias, c_prev, h, c, u, H, hv_first(HV_W), 0);
  if (u < n) step(g, xg, bias, c_prev, h, c, u, H, hv_first((long)(n - u)), 1);
}

const hwt_lstm_variant HWT_VARIANT(hwt_lstm_variant) = {units};
