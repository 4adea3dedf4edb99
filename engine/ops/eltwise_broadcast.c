/* Broadcasting walk: see eltwise_broadcast.h. */
#include "eltwise_broadcast.h"

int hwt_bc_walk_init(hwt_bc_walk *w, const hwt_graph *g, int n_in, const int *in, int out) {
  int rank = hwt_graph_tensor_ndim(g, out);
  const int64_t *os = hwt_graph_tensor_shape(g, out);
  if (n_in < 1 || n_in > HWT_OP_MAX_IO) return HWT_EINVAL;
  int64_t shape[HWT_GRAPH_MAX_DIMS];
  int64_t st[HWT_OP_MAX_IO][HWT_GRAPH_MAX_DIMS];
  w->n = 1;
  for (int d = 0; d < rank; d++) {
    shape[d] = os[d];
    w->n *= os[d];
  }
  for (int k = 0; k < n_in; k++) {
    int r = hwt_graph_tensor_ndim(g, in[k]);
    const int64_t *s = hwt_graph_tensor_shape(g, in[k]);
    if (r > rank) return HWT_EINVAL;
    int64_t step = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int sd = d - (rank - r); /* numpy aligns shapes on the right */
      int64_t dim = sd >= 0 ? s[sd] : 1;
      if (dim != shape[d] && dim != 1) return HWT_EINVAL;
      st[k][d] = dim == 1 ? 0 : step;
      step *= dim;
    }
  }
  /* Merge dimension d into d+1 when every input steps through the pair as
   * one run (all contiguous, or all broadcast): a column or scalar
   * broadcast then becomes one long inner loop instead of many short ones. */
  int nr = 0;
  for (int d = 0; d < rank; d++) {
    if (shape[d] == 1) continue; /* size-1 dims move nothing */
    int merge = nr > 0;
    for (int k = 0; k < n_in && merge; k++)
      merge = w->stride[k][nr - 1] == st[k][d] * shape[d];
    if (merge) {
      w->shape[nr - 1] *= shape[d];
      for (int k = 0; k < n_in; k++) w->stride[k][nr - 1] = st[k][d];
    } else {
      w->shape[nr] = shape[d];
      for (int k = 0; k < n_in; k++) w->stride[k][nr] = st[k][d];
      nr++;
    }
  }
  if (nr == 0) { /* a scalar or all-ones shape */
    w->shape[0] = 1;
    for (int k = 0; k < n_in; k++) w->stride[k][0] = 0;
    nr = 1;
  }
  w->rank = nr;
  w->n_in = n_in;
  return HWT_OK;
}

void hwt_bc_walk_run(const hwt_bc_walk *w, const hwt_eltwise_desc *op, const float *const *in,
                     float *out, int64_t lo, int64_t hi) {
  hwt_eltwise_desc row = *op;
  const int last = w->rank - 1;
  const int64_t inner = w->shape[last];
  int64_t idx[HWT_GRAPH_MAX_DIMS];
  int64_t rem = lo;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % w->shape[d];
    rem /= w->shape[d];
  }
  int64_t i = lo;
  while (i < hi) {
    int64_t len = inner - idx[last];
    if (len > hi - i) len = hi - i;
    const float *p[HWT_OP_MAX_IO];
    for (int k = 0; k < w->n_in; k++) {
      int64_t off = 0;
      for (int d = 0; d <= last; d++) off += idx[d] * w->stride[k][d];
      p[k] = in[k] + off;
    }
    row.n = (size_t)len;
    hwt_eltwise_run_strided(&row, p[0], (long)w->stride[0][last], p[1], (long)w->stride[1][last],
                            out + i);
    for (int k = 2; k < w->n_in; k++)
      hwt_eltwise_run_strided(&row, out + i, 1, p[k], (long)w->stride[k][last], out + i);
    i += len;
    idx[last] += len;
    for (int d = last; d > 0 && idx[d] == w->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}
