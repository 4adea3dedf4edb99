/* Graph builder and accessors. Every refused call leaves the graph as it was,
 * so a caller may report the error and keep using the graph. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

static int refuse(hwt_graph *g, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(hwt_graph *g, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->last_err, sizeof g->last_err, fmt, ap);
  va_end(ap);
  if (!g->first_err[0]) memcpy(g->first_err, g->last_err, sizeof g->first_err);
  return status;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

/* Grows an array of `size`-byte items to hold one more; doubling keeps the
 * builder linear for the 2^31-op limit. */
static int grow(void **arr, int *cap, int used, size_t size) {
  if (used < *cap) return HWT_OK;
  int64_t want = *cap ? (int64_t)*cap * 2 : 64;
  if (want > INT_MAX) want = INT_MAX;
  if (want <= used) return HWT_ENOMEM;
  void *p = realloc(*arr, (size_t)want * size);
  if (!p) return HWT_ENOMEM;
  *arr = p;
  *cap = (int)want;
  return HWT_OK;
}

hwt_graph *hwt_graph_create(void) { return calloc(1, sizeof(hwt_graph)); }

static void free_attr(gr_attr *a) {
  free(a->key);
  free(a->values);
}

void hwt_graph_destroy(hwt_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
  for (int i = 0; i < g->n_ops; i++) {
    gr_op *op = &g->ops[i];
    free(op->name);
    free(op->type);
    free(op->io);
    for (int a = 0; a < op->n_attrs; a++) free_attr(&op->attrs[a]);
    free(op->attrs);
  }
  free(g->tensors);
  free(g->ops);
  free(g);
}

static const char *kind_name(int kind) {
  switch (kind) {
    case HWT_TENSOR_INPUT: return "input";
    case HWT_TENSOR_PARAM: return "param";
    case HWT_TENSOR_ACTIVATION: return "activation";
    case HWT_TENSOR_OUTPUT: return "output";
    default: return "?";
  }
}

int hwt_graph_add_tensor(hwt_graph *g, const char *name, int ndim, const int64_t *shape,
                         int kind) {
  if (!g) return HWT_EINVAL;
  if (!name || !name[0]) return refuse(g, HWT_EINVAL, "tensor %d: empty name", g->n_tensors);
  if (kind < HWT_TENSOR_INPUT || kind > HWT_TENSOR_OUTPUT)
    return refuse(g, HWT_EINVAL, "tensor \"%s\": unknown kind %d", name, kind);
  if (ndim < 0 || ndim > HWT_GRAPH_MAX_DIMS)
    return refuse(g, HWT_EINVAL, "tensor \"%s\": %d dimensions (at most %d)", name, ndim,
                  HWT_GRAPH_MAX_DIMS);
  if (ndim > 0 && !shape) return refuse(g, HWT_EINVAL, "tensor \"%s\": no shape", name);
  int64_t bytes = HWT_GRAPH_ELEM_BYTES;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 1)
      return refuse(g, HWT_EINVAL, "tensor \"%s\": dimension %d is %lld (must be >= 1)", name,
                    i, (long long)shape[i]);
    if (bytes > INT64_MAX / shape[i])
      return refuse(g, HWT_EINVAL, "tensor \"%s\": size overflows 64 bits", name);
    bytes *= shape[i];
  }
  if (g->n_tensors == INT_MAX) return refuse(g, HWT_EINVAL, "more than %d tensors", INT_MAX);
  if (grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors, sizeof(gr_tensor)))
    return refuse(g, HWT_ENOMEM, "tensor \"%s\": out of memory", name);
  gr_tensor *t = &g->tensors[g->n_tensors];
  memset(t, 0, sizeof *t);
  if (!(t->name = dup_str(name))) return refuse(g, HWT_ENOMEM, "out of memory");
  t->kind = kind;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->bytes = bytes;
  t->producer = -1;
  return g->n_tensors++;
}

int hwt_graph_add_op(hwt_graph *g, const char *name, const char *op_type, int n_in,
                     const int *in, int n_out, const int *out) {
  if (!g) return HWT_EINVAL;
  if (!name || !name[0]) return refuse(g, HWT_EINVAL, "op %d: empty name", g->n_ops);
  if (!op_type || !op_type[0]) return refuse(g, HWT_EINVAL, "op \"%s\": empty op type", name);
  if (n_in < 0 || (n_in > 0 && !in))
    return refuse(g, HWT_EINVAL, "op \"%s\": bad input list (%d inputs)", name, n_in);
  if (n_out < 1 || !out)
    return refuse(g, HWT_EINVAL, "op \"%s\": needs at least one output", name);
  if (n_in > INT_MAX - n_out) return refuse(g, HWT_EINVAL, "op \"%s\": too many tensors", name);
  for (int i = 0; i < n_in; i++)
    if (in[i] < 0 || in[i] >= g->n_tensors)
      return refuse(g, HWT_EINVAL, "op \"%s\": input %d is tensor id %d, but the graph has %d "
                    "tensors", name, i, in[i], g->n_tensors);
  for (int i = 0; i < n_out; i++) {
    if (out[i] < 0 || out[i] >= g->n_tensors)
      return refuse(g, HWT_EINVAL, "op \"%s\": output %d is tensor id %d, but the graph has %d "
                    "tensors", name, i, out[i], g->n_tensors);
    const gr_tensor *t = &g->tensors[out[i]];
    if (t->kind == HWT_TENSOR_INPUT || t->kind == HWT_TENSOR_PARAM)
      return refuse(g, HWT_EINVAL, "op \"%s\": writes %s tensor \"%s\" (only activations and "
                    "outputs are produced by ops)", name, kind_name(t->kind), t->name);
    if (t->producer >= 0)
      return refuse(g, HWT_EINVAL, "tensor \"%s\" is produced twice: by op \"%s\" and op \"%s\"",
                    t->name, g->ops[t->producer].name, name);
    for (int j = 0; j < i; j++)
      if (out[j] == out[i])
        return refuse(g, HWT_EINVAL, "tensor \"%s\" is produced twice: op \"%s\" lists it as "
                      "output %d and %d", t->name, name, j, i);
  }
  if (g->n_ops == INT_MAX) return refuse(g, HWT_EINVAL, "more than %d ops", INT_MAX);
  if (grow((void **)&g->ops, &g->cap_ops, g->n_ops, sizeof(gr_op)))
    return refuse(g, HWT_ENOMEM, "op \"%s\": out of memory", name);
  gr_op *op = &g->ops[g->n_ops];
  memset(op, 0, sizeof *op);
  op->name = dup_str(name);
  op->type = dup_str(op_type);
  op->io = malloc(sizeof(int) * (size_t)(n_in + n_out));
  if (!op->name || !op->type || !op->io) {
    free(op->name);
    free(op->type);
    free(op->io);
    return refuse(g, HWT_ENOMEM, "op \"%s\": out of memory", name);
  }
  op->n_in = n_in;
  op->n_out = n_out;
  if (n_in) memcpy(op->io, in, sizeof(int) * (size_t)n_in);
  memcpy(op->io + n_in, out, sizeof(int) * (size_t)n_out);
  for (int i = 0; i < n_out; i++) g->tensors[out[i]].producer = g->n_ops;
  return g->n_ops++;
}

static gr_op *op_at(const hwt_graph *g, int op) {
  return (g && op >= 0 && op < g->n_ops) ? &g->ops[op] : NULL;
}

static gr_attr *find_attr(const gr_op *op, const char *key) {
  if (!op || !key) return NULL;
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].key, key) == 0) return &op->attrs[i];
  return NULL;
}

static int set_attr(hwt_graph *g, int op_id, const char *key, int kind, int n,
                    const void *values, size_t elem) {
  gr_op *op = op_at(g, op_id);
  if (!g) return HWT_EINVAL;
  if (!op) return refuse(g, HWT_EINVAL, "attribute on op id %d, but the graph has %d ops",
                         op_id, g->n_ops);
  if (!key || !key[0]) return refuse(g, HWT_EINVAL, "op \"%s\": empty attribute key", op->name);
  if (n < 0 || (n > 0 && !values))
    return refuse(g, HWT_EINVAL, "op \"%s\": attribute \"%s\" has no values", op->name, key);
  void *copy = malloc(elem * (size_t)(n ? n : 1));
  if (!copy) return refuse(g, HWT_ENOMEM, "op \"%s\": out of memory", op->name);
  if (n) memcpy(copy, values, elem * (size_t)n);
  gr_attr *a = find_attr(op, key);
  if (!a) {
    gr_attr *grown = realloc(op->attrs, sizeof(gr_attr) * (size_t)(op->n_attrs + 1));
    char *k = dup_str(key);
    if (grown) op->attrs = grown;
    if (!grown || !k) {
      free(copy);
      free(k);
      return refuse(g, HWT_ENOMEM, "op \"%s\": out of memory", op->name);
    }
    a = &op->attrs[op->n_attrs++];
    a->key = k;
    a->values = NULL;
  }
  free(a->values);
  a->values = copy;
  a->kind = kind;
  a->n = n;
  return HWT_OK;
}

int hwt_graph_op_set_ints(hwt_graph *g, int op, const char *key, int n, const int64_t *values) {
  return set_attr(g, op, key, HWT_ATTR_INTS, n, values, sizeof(int64_t));
}

int hwt_graph_op_set_floats(hwt_graph *g, int op, const char *key, int n,
                            const double *values) {
  return set_attr(g, op, key, HWT_ATTR_FLOATS, n, values, sizeof(double));
}

int hwt_graph_op_attr_kind(const hwt_graph *g, int op, const char *key) {
  const gr_attr *a = find_attr(op_at(g, op), key);
  return a ? a->kind : HWT_ATTR_NONE;
}

static int get_attr(const hwt_graph *g, int op, const char *key, int kind, void *out, int max,
                    size_t elem) {
  const gr_attr *a = find_attr(op_at(g, op), key);
  if (!a || a->kind != kind || max < 0 || (max > 0 && !out)) return HWT_EINVAL;
  int n = a->n < max ? a->n : max;
  if (n) memcpy(out, a->values, elem * (size_t)n);
  return a->n;
}

int hwt_graph_op_get_ints(const hwt_graph *g, int op, const char *key, int64_t *out, int max) {
  return get_attr(g, op, key, HWT_ATTR_INTS, out, max, sizeof(int64_t));
}

int hwt_graph_op_get_floats(const hwt_graph *g, int op, const char *key, double *out,
                            int max) {
  return get_attr(g, op, key, HWT_ATTR_FLOATS, out, max, sizeof(double));
}

int hwt_graph_op_set_cost(hwt_graph *g, int op_id, double seconds) {
  gr_op *op = op_at(g, op_id);
  if (!g) return HWT_EINVAL;
  if (!op) return refuse(g, HWT_EINVAL, "cost on op id %d, but the graph has %d ops", op_id,
                         g->n_ops);
  if (!(seconds >= 0.0) || seconds > 1e30) /* also refuses NaN */
    return refuse(g, HWT_EINVAL, "op \"%s\": cost %g s (must be finite and >= 0)", op->name,
                  seconds);
  op->cost = seconds;
  op->has_cost = 1;
  return HWT_OK;
}

int hwt_graph_op_set_work(hwt_graph *g, int op_id, double flops, double bytes) {
  gr_op *op = op_at(g, op_id);
  if (!g) return HWT_EINVAL;
  if (!op) return refuse(g, HWT_EINVAL, "work on op id %d, but the graph has %d ops", op_id,
                         g->n_ops);
  if (!(flops >= 0.0) || !(bytes >= 0.0) || flops > 1e30 || bytes > 1e30)
    return refuse(g, HWT_EINVAL, "op \"%s\": work %g flops, %g bytes (must be finite and "
                  ">= 0)", op->name, flops, bytes);
  op->flops = flops;
  op->bytes = bytes;
  op->has_work = 1;
  return HWT_OK;
}

int hwt_graph_op_cost(const hwt_graph *g, int op_id, double *seconds) {
  const gr_op *op = op_at(g, op_id);
  if (!op) return HWT_EINVAL;
  if (op->has_cost && seconds) *seconds = op->cost;
  return op->has_cost;
}

const char *hwt_graph_error(const hwt_graph *g) { return g ? g->last_err : ""; }

int hwt_graph_n_tensors(const hwt_graph *g) { return g ? g->n_tensors : HWT_EINVAL; }
int hwt_graph_n_ops(const hwt_graph *g) { return g ? g->n_ops : HWT_EINVAL; }

static const gr_tensor *tensor_at(const hwt_graph *g, int t) {
  return (g && t >= 0 && t < g->n_tensors) ? &g->tensors[t] : NULL;
}

/* The read-only getters: one field of the tensor or op at id, or `none`
 * for a NULL graph or an id out of range. */
#define GR_GETTER(ret, fn, elem, at, field, none) \
  ret fn(const hwt_graph *g, int id) {             \
    const elem *x = at(g, id);                     \
    return x ? (field) : (none);                   \
  }

GR_GETTER(const char *, hwt_graph_tensor_name, gr_tensor, tensor_at, x->name, NULL)
GR_GETTER(int, hwt_graph_tensor_kind, gr_tensor, tensor_at, x->kind, HWT_EINVAL)
GR_GETTER(int, hwt_graph_tensor_ndim, gr_tensor, tensor_at, x->ndim, HWT_EINVAL)
GR_GETTER(const int64_t *, hwt_graph_tensor_shape, gr_tensor, tensor_at, x->shape, NULL)
GR_GETTER(int64_t, hwt_graph_tensor_bytes, gr_tensor, tensor_at, x->bytes, HWT_EINVAL)
GR_GETTER(int, hwt_graph_tensor_producer, gr_tensor, tensor_at, x->producer, HWT_EINVAL)

GR_GETTER(const char *, hwt_graph_op_name, gr_op, op_at, x->name, NULL)
GR_GETTER(const char *, hwt_graph_op_type, gr_op, op_at, x->type, NULL)
GR_GETTER(int, hwt_graph_op_n_inputs, gr_op, op_at, x->n_in, HWT_EINVAL)
GR_GETTER(const int *, hwt_graph_op_inputs, gr_op, op_at, x->io, NULL)
GR_GETTER(int, hwt_graph_op_n_outputs, gr_op, op_at, x->n_out, HWT_EINVAL)
GR_GETTER(const int *, hwt_graph_op_outputs, gr_op, op_at, x->io + x->n_in, NULL)
