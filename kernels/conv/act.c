/* The conv epilogue's activation besides ReLU (hwt_conv_activation: SiLU,
 * HardSwish) over output spans a kernel has just written, and its scalar
 * reference.
 *
 * The spans go through the element-wise kernel of the plan's ISA
 * (kernels/eltwise/body.c): the very code the separate silu / hard_swish
 * op runs, so a fused conv gives the floats of the conv followed by the
 * op, and SiLU keeps that kernel's interleaved exp chains (one vector at a
 * time ran at about half their rate: body.c). The template calls it on
 * each register block's rows, the direct kernel on each output row, bf16
 * on each run of pixels, and every kernel after a residual it adds on the
 * way out: while the span is in L1, instead of a separate pass over the
 * whole tensor. The depthwise kernel, Winograd's tile epilogue and the
 * 1x1 GEMM path's epilogue apply it in registers instead (act_vec.h). */
#include "conv_internal.h"
#include "../eltwise/eltwise_impl.h"
#include "../eltwise/ops.h"

static hwt_ew_op ew_op(int act) {
  return act == HWT_CONV_ACT_SILU ? HWT_EW_SILU : HWT_EW_HARD_SWISH;
}

void hwt_conv_act_rows(hwt_isa isa, int act, float *y, long stride, int rows, long n) {
  if (!act || rows < 1 || n < 1) return;
  const hwt_ew_variant *v = hwt_ew_variant_for(isa);
  const float attr[HWT_EW_MAX_ATTRS] = {0};
  for (int r = 0; r < rows; r++) {
    float *yr = y + (long)r * stride;
    v->run(ew_op(act), yr, NULL, NULL, yr, (size_t)n, 0, attr);
  }
}

float hwt_conv_act_ref(float v, int act) {
  if (act == HWT_CONV_ACT_SILU) return (float)silu_ref(v, 0.0f, 0.0f, NULL);
  if (act == HWT_CONV_ACT_HARD_SWISH) return (float)hard_swish_ref(v, 0.0f, 0.0f, NULL);
  return v;
}
