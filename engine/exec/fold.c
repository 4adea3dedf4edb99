/* Constant folding: an op whose inputs are all params, or outputs of such
 * ops, computes the same values every run (weight layout transforms and
 * packing, the layout rewrite's `w@oihw8i16o` ops). It runs once at prepare,
 * into storage of its own that the arena never hands to another tensor, and
 * every run skips it: the schedulers only see run_order / init_pending /
 * roots, which leave folded ops out. An op without inputs is not folded:
 * nothing says it is deterministic. */
#include <stdlib.h>
#include <string.h>
#include "exec_internal.h"

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int all_inputs_constant(const hwt_engine *e, int op) {
  int n = hwt_graph_op_n_inputs(e->g, op);
  const int *in = hwt_graph_op_inputs(e->g, op);
  if (n == 0) return 0;
  for (int i = 0; i < n; i++) {
    if (hwt_graph_tensor_kind(e->g, in[i]) == HWT_TENSOR_PARAM) continue;
    int p = hwt_graph_tensor_producer(e->g, in[i]);
    if (p < 0 || !e->folded[p]) return 0;
  }
  return 1;
}

int hwt_fold_place(hwt_engine *e) {
  size_t bytes = 0;
  for (int op = 0; op < e->n_ops; op++) {
    if (!e->folded[op]) continue;
    const int *out = hwt_graph_op_outputs(e->g, op);
    for (int j = 0; j < hwt_graph_op_n_outputs(e->g, op); j++)
      bytes += round_up((size_t)hwt_graph_tensor_bytes(e->g, out[j]), HWT_PLAN_ALIGN);
  }
  if (bytes == 0) return HWT_OK;
  if (!(e->const_mem = aligned_alloc(HWT_PLAN_ALIGN, bytes))) return HWT_ENOMEM;
  memset(e->const_mem, 0, bytes);
  char *next = e->const_mem;
  for (int op = 0; op < e->n_ops; op++) {
    if (!e->folded[op]) continue;
    const int *out = hwt_graph_op_outputs(e->g, op);
    for (int j = 0; j < hwt_graph_op_n_outputs(e->g, op); j++) {
      e->tensor[out[j]] = (float *)next;
      next += round_up((size_t)hwt_graph_tensor_bytes(e->g, out[j]), HWT_PLAN_ALIGN);
    }
  }
  return HWT_OK;
}

int hwt_fold_plan(hwt_engine *e) {
  const int *order = hwt_plan_order(e->plan);
  const int *off = hwt_plan_succ_offsets(e->plan), *succ = hwt_plan_succ(e->plan);
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  e->run_order = malloc(n * sizeof(int));
  e->init_pending = calloc(n, sizeof(int));
  e->roots = malloc(n * sizeof(int));
  if (!e->run_order || !e->init_pending || !e->roots) return HWT_ENOMEM;
  e->n_folded = e->n_run = e->n_roots = 0;
  for (int k = 0; k < e->n_ops; k++) {
    int op = order[k];
    e->folded[op] = (unsigned char)all_inputs_constant(e, op);
    if (e->folded[op])
      e->n_folded++;
    else
      e->run_order[e->n_run++] = op;
  }
  /* Successor lists hold each successor once; a successor of a non-folded
   * op is never folded (one of its inputs varies). */
  for (int op = 0; op < e->n_ops; op++)
    if (!e->folded[op])
      for (int j = off[op]; j < off[op + 1]; j++) e->init_pending[succ[j]]++;
  for (int k = 0; k < e->n_run; k++)
    if (e->init_pending[e->run_order[k]] == 0) e->roots[e->n_roots++] = e->run_order[k];
  return HWT_OK;
}

int hwt_fold_run(hwt_engine *e, int (*prepare_op)(hwt_engine *, int),
                 void (*release_op)(hwt_engine *, int)) {
  if (e->n_folded == 0) return HWT_OK;
  const int *order = hwt_plan_order(e->plan);
  for (int k = 0; k < e->n_ops; k++) {
    int op = order[k];
    if (!e->folded[op]) continue;
    int st = prepare_op(e, op);
    if (st < 0) return st;
    /* Once per prepare, on the calling thread: the pool's teams may be
     * pinned elsewhere, and a one-time transform is not worth a fork. */
    size_t ws = round_up(e->ctx[op].ws_floats, 16);
    float *buf = ws ? aligned_alloc(HWT_CACHELINE, ws * sizeof(float)) : NULL;
    if (ws && !buf) {
      release_op(e, op);
      return HWT_ENOMEM;
    }
    e->impl[op]->run(&e->ctx[op], buf, 0, 1);
    free(buf);
    /* Its packed state is not needed again: the output holds the result. */
    release_op(e, op);
  }
  return HWT_OK;
}
