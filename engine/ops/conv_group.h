/* conv2d with group > 1 (engine/ops/conv_group.c): prepared by conv.c's
 * conv2d row once it has read the geometry. */
#ifndef HWT_OPS_CONV_GROUP_H
#define HWT_OPS_CONV_GROUP_H
#include "hwtune/conv.h"
#include "ops_util.h"

typedef struct hwt_conv_group hwt_conv_group;

/* A grouped conv of d (C and K the whole tensors' channels) into *out;
 * bn > 0: NCHW[bn]c activations (depthwise only). HWT_OK, or a negative
 * status with err filled. */
int hwt_ops_conv_group_prepare(const hwt_op_ctx *ctx, const hwt_conv_desc *d, int group,
                               int bn, hwt_conv_group **out, size_t *ws_floats, char *err,
                               size_t errlen);
void hwt_ops_conv_group_run(const hwt_op_ctx *ctx, const hwt_conv_group *s, float *ws, int tid,
                            int nth);
void hwt_ops_conv_group_free(hwt_conv_group *s);

#endif
