/* Op type -> implementation. Families are declared weak so that a build
 * (or a test binary) without one of them links and simply lacks those op
 * types; hwt_ops_find() then returns NULL and the engine reports the op as
 * unsupported instead of crashing. */
#include <string.h>
#include "hwtune/op.h"

#pragma weak hwt_ops_linear
#pragma weak hwt_ops_conv
#pragma weak hwt_ops_eltwise
#pragma weak hwt_ops_pool
#pragma weak hwt_ops_norm
#pragma weak hwt_ops_movement
#pragma weak hwt_ops_rnn
#pragma weak hwt_ops_indexing
#pragma weak hwt_ops_attention
#pragma weak hwt_ops_grad_pointwise
#pragma weak hwt_ops_grad_reduce
#pragma weak hwt_ops_grad_conv
#pragma weak hwt_ops_grad_norm
#pragma weak hwt_ops_resize
#pragma weak hwt_ops_argmax
#pragma weak hwt_ops_test
#pragma weak hwt_ops_quant

typedef const hwt_op_impl *(*family_fn)(int *n);

const hwt_op_impl *hwt_ops_find(const char *type) {
  const family_fn families[] = {hwt_ops_linear, hwt_ops_conv, hwt_ops_eltwise, hwt_ops_pool,
                                hwt_ops_norm,   hwt_ops_movement, hwt_ops_rnn, hwt_ops_indexing,
                                hwt_ops_attention,
                                hwt_ops_grad_pointwise, hwt_ops_grad_reduce,
                                hwt_ops_grad_conv, hwt_ops_grad_norm, hwt_ops_resize,
                                hwt_ops_argmax, hwt_ops_quant, hwt_ops_test};
  if (!type) return NULL;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    if (!families[f]) continue;
    int n = 0;
    const hwt_op_impl *t = families[f](&n);
    for (int i = 0; i < n; i++)
      if (strcmp(t[i].type, type) == 0) return &t[i];
  }
  return NULL;
}
