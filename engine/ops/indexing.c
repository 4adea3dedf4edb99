/* Index and mask op family: take (ONNX Gather at run-time indices: the
 * embedding lookups of transformers), gather_elements, cumsum, expand,
 * where. Semantics: src/hwtune/graph/ops/indexing.py.
 *
 * Integer and bool tensors arrive as float32 values. An index is truncated
 * toward zero and wrapped once from the end (ONNX's negative indices); one
 * outside [-n, n), or NaN, selects nothing: its output (take: the whole
 * row) is NaN. run() cannot fail, so a bad index never reads outside the
 * table and shows in the outputs; graph inputs that index a table are
 * range-checked before a run (src/hwtune/engine/tensor_files.py).
 *
 * These ops run on masks and ids ([batch, seq]) and on the embedding rows
 * they pick: plain loops, threads sharing output rows. */
#include <math.h>
#include <stdlib.h>
#include "ops_util.h"

/* Index value v of an axis of n: its position, or -1 when out of range. */
static inline int64_t wrap_index(float v, int64_t n) {
  const double t = trunc((double)v);
  if (!(t >= -(double)n && t < (double)n)) return -1; /* NaN too */
  const int64_t i = (int64_t)t;
  return i < 0 ? i + n : i;
}

static void fill_nan(float *y, int64_t n) {
  for (int64_t j = 0; j < n; j++) y[j] = NAN;
}

/* ---- take: out rows of `inner` floats, (outer x k) of them; row (o, j) is
 * data row (o, indices[j]). */
typedef struct {
  hwt_ops_lines x; /* data along the axis */
  int64_t k;       /* indices */
} take_state;

static int take_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "take takes data and indices");
  take_state st;
  if (hwt_ops_lines_of(ctx, 0, 0, &st.x)) return hwt_ops_fail(err, errlen, ctx, "bad axis");
  st.k = hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 1));
  if (hwt_ops_numel(ctx->g, hwt_ops_out(ctx, 0)) != st.x.outer * st.k * st.x.inner)
    return hwt_ops_fail(err, errlen, ctx, "output shape does not match data and indices");
  return hwt_ops_keep(ctx, &st, sizeof st, 0, 0.0);
}

static void take_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const take_state *s = ctx->state;
  const float *idx = ctx->in[1];
  int64_t lo, hi;
  hwt_ops_rows(s->x.outer * s->k, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    float *y = ctx->out[0] + r * s->x.inner;
    const int64_t i = wrap_index(idx[r % s->k], s->x.len);
    if (i < 0) {
      fill_nan(y, s->x.inner);
      continue;
    }
    memcpy(y, ctx->in[0] + ((r / s->k) * s->x.len + i) * s->x.inner,
           (size_t)s->x.inner * sizeof(float));
  }
}

/* ---- gather_elements: output of the indices' shape; element e reads data
 * at e's multi-index with the axis coordinate replaced by indices[e]. */
typedef struct {
  int rank, axis;
  int64_t shape[HWT_GRAPH_MAX_DIMS];  /* indices (= output) shape */
  int64_t stride[HWT_GRAPH_MAX_DIMS]; /* data strides */
  int64_t n_axis;                     /* data's extent on the axis */
  int64_t total;
} ge_state;

static int ge_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "gather_elements takes data and indices");
  int rank, irank;
  const int64_t *ds = hwt_ops_in_shape(ctx, 0, &rank), *is = hwt_ops_in_shape(ctx, 1, &irank);
  int64_t axis;
  if (irank != rank || hwt_ops_axis(ctx, rank, 0, &axis))
    return hwt_ops_fail(err, errlen, ctx, "indices must have data's rank; bad axis");
  ge_state st = {.rank = rank, .axis = (int)axis, .n_axis = ds[axis]};
  for (int d = 0; d < rank; d++) {
    if (d != axis && is[d] > ds[d])
      return hwt_ops_fail(err, errlen, ctx, "indices exceed data off the axis");
    st.shape[d] = is[d];
    st.stride[d] = hwt_ops_prod(ds, d + 1, rank);
  }
  st.total = hwt_ops_prod(is, 0, rank);
  return hwt_ops_keep(ctx, &st, sizeof st, 0, 0.0);
}

static void ge_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const ge_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_range(s->total, tid, nth, &lo, &hi);
  for (int64_t e = lo; e < hi; e++) {
    const int64_t i = wrap_index(ctx->in[1][e], s->n_axis);
    if (i < 0) {
      ctx->out[0][e] = NAN;
      continue;
    }
    int64_t off = 0, r = e;
    for (int d = s->rank - 1; d >= 0; d--) {
      const int64_t c = r % s->shape[d];
      r /= s->shape[d];
      off += (d == s->axis ? i : c) * s->stride[d];
    }
    ctx->out[0][e] = ctx->in[0][off];
  }
}

/* ---- cumsum: one running float32 sum per line along the axis, in order
 * (reverse: from the end); exclusive sums leave out their own element. */
typedef struct {
  hwt_ops_lines l;
  int exclusive, reverse;
} cumsum_state;

static int cumsum_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 1 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "cumsum takes one input");
  cumsum_state st;
  if (hwt_ops_lines_of(ctx, 0, 0, &st.l)) return hwt_ops_fail(err, errlen, ctx, "bad axis");
  st.exclusive = (int)hwt_ops_int(ctx, "exclusive", 0);
  st.reverse = (int)hwt_ops_int(ctx, "reverse", 0);
  return hwt_ops_keep(ctx, &st, sizeof st, 0, (double)(st.l.outer * st.l.len * st.l.inner));
}

static void cumsum_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const cumsum_state *s = ctx->state;
  const int64_t len = s->l.len, inner = s->l.inner;
  int64_t lo, hi;
  hwt_ops_rows(s->l.outer * inner, tid, nth, &lo, &hi);
  for (int64_t line = lo; line < hi; line++) {
    const int64_t base = (line / inner) * len * inner + line % inner;
    float acc = 0.0f;
    for (int64_t j = 0; j < len; j++) {
      const int64_t at = base + (s->reverse ? len - 1 - j : j) * inner;
      const float v = ctx->in[0][at];
      if (s->exclusive) {
        ctx->out[0][at] = acc;
        acc += v;
      } else {
        acc += v;
        ctx->out[0][at] = acc;
      }
    }
  }
}

/* ---- expand and where: the output walked in rows of its last axis, each
 * input advancing by its own strides (0 along broadcast axes). */
typedef struct {
  int rank, n_in;
  int64_t shape[HWT_GRAPH_MAX_DIMS];     /* output shape */
  int64_t stride[3][HWT_GRAPH_MAX_DIMS]; /* per input; 0 = broadcast */
} bcast_state;

static int bcast_prepare(hwt_op_ctx *ctx, int n_in, char *err, size_t errlen) {
  if (ctx->n_in != n_in || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "wrong number of inputs");
  const int y = hwt_ops_out(ctx, 0);
  bcast_state st = {.rank = hwt_graph_tensor_ndim(ctx->g, y), .n_in = n_in};
  const int64_t *ys = hwt_graph_tensor_shape(ctx->g, y);
  for (int d = 0; d < st.rank; d++) st.shape[d] = ys[d];
  for (int k = 0; k < n_in; k++) {
    int r;
    const int64_t *s = hwt_ops_in_shape(ctx, k, &r);
    if (r > st.rank) return hwt_ops_fail(err, errlen, ctx, "input rank above the output's");
    int64_t step = 1;
    for (int d = st.rank - 1; d >= 0; d--) {
      const int sd = d - (st.rank - r);
      const int64_t dim = sd >= 0 ? s[sd] : 1;
      if (dim != ys[d] && dim != 1)
        return hwt_ops_fail(err, errlen, ctx, "input shapes do not broadcast to the output");
      st.stride[k][d] = dim == 1 ? 0 : step;
      step *= dim;
    }
  }
  const double n = (double)hwt_ops_numel(ctx->g, y);
  return hwt_ops_keep(ctx, &st, sizeof st, 0, n_in == 3 ? n : 0.0);
}

static int expand_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return bcast_prepare(ctx, 1, err, errlen);
}
static int where_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  return bcast_prepare(ctx, 3, err, errlen);
}

static void bcast_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bcast_state *s = ctx->state;
  const int last = s->rank - 1;
  const int64_t len = s->rank ? s->shape[last] : 1;
  int64_t lo, hi;
  hwt_ops_rows(s->rank ? hwt_ops_prod(s->shape, 0, last) : 1, tid, nth, &lo, &hi);
  for (int64_t row = lo; row < hi; row++) {
    int64_t off[3] = {0, 0, 0}, r = row;
    for (int d = last - 1; d >= 0; d--) {
      const int64_t c = r % s->shape[d];
      r /= s->shape[d];
      for (int k = 0; k < s->n_in; k++) off[k] += c * s->stride[k][d];
    }
    float *y = ctx->out[0] + row * len;
    const int64_t st0 = s->rank ? s->stride[0][last] : 0;
    const float *a = ctx->in[0] + off[0];
    if (s->n_in == 1) {
      for (int64_t j = 0; j < len; j++) y[j] = a[j * st0];
      continue;
    }
    const int64_t st1 = s->rank ? s->stride[1][last] : 0, st2 = s->rank ? s->stride[2][last] : 0;
    const float *b = ctx->in[1] + off[1], *c = ctx->in[2] + off[2];
    for (int64_t j = 0; j < len; j++) y[j] = a[j * st0] != 0.0f ? b[j * st1] : c[j * st2];
  }
}

static const hwt_op_impl k_indexing[] = {
    {"take", take_prepare, take_run, hwt_ops_free_state},
    {"gather_elements", ge_prepare, ge_run, hwt_ops_free_state},
    {"cumsum", cumsum_prepare, cumsum_run, hwt_ops_free_state},
    {"expand", expand_prepare, bcast_run, hwt_ops_free_state},
    {"where", where_prepare, bcast_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_indexing, k_indexing)
