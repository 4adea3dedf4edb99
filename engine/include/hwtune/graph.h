/* The engine's computation graph, built through API calls so that the Python
 * lowering and a C model loader construct it the same way.
 *
 * Tensors and ops are numbered 0, 1, ... in the order they are added; every
 * id in the API is such an index. Tensors are float32 row-major (4 bytes per
 * element), up to HWT_GRAPH_MAX_DIMS dimensions. An op reads its input
 * tensors and writes its output tensors; a tensor has at most one producer.
 *
 * Errors: a builder call that is refused returns a negative status, leaves
 * the graph unchanged and records a one-line reason (hwt_graph_error()).
 * hwt_graph_validate() reports the first refused call again, so a loader that
 * ignores return codes still cannot plan a half-built graph.
 */
#ifndef HWTUNE_GRAPH_H
#define HWTUNE_GRAPH_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"

#define HWT_GRAPH_MAX_DIMS 8
#define HWT_GRAPH_ELEM_BYTES 4 /* float32, the only dtype */

typedef struct hwt_graph hwt_graph;

typedef enum {
  HWT_TENSOR_INPUT = 0,      /* fed by the caller; never produced by an op */
  HWT_TENSOR_PARAM = 1,      /* weights; never produced by an op */
  HWT_TENSOR_ACTIVATION = 2, /* intermediate; produced by exactly one op */
  HWT_TENSOR_OUTPUT = 3      /* produced by exactly one op; survives the run */
} hwt_tensor_kind;

typedef enum { HWT_ATTR_NONE = 0, HWT_ATTR_INTS = 1, HWT_ATTR_FLOATS = 2 } hwt_attr_kind;

HWT_API hwt_graph *hwt_graph_create(void); /* NULL if out of memory */
HWT_API void hwt_graph_destroy(hwt_graph *g);

/* Returns the new tensor's id (>= 0) or HWT_EINVAL / HWT_ENOMEM.
 * ndim 0..8 (0: a scalar), every dimension >= 1, name non-empty. */
HWT_API int hwt_graph_add_tensor(hwt_graph *g, const char *name, int ndim,
                                 const int64_t *shape, int kind);
/* Returns the new op's id (>= 0) or HWT_EINVAL / HWT_ENOMEM. Every id in
 * in[] / out[] must name an existing tensor; outputs must be activations or
 * outputs not produced by another op; n_out >= 1. At most INT_MAX ops. */
HWT_API int hwt_graph_add_op(hwt_graph *g, const char *name, const char *op_type,
                             int n_in, const int *in, int n_out, const int *out);

/* Attributes by key; setting a key again replaces its value (and kind). */
HWT_API int hwt_graph_op_set_ints(hwt_graph *g, int op, const char *key, int n,
                                  const int64_t *values);
HWT_API int hwt_graph_op_set_floats(hwt_graph *g, int op, const char *key, int n,
                                    const double *values);
/* HWT_ATTR_NONE when the op has no such key (or the op id is bad). */
HWT_API int hwt_graph_op_attr_kind(const hwt_graph *g, int op, const char *key);
/* Copy up to max values; return how many the attribute holds, or HWT_EINVAL
 * when the key is missing or holds the other kind. */
HWT_API int hwt_graph_op_get_ints(const hwt_graph *g, int op, const char *key,
                                  int64_t *out, int max);
HWT_API int hwt_graph_op_get_floats(const hwt_graph *g, int op, const char *key,
                                    double *out, int max);

/* Cost model inputs for the planner's priorities. An explicit cost (seconds,
 * estimated or profiled; >= 0) wins; otherwise the planner estimates one from
 * the op's work (flops, bytes moved) with its roofline rates; otherwise the
 * op costs hwt_plan_options.default_cost. */
HWT_API int hwt_graph_op_set_cost(hwt_graph *g, int op, double seconds);
HWT_API int hwt_graph_op_set_work(hwt_graph *g, int op, double flops, double bytes);
/* 1 and *seconds set when an explicit cost was given, 0 if not, HWT_EINVAL. */
HWT_API int hwt_graph_op_cost(const hwt_graph *g, int op, double *seconds);

/* Checks everything the builder could not check call by call: refused calls,
 * duplicate tensor or op names, activations and outputs no op produces, and
 * cycles (naming the ops on one). HWT_OK, or HWT_EINVAL with a one-line
 * reason in err. */
HWT_API int hwt_graph_validate(const hwt_graph *g, char *err, size_t errlen);
/* The last refused builder call's reason ("" if none). */
HWT_API const char *hwt_graph_error(const hwt_graph *g);

HWT_API int hwt_graph_n_tensors(const hwt_graph *g);
HWT_API int hwt_graph_n_ops(const hwt_graph *g);
/* Tensor accessors: NULL / negative for a bad id. */
HWT_API const char *hwt_graph_tensor_name(const hwt_graph *g, int t);
HWT_API int hwt_graph_tensor_kind(const hwt_graph *g, int t);
HWT_API int hwt_graph_tensor_ndim(const hwt_graph *g, int t);
HWT_API const int64_t *hwt_graph_tensor_shape(const hwt_graph *g, int t);
HWT_API int64_t hwt_graph_tensor_bytes(const hwt_graph *g, int t);
HWT_API int hwt_graph_tensor_producer(const hwt_graph *g, int t); /* -1: none */
/* Op accessors: NULL / negative for a bad id. */
HWT_API const char *hwt_graph_op_name(const hwt_graph *g, int op);
HWT_API const char *hwt_graph_op_type(const hwt_graph *g, int op);
HWT_API int hwt_graph_op_n_inputs(const hwt_graph *g, int op);
HWT_API const int *hwt_graph_op_inputs(const hwt_graph *g, int op);
HWT_API int hwt_graph_op_n_outputs(const hwt_graph *g, int op);
HWT_API const int *hwt_graph_op_outputs(const hwt_graph *g, int op);

#endif
