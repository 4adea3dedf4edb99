/* conv3d (NCDHW, src/hwtune/graph/ops/conv3d.py), an op of the conv family
 * (conv.c's table) implemented in conv3d.c. */
#ifndef HWT_OPS_CONV3D_H
#define HWT_OPS_CONV3D_H
#include "ops_util.h"

int hwt_ops_conv3d_prepare(hwt_op_ctx *ctx, char *err, size_t errlen);
void hwt_ops_conv3d_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth);
void hwt_ops_conv3d_release(hwt_op_ctx *ctx);

#endif
