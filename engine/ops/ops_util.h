/* Helpers shared by the op families (engine/ops/): attribute reads with
 * model.json defaults, shape products, the split of a flat output range over
 * threads, and the parts every family writes the same way: prepare's last
 * step, the release of a one-block state, the family's table accessor. */
#ifndef HWTUNE_OPS_UTIL_H
#define HWTUNE_OPS_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/op.h"

/* NCHW CONVs whose weights change every run (a training step's conv2d,
 * and conv2d_grad_data run as a forward CONV) take Winograd only with at
 * least this many output pixels (N x OH x OW) per thread: every share
 * transforms the whole weight tensor per run. Measured per run at batch 16
 * (EPYC Zen 1, AVX2, 1 thread, CPU time, against the direct template):
 * 64x56x56 1.15x, 128x28x28 1.85x, 256x14x14 1.8x, 128->256 at 28x28
 * stride 2 1.25x (3136 or more pixels); 512x7x7 0.85-1.0x, 256->512 at
 * 14x14 stride 2 0.8-0.9x (784 pixels). */
#define HWT_OPS_WINO_PER_RUN_PIXELS 1568

/* 16 floats = one 64-byte line: thread boundaries on whole lines keep two
 * threads from writing the same line (no false sharing), given 64-byte
 * aligned buffers, which the arena guarantees. */
#define HWT_OPS_CHUNK_ALIGN 16

static inline void hwt_ops_range(int64_t n, int tid, int nth, int64_t *lo, int64_t *hi) {
  int64_t per = (n + nth - 1) / nth;
  per = (per + HWT_OPS_CHUNK_ALIGN - 1) / HWT_OPS_CHUNK_ALIGN * HWT_OPS_CHUNK_ALIGN;
  int64_t a = per * tid, b = a + per;
  *lo = a < n ? a : n;
  *hi = b < n ? b : n;
}

/* Rows (units that must not be split) shared out evenly. */
static inline void hwt_ops_rows(int64_t n, int tid, int nth, int64_t *lo, int64_t *hi) {
  *lo = n * tid / nth;
  *hi = n * (tid + 1) / nth;
}

static inline int64_t hwt_ops_prod(const int64_t *s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= s[i];
  return p;
}

static inline int64_t hwt_ops_numel(const hwt_graph *g, int t) {
  return hwt_ops_prod(hwt_graph_tensor_shape(g, t), 0, hwt_graph_tensor_ndim(g, t));
}

/* The op's idx-th input/output tensor id. */
static inline int hwt_ops_in(const hwt_op_ctx *c, int idx) {
  return hwt_graph_op_inputs(c->g, c->op)[idx];
}
static inline int hwt_ops_out(const hwt_op_ctx *c, int idx) {
  return hwt_graph_op_outputs(c->g, c->op)[idx];
}

/* An int attribute (first value), or def when the model left it unset. */
static inline int64_t hwt_ops_int(const hwt_op_ctx *c, const char *key, int64_t def) {
  int64_t v = def;
  if (hwt_graph_op_attr_kind(c->g, c->op, key) == HWT_ATTR_INTS)
    hwt_graph_op_get_ints(c->g, c->op, key, &v, 1);
  return v;
}

/* The "axis" attribute (def when unset) for a tensor of this rank, negative
 * counting from the end, into *axis: 0, or 1 when it is out of range. */
static inline int hwt_ops_axis(const hwt_op_ctx *c, int rank, int64_t def, int64_t *axis) {
  int64_t a = hwt_ops_int(c, "axis", def);
  if (a < 0) a += rank;
  *axis = a;
  return a < 0 || a >= rank;
}

/* A float attribute; an integer given for it (e.g. scale 2) counts too. */
static inline double hwt_ops_float(const hwt_op_ctx *c, const char *key, double def) {
  int kind = hwt_graph_op_attr_kind(c->g, c->op, key);
  if (kind == HWT_ATTR_FLOATS) {
    double v = def;
    hwt_graph_op_get_floats(c->g, c->op, key, &v, 1);
    return v;
  }
  if (kind == HWT_ATTR_INTS) return (double)hwt_ops_int(c, key, 0);
  return def;
}

/* A pair attribute ([h, w], or one int for both); 0 when set, 1 if unset. */
static inline int hwt_ops_pair(const hwt_op_ctx *c, const char *key, int64_t v[2]) {
  int64_t buf[2];
  int n = hwt_graph_op_attr_kind(c->g, c->op, key) == HWT_ATTR_INTS
              ? hwt_graph_op_get_ints(c->g, c->op, key, buf, 2)
              : 0;
  if (n == 1) buf[1] = buf[0];
  if (n < 1 || n > 2) return 1;
  v[0] = buf[0];
  v[1] = buf[1];
  return 0;
}

/* 1 when a string attribute (character codes) equals s; def if unset. */
static inline int hwt_ops_str_is(const hwt_op_ctx *c, const char *key, const char *s, int def) {
  if (hwt_graph_op_attr_kind(c->g, c->op, key) != HWT_ATTR_INTS) return def;
  int64_t buf[32];
  int n = hwt_graph_op_get_ints(c->g, c->op, key, buf, 32);
  if (n != (int)strlen(s)) return 0;
  for (int i = 0; i < n; i++)
    if (buf[i] != (unsigned char)s[i]) return 0;
  return 1;
}

static inline int hwt_ops_fail(char *err, size_t errlen, const hwt_op_ctx *c, const char *why) {
  if (err && errlen) snprintf(err, errlen, "op \"%s\": %s", hwt_graph_op_name(c->g, c->op), why);
  return HWT_EINVAL;
}

/* The idx-th input's shape, its rank into *rank. */
static inline const int64_t *hwt_ops_in_shape(const hwt_op_ctx *c, int idx, int *rank) {
  const int t = hwt_ops_in(c, idx);
  *rank = hwt_graph_tensor_ndim(c->g, t);
  return hwt_graph_tensor_shape(c->g, t);
}

/* Prepare's last step: the heap block `state` becomes the op's (release
 * frees it), with the workspace each thread needs and the op's flops. */
static inline int hwt_ops_prepared(hwt_op_ctx *c, void *state, size_t ws_floats, double flops) {
  c->state = state;
  c->ws_floats = ws_floats;
  c->flops = flops;
  return HWT_OK;
}

/* The same for a state prepare built in a local: a heap copy of its bytes. */
static inline int hwt_ops_keep(hwt_op_ctx *c, const void *st, size_t bytes, size_t ws_floats,
                               double flops) {
  void *heap = malloc(bytes);
  if (!heap) return HWT_ENOMEM;
  memcpy(heap, st, bytes);
  return hwt_ops_prepared(c, heap, ws_floats, flops);
}

/* release of every op whose state is one heap block. */
static inline void hwt_ops_free_state(hwt_op_ctx *c) {
  free(c->state);
  c->state = NULL;
}

/* Lines along an axis: a tensor seen as outer x len x inner, each line len
 * elements inner apart (softmax, softmax_grad, slice_grad, gather). */
typedef struct {
  int64_t outer, len, inner;
} hwt_ops_lines;

/* Shape s (rank dims) as lines along axis (0 <= axis < rank). */
static inline hwt_ops_lines hwt_ops_lines_at(const int64_t *s, int rank, int64_t axis) {
  const hwt_ops_lines l = {hwt_ops_prod(s, 0, (int)axis), s[axis],
                           hwt_ops_prod(s, (int)axis + 1, rank)};
  return l;
}

/* The idx-th input as lines along the "axis" attribute (def when unset,
 * negative from the end) into *l: 0, or 1 when the axis is out of range. */
static inline int hwt_ops_lines_of(const hwt_op_ctx *c, int idx, int64_t def, hwt_ops_lines *l) {
  int rank;
  const int64_t *s = hwt_ops_in_shape(c, idx, &rank);
  int64_t axis;
  if (hwt_ops_axis(c, rank, def, &axis)) return 1;
  *l = hwt_ops_lines_at(s, rank, axis);
  return 0;
}

/* prepare of an op on n_in inputs of one shape and one output of it, walked
 * in lines along "axis" (default -1; softmax, softmax_grad): the state is
 * the lines; `arity` says what the op takes. */
static inline int hwt_ops_lines_prepare(hwt_op_ctx *c, int n_in, const char *arity,
                                        double flops_per_element, char *err, size_t errlen) {
  hwt_ops_lines l;
  if (c->n_in != n_in || c->n_out != 1) return hwt_ops_fail(err, errlen, c, arity);
  if (hwt_ops_lines_of(c, 0, -1, &l)) return hwt_ops_fail(err, errlen, c, "axis out of range");
  return hwt_ops_keep(c, &l, sizeof l, 0, flops_per_element * (double)(l.outer * l.len * l.inner));
}

/* run of such an op: line(ctx, l, base) for each line of thread tid's share,
 * base the offset of the line's first element (its others follow inner
 * apart). Inlined with the constant `line`, so each op's loop compiles as if
 * written out. */
static inline __attribute__((always_inline)) void hwt_ops_each_line(
    const hwt_op_ctx *c, int tid, int nth,
    void (*line)(const hwt_op_ctx *, const hwt_ops_lines *, int64_t)) {
  const hwt_ops_lines *l = c->state;
  int64_t lo, hi;
  hwt_ops_rows(l->outer * l->inner, tid, nth, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) line(c, l, (i / l->inner) * l->len * l->inner + i % l->inner);
}

/* Defines the family's accessor `const hwt_op_impl *fn(int *n)` (hwtune/op.h)
 * over its static table. */
#define HWT_OPS_FAMILY(fn, table)                    \
  const hwt_op_impl *fn(int *n) {                     \
    *n = (int)(sizeof table / sizeof table[0]);       \
    return table;                                     \
  }

#endif
