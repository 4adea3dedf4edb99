/* Views: a reshape or flatten whose input lives in the arena does not need
 * bytes of its own. Its output takes the input's offset, and the planner
 * treats the whole chain (x, reshape(x), reshape(reshape(x)), ...) as one
 * buffer: born with the chain's root, live until the last reader of any
 * member (for ever when a member is an output). The op then finds its
 * output at its input's address and copies nothing (movement.c).
 *
 * Only arena tensors are viewed: an input or a param has storage the caller
 * binds, so a reshape of it keeps its own bytes and copies. The profile of
 * ViT-B/16, BERT-base and GPT-2 (issue #41) counted 242, 195 and 148 such
 * copies a run, ~2.4% of hwtune's time on one thread. */
#include <string.h>

#include "plan_internal.h"

int pl_view_of(const hwt_graph *g, int t) {
  const gr_tensor *y = &g->tensors[t];
  if (y->producer < 0) return -1;
  if (y->kind != HWT_TENSOR_ACTIVATION && y->kind != HWT_TENSOR_OUTPUT) return -1;
  const gr_op *op = &g->ops[y->producer];
  if (op->n_in != 1 || op->n_out != 1) return -1;
  if (strcmp(op->type, "reshape") != 0 && strcmp(op->type, "flatten") != 0) return -1;
  int x = op->io[0];
  const gr_tensor *xt = &g->tensors[x];
  if (xt->kind != HWT_TENSOR_ACTIVATION && xt->kind != HWT_TENSOR_OUTPUT) return -1;
  if (xt->producer < 0 || xt->bytes != y->bytes) return -1;
  return x;
}

void pl_view_roots(const hwt_graph *g, int *root) {
  /* A chain cannot loop: each step goes to the input of the producing op,
   * and the graph was validated acyclic before planning. */
  for (int t = 0; t < g->n_tensors; t++) {
    int r = t, up;
    while ((up = pl_view_of(g, r)) >= 0) r = up;
    root[t] = r;
  }
}
