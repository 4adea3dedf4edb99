/* The weight gradient's tunables (conv2d_grad_weight, engine/ops/grad_conv.c),
 * declared next to the code they shape as hwt_conv_knobs declares the
 * forward template's: knob i is named by hwt_grad_weight_knob_name(i) (the
 * op's attribute of that name), its legal values by
 * hwt_grad_weight_knobs(); the tuner reads both, so no binding lists them.
 * The conv is described as the forward one (hwt_conv_desc: x [N,C,H,W],
 * weights [K,C,R,S], stride, padding); relu, dilation and padding_end are
 * not read (1 and symmetric). */
#ifndef HWTUNE_GRAD_CONV_H
#define HWTUNE_GRAD_CONV_H
#include "hwtune/api.h"
#include "hwtune/conv.h"

#define HWT_GW_KNOBS 4

/* Knob i's name, NULL past the last. */
HWT_API const char *hwt_grad_weight_knob_name(int i);
/* Every legal value of each knob (out[HWT_GW_KNOBS], in name order); any
 * combination is accepted by the op. HWT_EINVAL for a bad shape. */
HWT_API int hwt_grad_weight_knobs(const hwt_conv_desc *d, hwt_conv_knob *out);
/* The untuned choice (today's rules), values[HWT_GW_KNOBS]. */
HWT_API int hwt_grad_weight_default(const hwt_conv_desc *d, int *values);
/* values with the knobs the chosen algorithm does not read set to their
 * default, and a value that gives the same plan as others (a tile_cols
 * past the output rows, a chunk_tiles past the batch) set to the default
 * if that is one of them, else to the smallest; so two points that run
 * alike compare equal (the search skips the others). HWT_EINVAL if a
 * value is not legal. */
HWT_API int hwt_grad_weight_canonical(const hwt_conv_desc *d, int *values);

/* The data gradient's (conv2d_grad_data) im2col knobs, the same way: only
 * for one that is not a forward CONV (stride other than 1, or padding of
 * the kernel's size or more; a forward one takes the CONV template's knobs,
 * hwt_conv_knobs): HWT_EINVAL otherwise. Both knobs are read: the canonical
 * form only names equivalent tile_cols values alike. */
#define HWT_GD_KNOBS 2

HWT_API const char *hwt_grad_data_knob_name(int i);
HWT_API int hwt_grad_data_knobs(const hwt_conv_desc *d, hwt_conv_knob *out);
HWT_API int hwt_grad_data_default(const hwt_conv_desc *d, int *values);
HWT_API int hwt_grad_data_canonical(const hwt_conv_desc *d, int *values);

#endif
