/* hwt_conv_activation on one vector in registers, for the per-ISA conv
 * bodies whose epilogue writes scattered outputs (Winograd's 2x2 tiles):
 * the element-wise kernel's own vector bodies (kernels/eltwise/ops.h), so
 * the result is the separate op's. Include after kernels/common/vec.h. */
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

#endif
