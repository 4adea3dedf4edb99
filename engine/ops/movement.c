/* Data-movement op family: concat, split, slice, reshape, flatten,
 * transpose, pad, gather.
 *
 * All five are row copies: around the axis, a tensor is outer rows of
 * (axis extent x inner) contiguous floats. concat fills each output row
 * from one segment per input; split cuts each input row into one segment
 * per output; slice copies one segment. reshape and flatten are a flat
 * copy, or nothing at all when the planner made the output a view of the
 * input (plan/views.c: same address). Threads share the flat range of the side that is
 * written contiguously, on cache-line boundaries. */
#include <stdlib.h>
#include "hwtune/conv.h"
#include "ops_util.h"

typedef enum { M_COPY, M_CONCAT, M_SPLIT, M_SLICE } move_kind;

typedef struct {
  move_kind kind;
  int parts;                    /* segments per row */
  int64_t total;                /* elements walked (output, or input for split) */
  int64_t row;                  /* elements per row of the walked side */
  int64_t src_row;              /* slice: elements per input row */
  int64_t begin;                /* slice: offset of the segment in an input row */
  int64_t seg[HWT_OP_MAX_IO];   /* segment length per part (axis extent x inner) */
  int64_t start[HWT_OP_MAX_IO]; /* segment start within the row */
} move_state;

static int axis_of(const hwt_op_ctx *ctx, int rank, int64_t *axis) {
  int64_t a = hwt_ops_int(ctx, "axis", 0);
  if (a < 0) a += rank;
  *axis = a;
  return a >= 0 && a < rank;
}

/* The shapes of an op of one input and one output (transpose, pad,
 * gather) and the input's rank: 0, or 1 when the op has other arity. */
static int one_in_one_out(const hwt_op_ctx *ctx, int *rank, const int64_t **xs,
                          const int64_t **ys) {
  if (ctx->n_in != 1 || ctx->n_out != 1) return 1;
  *xs = hwt_ops_in_shape(ctx, 0, rank);
  *ys = hwt_graph_tensor_shape(ctx->g, hwt_ops_out(ctx, 0));
  return 0;
}

/* Segments of the `parts` tensors ids[] joined along axis. */
static void segments(move_state *s, const hwt_op_ctx *ctx, int parts, const int *ids,
                     int64_t axis) {
  s->parts = parts;
  s->row = 0;
  for (int p = 0; p < parts; p++) {
    int rank = hwt_graph_tensor_ndim(ctx->g, ids[p]);
    s->seg[p] = hwt_ops_prod(hwt_graph_tensor_shape(ctx->g, ids[p]), (int)axis, rank);
    s->start[p] = s->row;
    s->row += s->seg[p];
  }
}

static int move_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const char *type = hwt_graph_op_type(ctx->g, ctx->op);
  int x = hwt_ops_in(ctx, 0), y = hwt_ops_out(ctx, 0);
  move_state st = {0};
  int64_t axis = 0;
  if (strcmp(type, "reshape") == 0 || strcmp(type, "flatten") == 0) {
    st.kind = M_COPY;
    if (ctx->n_in != 1 || ctx->n_out != 1 ||
        hwt_ops_numel(ctx->g, x) != hwt_ops_numel(ctx->g, y))
      return hwt_ops_fail(err, errlen, ctx, "element counts differ");
    st.total = hwt_ops_numel(ctx->g, y);
  } else if (strcmp(type, "concat") == 0 || strcmp(type, "split") == 0) {
    /* mirror images: concat joins its inputs into its one output, split
     * cuts its one input into its outputs; the joined side is walked */
    const int split = strcmp(type, "split") == 0;
    const int whole = split ? x : y;
    st.kind = split ? M_SPLIT : M_CONCAT;
    if ((split ? ctx->n_in : ctx->n_out) != 1 ||
        !axis_of(ctx, hwt_graph_tensor_ndim(ctx->g, whole), &axis))
      return hwt_ops_fail(err, errlen, ctx, split ? "bad axis or inputs" : "bad axis or outputs");
    if (split)
      segments(&st, ctx, ctx->n_out, hwt_graph_op_outputs(ctx->g, ctx->op), axis);
    else
      segments(&st, ctx, ctx->n_in, hwt_graph_op_inputs(ctx->g, ctx->op), axis);
    st.total = hwt_ops_numel(ctx->g, whole);
  } else if (strcmp(type, "slice") == 0) {
    st.kind = M_SLICE;
    int rank = hwt_graph_tensor_ndim(ctx->g, x);
    if (ctx->n_in != 1 || ctx->n_out != 1 || !axis_of(ctx, rank, &axis))
      return hwt_ops_fail(err, errlen, ctx, "bad axis");
    const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
    /* Python slice rules, step 1: negative counts from the end, clamped. */
    int64_t b = hwt_ops_int(ctx, "begin", 0), e = hwt_ops_int(ctx, "end", INT64_MAX);
    if (b < 0) b = b + xs[axis] < 0 ? 0 : b + xs[axis];
    if (e < 0) e = e + xs[axis] < 0 ? 0 : e + xs[axis];
    if (b > xs[axis]) b = xs[axis];
    if (e > xs[axis]) e = xs[axis];
    const int64_t *ys = hwt_graph_tensor_shape(ctx->g, y);
    if (e <= b || ys[axis] != e - b)
      return hwt_ops_fail(err, errlen, ctx, "slice bounds do not match the output");
    int64_t inner = hwt_ops_prod(xs, (int)axis + 1, rank);
    st.parts = 1;
    st.row = (e - b) * inner;
    st.seg[0] = st.row;
    st.src_row = xs[axis] * inner;
    st.begin = b * inner;
    st.total = hwt_ops_numel(ctx->g, y);
  } else {
    return hwt_ops_fail(err, errlen, ctx, "not a data-movement op");
  }
  return hwt_ops_keep(ctx, &st, sizeof st, 0, 0.0);
}

static void move_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const move_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_range(s->total, tid, nth, &lo, &hi);
  if (s->kind == M_COPY) {
    if (ctx->out[0] == ctx->in[0]) return; /* a view: the bytes are already there */
    if (hi > lo) memcpy(ctx->out[0] + lo, ctx->in[0] + lo, (size_t)(hi - lo) * sizeof(float));
    return;
  }
  if (s->kind == M_SLICE) {
    for (int64_t i = lo; i < hi;) {
      int64_t r = i / s->row, off = i % s->row;
      int64_t len = s->row - off < hi - i ? s->row - off : hi - i;
      memcpy(ctx->out[0] + i, ctx->in[0] + r * s->src_row + s->begin + off,
             (size_t)len * sizeof(float));
      i += len;
    }
    return;
  }
  /* concat / split: walk the contiguous side, one segment at a time. */
  for (int64_t i = lo; i < hi;) {
    int64_t r = i / s->row, off = i % s->row;
    int p = 0;
    while (off >= s->start[p] + s->seg[p]) p++;
    int64_t in_seg = off - s->start[p];
    int64_t len = s->seg[p] - in_seg < hi - i ? s->seg[p] - in_seg : hi - i;
    if (s->kind == M_CONCAT)
      memcpy(ctx->out[0] + i, ctx->in[p] + r * s->seg[p] + in_seg, (size_t)len * sizeof(float));
    else
      memcpy(ctx->out[p] + r * s->seg[p] + in_seg, ctx->in[0] + i, (size_t)len * sizeof(float));
    i += len;
  }
}

/* transpose: the output is walked in rows of its last axis; each row's
 * input start comes from its multi-index (one div/mod per axis per row, not
 * per element) and the row gathers at the input stride of the axis that
 * became last. Threads share output rows.
 *
 * A permutation that, once size-1 axes are dropped and axes that stay
 * neighbours are merged, swaps the last two axes of a batch of matrices
 * (NCHW <-> NHWC: (N, C, HW) <-> (N, HW, C)) is copied in square tiles
 * instead: a row gather at a stride of a whole channel plane touches one
 * cache line per element, and ConvNeXt-T's 36 such transposes took 4.1 ms
 * of its 125 (1 thread, Zen 4, benchmarks/op_breakdown.py, under load)
 * against ONNX Runtime's 1.9 ms for its transposes and reorders. The
 * tiles go through the CONV variants' 8x8 shuffles
 * (hwt_transpose_run_part); too small a matrix stays a row gather. */

typedef struct {
  int rank;
  int64_t shape[HWT_GRAPH_MAX_DIMS];  /* output shape */
  int64_t stride[HWT_GRAPH_MAX_DIMS]; /* input stride of output axis i */
  int64_t batch, rows, cols;          /* tiled: batch x (rows x cols) -> (cols x rows) */
  int tiled;
} transpose_state;

/* Whether perm (output axis i takes input axis perm[i]) of the input
 * shape xs is a batch of matrix transposes; sets batch, rows, cols. */
static int tiled_form(transpose_state *s, const int64_t *xs, const int64_t *perm, int rank) {
  int64_t p[HWT_GRAPH_MAX_DIMS], dim[HWT_GRAPH_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < rank; i++) {
    if (xs[perm[i]] == 1) continue; /* a size-1 axis moves nothing */
    if (n && perm[i] > p[n - 1]) {
      /* merged when only size-1 axes sit between them in the input */
      int between = 0;
      for (int64_t a = p[n - 1] + 1; a < perm[i]; a++) between |= xs[a] != 1;
      if (!between) {
        p[n - 1] = perm[i];
        dim[n - 1] *= xs[perm[i]];
        continue;
      }
    }
    p[n] = perm[i];
    dim[n++] = xs[perm[i]];
  }
  /* p[] now holds each merged group's last input axis: rank them. */
  int order[HWT_GRAPH_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    order[i] = 0;
    for (int j = 0; j < n; j++) order[i] += p[j] < p[i];
  }
  if (n < 2 || order[n - 1] != n - 2 || order[n - 2] != n - 1) return 0;
  for (int i = 0; i < n - 2; i++)
    if (order[i] != i) return 0;
  s->batch = 1;
  for (int i = 0; i < n - 2; i++) s->batch *= dim[i];
  s->rows = dim[n - 1]; /* the input's second-last group becomes the last */
  s->cols = dim[n - 2];
  return s->rows >= 8 && s->cols >= 8;
}

static int transpose_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  int rank;
  const int64_t *xs, *ys;
  if (one_in_one_out(ctx, &rank, &xs, &ys))
    return hwt_ops_fail(err, errlen, ctx, "transpose takes one input");
  int64_t perm[HWT_GRAPH_MAX_DIMS];
  int np = hwt_graph_op_get_ints(ctx->g, ctx->op, "perm", perm, HWT_GRAPH_MAX_DIMS);
  if (np <= 0) /* default: reversed axes */
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  else if (np != rank)
    return hwt_ops_fail(err, errlen, ctx, "perm must list every axis");
  transpose_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->rank = rank;
  int seen[HWT_GRAPH_MAX_DIMS] = {0};
  for (int i = 0; i < rank; i++) {
    int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
    if (p < 0 || p >= rank || seen[p]++ || ys[i] != xs[p]) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "perm is not a permutation matching the output");
    }
    perm[i] = p;
    s->shape[i] = ys[i];
    s->stride[i] = hwt_ops_prod(xs, (int)p + 1, rank);
  }
  s->tiled = tiled_form(s, xs, perm, rank);
  return hwt_ops_prepared(ctx, s, 0, 0.0);
}

static void transpose_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const transpose_state *s = ctx->state;
  int64_t lo, hi;
  if (s->tiled) {
    hwt_transpose_run_part(s->batch, s->rows, s->cols, ctx->in[0], ctx->out[0], tid, nth,
                           ctx->isa);
    return;
  }
  const int last = s->rank - 1;
  const int64_t len = s->rank ? s->shape[last] : 1, st = s->rank ? s->stride[last] : 0;
  hwt_ops_rows(hwt_ops_prod(s->shape, 0, last), tid, nth, &lo, &hi);
  for (int64_t row = lo; row < hi; row++) {
    int64_t off = 0, r = row;
    for (int i = last - 1; i >= 0; i--) {
      off += (r % s->shape[i]) * s->stride[i];
      r /= s->shape[i];
    }
    const float *x = ctx->in[0] + off;
    float *y = ctx->out[0] + row * len;
    if (st == 1) /* the last axis stays: a contiguous row (attention's head split) */
      memcpy(y, x, (size_t)len * sizeof(float));
    else
      for (int64_t j = 0; j < len; j++) y[j] = x[j * st];
  }
}

/* pad (constant mode): the output is walked in rows of its last axis, as
 * transpose does. A row whose outer multi-index falls in the padding of
 * some axis is all `value`; any other row is value, one contiguous input
 * row, value. Threads share output rows. */
typedef struct {
  int rank;
  float value;
  int64_t shape[HWT_GRAPH_MAX_DIMS];  /* output shape */
  int64_t in_shape[HWT_GRAPH_MAX_DIMS];
  int64_t begin[HWT_GRAPH_MAX_DIMS];  /* padding before each axis */
  int64_t stride[HWT_GRAPH_MAX_DIMS]; /* input stride of axis i */
} pad_state;

static int pad_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  int rank;
  const int64_t *xs, *ys;
  if (one_in_one_out(ctx, &rank, &xs, &ys))
    return hwt_ops_fail(err, errlen, ctx, "pad takes one input");
  int64_t pads[2 * HWT_GRAPH_MAX_DIMS];
  int np = hwt_graph_op_attr_kind(ctx->g, ctx->op, "pads") == HWT_ATTR_INTS
               ? hwt_graph_op_get_ints(ctx->g, ctx->op, "pads", pads, 2 * HWT_GRAPH_MAX_DIMS)
               : -1;
  if (np != 2 * rank || hwt_graph_tensor_ndim(ctx->g, hwt_ops_out(ctx, 0)) != rank)
    return hwt_ops_fail(err, errlen, ctx, "pads must give a begin and an end per axis");
  pad_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->rank = rank;
  s->value = (float)hwt_ops_float(ctx, "value", 0.0);
  for (int i = 0; i < rank; i++) {
    if (pads[i] < 0 || pads[i + rank] < 0 || ys[i] != xs[i] + pads[i] + pads[i + rank]) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "pads must be >= 0 and match the output shape");
    }
    s->shape[i] = ys[i];
    s->in_shape[i] = xs[i];
    s->begin[i] = pads[i];
    s->stride[i] = hwt_ops_prod(xs, i + 1, rank);
  }
  return hwt_ops_prepared(ctx, s, 0, 0.0);
}

static void fill(float *y, int64_t n, float v) {
  for (int64_t j = 0; j < n; j++) y[j] = v;
}

static void pad_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pad_state *s = ctx->state;
  if (s->rank == 0) { /* a scalar has nothing to pad */
    if (tid == 0) ctx->out[0][0] = ctx->in[0][0];
    return;
  }
  const int last = s->rank - 1;
  const int64_t len = s->shape[last], b = s->begin[last], n = s->in_shape[last];
  int64_t lo, hi;
  hwt_ops_rows(hwt_ops_prod(s->shape, 0, last), tid, nth, &lo, &hi);
  for (int64_t row = lo; row < hi; row++) {
    float *y = ctx->out[0] + row * len;
    int64_t off = 0, r = row;
    int inside = 1;
    for (int i = last - 1; i >= 0 && inside; i--) {
      int64_t k = r % s->shape[i] - s->begin[i];
      r /= s->shape[i];
      inside = k >= 0 && k < s->in_shape[i];
      off += k * s->stride[i];
    }
    if (!inside) {
      fill(y, len, s->value);
      continue;
    }
    fill(y, b, s->value);
    memcpy(y + b, ctx->in[0] + off, (size_t)n * sizeof(float));
    fill(y + b + n, len - b - n, s->value);
  }
}

/* gather (constant indices on one axis): output rows of `inner` floats, k
 * per outer index; row (o, j) is input row (o, idx[j]). Threads share
 * output rows. */
typedef struct {
  hwt_ops_lines x; /* the input along the axis */
  int64_t k;
  int64_t idx[]; /* k indices, non-negative */
} gather_state;

static int gather_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  int rank;
  const int64_t *xs, *ys;
  if (one_in_one_out(ctx, &rank, &xs, &ys))
    return hwt_ops_fail(err, errlen, ctx, "gather takes one input");
  int64_t axis = 0;
  if (!axis_of(ctx, rank, &axis) || hwt_graph_tensor_ndim(ctx->g, hwt_ops_out(ctx, 0)) != rank)
    return hwt_ops_fail(err, errlen, ctx, "bad axis");
  int64_t probe = 0;
  int k = hwt_graph_op_get_ints(ctx->g, ctx->op, "indices", &probe, 1);
  if (k < 1 || ys[axis] != k)
    return hwt_ops_fail(err, errlen, ctx, "indices must be as many as the output's axis");
  gather_state *s = malloc(sizeof *s + (size_t)k * sizeof(int64_t));
  if (!s) return HWT_ENOMEM;
  hwt_graph_op_get_ints(ctx->g, ctx->op, "indices", s->idx, k);
  s->x = hwt_ops_lines_at(xs, rank, axis);
  s->k = k;
  for (int j = 0; j < k; j++) {
    if (s->idx[j] < 0) s->idx[j] += s->x.len;
    if (s->idx[j] < 0 || s->idx[j] >= s->x.len) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx, "index out of range");
    }
  }
  return hwt_ops_prepared(ctx, s, 0, 0.0);
}

static void gather_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const gather_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->x.outer * s->k, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *src = ctx->in[0] + ((r / s->k) * s->x.len + s->idx[r % s->k]) * s->x.inner;
    memcpy(ctx->out[0] + r * s->x.inner, src, (size_t)s->x.inner * sizeof(float));
  }
}

#define MOVE(name) {name, move_prepare, move_run, hwt_ops_free_state}
static const hwt_op_impl k_movement[] = {
    MOVE("concat"), MOVE("split"), MOVE("slice"), MOVE("reshape"), MOVE("flatten"),
    {"transpose", transpose_prepare, transpose_run, hwt_ops_free_state},
    {"pad", pad_prepare, pad_run, hwt_ops_free_state},
    {"gather", gather_prepare, gather_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_movement, k_movement)
