/* Helpers shared by the eltwise, pool, norm and movement op families:
 * attribute reads with model.json defaults, shape products, and the split
 * of a flat output range over threads. */
#ifndef HWTUNE_OPS_UTIL_H
#define HWTUNE_OPS_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "hwtune/op.h"

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

#endif
