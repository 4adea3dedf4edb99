/* hwt_conv_activation in registers, for the per-ISA conv bodies that
 * apply it in their epilogue (depthwise blocks, Winograd's 2x2 tiles, the
 * 1x1 GEMM path's pass): the element-wise kernel's own vector bodies
 * (kernels/eltwise/ops.h), so the result is the separate op's. Include
 * after kernels/common/vec.h. */
#ifndef HWTUNE_CONV_ACT_VEC_H
#define HWTUNE_CONV_ACT_VEC_H
#include "../eltwise/ops.h"
#include "hwtune/conv.h"

HV_AI hv_f32 hwt_conv_act_vec(hv_f32 v, int act) {
  const hv_f32 z = hv_zero();
  if (act == HWT_CONV_ACT_SILU) return silu_vec(v, z, z, NULL);
  if (act == HWT_CONV_ACT_HARD_SWISH) return hard_swish_vec(v, z, z, NULL);
  return v;
}

/* hwt_conv_act_vec on OPS_CHAINS (4) vectors in place, SiLU's chains side
 * by side as the element-wise kernel runs them (sigmoid_chains: the same
 * bits as silu_vec). One vector at a time, the depthwise kernel's fused
 * SiLU ran slower than the conv followed by the silu op (480 x 14x14 3x3,
 * 1 thread, avx512, under load: 142 vs 138 us; 672 x 14x14 5x5: 423 vs
 * 370 us). */
HV_AI void hwt_conv_act_vec4(hv_f32 *v, int act) {
  if (act == HWT_CONV_ACT_SILU) {
    hv_f32 x[OPS_CHAINS];
    OPS_EACH x[j] = v[j];
    sigmoid_chains(v);
    OPS_EACH v[j] = hv_mul(x[j], v[j]);
  } else if (act) {
    OPS_EACH v[j] = hwt_conv_act_vec(v[j], act);
  }
}
_Static_assert(OPS_CHAINS == 4, "hwt_conv_act_vec4 works on 4 vectors");

#endif
