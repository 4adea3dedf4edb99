/* numpy broadcasting as strided loops: the output is walked in row-major
 * order while every input advances by its own stride (0 along dimensions it
 * broadcasts); each row runs the kernel library's element-wise op
 * (hwt_eltwise_run_strided). Internal to the eltwise family. */
#ifndef HWTUNE_ELTWISE_BROADCAST_H
#define HWTUNE_ELTWISE_BROADCAST_H
#include <stdint.h>
#include "hwtune/eltwise.h"
#include "hwtune/graph.h"
#include "hwtune/op.h"

typedef struct {
  int n_in, rank;                /* rank after collapsing dimensions */
  int64_t n;                     /* output elements */
  int64_t shape[HWT_GRAPH_MAX_DIMS];
  int64_t stride[HWT_OP_MAX_IO][HWT_GRAPH_MAX_DIMS]; /* elements; 0 = broadcast */
} hwt_bc_walk;

/* HWT_OK, or HWT_EINVAL when an input does not broadcast to out's shape. */
int hwt_bc_walk_init(hwt_bc_walk *w, const hwt_graph *g, int n_in, const int *in, int out);
/* Output elements [lo, hi) of `op` (its n is ignored): the op of inputs 0
 * and 1, then for n_in > 2 (sum) folded with each further input left to
 * right, as the reference does. */
void hwt_bc_walk_run(const hwt_bc_walk *w, const hwt_eltwise_desc *op, const float *const *in,
                     float *out, int64_t lo, int64_t hi);

#endif
