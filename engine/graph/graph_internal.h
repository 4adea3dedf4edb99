/* Layout of hwt_graph shared by the builder, the validator and the planner. */
#ifndef HWTUNE_GRAPH_INTERNAL_H
#define HWTUNE_GRAPH_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/errorf.h"
#include "hwtune/graph.h"

typedef struct {
  char *key;
  int kind; /* hwt_attr_kind */
  int n;
  void *values; /* int64_t[n] or double[n] */
} gr_attr;

typedef struct {
  char *name;
  int kind;
  int ndim;
  int64_t shape[HWT_GRAPH_MAX_DIMS];
  int64_t bytes;
  int producer; /* op id, -1 while none */
} gr_tensor;

typedef struct {
  char *name;
  char *type;
  int n_in, n_out;
  int *io; /* inputs then outputs */
  double cost, flops, bytes;
  int has_cost, has_work;
  gr_attr *attrs;
  int n_attrs;
} gr_op;

#define GR_ERRLEN 256

struct hwt_graph {
  gr_tensor *tensors;
  gr_op *ops;
  int n_tensors, cap_tensors;
  int n_ops, cap_ops;
  char first_err[GR_ERRLEN]; /* first refused call: validation repeats it */
  char last_err[GR_ERRLEN];
};

/* Op-level dependency DAG: u -> v when v reads a tensor u writes; each pair
 * once. CSR in both directions, neighbours in ascending op id. */
typedef struct {
  int n;
  int *pred_off, *pred; /* pred_off[n+1] */
  int *succ_off, *succ; /* succ_off[n+1] */
  int *order;           /* Kahn order, smallest ready id first; n entries when acyclic */
  int n_ordered;        /* < n: the graph has a cycle */
} gr_dag;

/* Op v's inputs, each once: the next one from input *i on that was not yet
 * returned for v, as a tensor id (of_producer 0) or as the op producing it
 * (1; an input no op produces is skipped), or -1 when none is left.
 * mark[id] == v records what was returned (every mark < 0 before op 0).
 * The two-pass CSR builders (dag.c: op -> successor ops; the planner's
 * arena: tensor -> consumer ops) walk it once to count, once to fill. */
static inline int gr_next_input(const hwt_graph *g, int v, int of_producer, int *i, int *mark) {
  const gr_op *op = &g->ops[v];
  while (*i < op->n_in) {
    int id = op->io[(*i)++];
    if (of_producer) id = g->tensors[id].producer;
    if (id < 0 || mark[id] == v) continue;
    mark[id] = v;
    return id;
  }
  return -1;
}

/* Builds the DAG and the order. HWT_OK even for a cyclic graph (n_ordered <
 * n); HWT_ENOMEM, or HWT_EINVAL (with err) when edges exceed INT_MAX. */
int gr_dag_build(const hwt_graph *g, gr_dag *d, char *err, size_t errlen);
void gr_dag_free(gr_dag *d);
/* "cycle: a -> b -> a" for a DAG whose order stopped early. */
void gr_dag_describe_cycle(const hwt_graph *g, const gr_dag *d, char *err, size_t errlen);

/* hwt_graph_validate that hands the acyclic DAG (and its order) to the
 * caller on success, so a planner does not build it twice. On failure d is
 * empty (safe to gr_dag_free). */
int gr_validate(const hwt_graph *g, gr_dag *d, char *err, size_t errlen);

/* snprintf that tolerates err == NULL / errlen == 0. */
#define gr_errorf(...) ((void)hwt_errorf(0, __VA_ARGS__))

#endif
