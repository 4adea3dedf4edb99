/* numpy broadcasting as strided loops: the output is walked in row-major
 * order while every input advances by its own stride (0 along dimensions it
 * broadcasts). Internal to the eltwise family. */
#ifndef HWTUNE_ELTWISE_BROADCAST_H
#define HWTUNE_ELTWISE_BROADCAST_H
#include <stdint.h>
#include "hwtune/graph.h"
#include "hwtune/op.h"

typedef enum {
  HWT_BC_ADD, HWT_BC_SUB, HWT_BC_MUL, HWT_BC_DIV, HWT_BC_MIN, HWT_BC_MAX, HWT_BC_MOD,
  HWT_BC_ABS
} hwt_bc_op;

typedef struct {
  int n_in, rank;                /* rank after collapsing dimensions */
  int64_t n;                     /* output elements */
  int64_t shape[HWT_GRAPH_MAX_DIMS];
  int64_t stride[HWT_OP_MAX_IO][HWT_GRAPH_MAX_DIMS]; /* elements; 0 = broadcast */
} hwt_bc_walk;

/* HWT_OK, or HWT_EINVAL when an input does not broadcast to out's shape. */
int hwt_bc_walk_init(hwt_bc_walk *w, const hwt_graph *g, int n_in, const int *in, int out);
/* Output elements [lo, hi): op of inputs 0 and 1 for a binary op; for n_in
 * > 2 (sum) the inputs are added left to right, as the reference does. */
void hwt_bc_walk_run(const hwt_bc_walk *w, hwt_bc_op op, const float *const *in, float *out,
                     int64_t lo, int64_t hi);
/* The scalar functions, exactly as numpy computes them in float32. */
float hwt_bc_apply(hwt_bc_op op, float a, float b);

#endif
