/* Whole-graph checks that no single builder call can make. */
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

typedef struct {
  const char *name;
  int id;
} named;

static int by_name(const void *a, const void *b) {
  const named *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* Sorting finds duplicates in O(n log n) without a hash table; reports the
 * alphabetically first duplicated name. Returns 1 if one was found. */
static int duplicate(named *items, int n, const char *what, char *err, size_t errlen) {
  qsort(items, (size_t)n, sizeof *items, by_name);
  for (int i = 1; i < n; i++)
    if (strcmp(items[i - 1].name, items[i].name) == 0) {
      gr_errorf(err, errlen, "duplicate %s name \"%s\" (%ss %d and %d)", what, items[i].name,
                what, items[i - 1].id, items[i].id);
      return 1;
    }
  return 0;
}

static int check_names(const hwt_graph *g, char *err, size_t errlen) {
  int most = g->n_tensors > g->n_ops ? g->n_tensors : g->n_ops;
  named *items = malloc(sizeof(named) * (size_t)(most ? most : 1));
  if (!items) {
    gr_errorf(err, errlen, "out of memory checking names");
    return HWT_ENOMEM;
  }
  int bad = 0;
  for (int i = 0; i < g->n_tensors; i++) items[i] = (named){g->tensors[i].name, i};
  bad = duplicate(items, g->n_tensors, "tensor", err, errlen);
  if (!bad) {
    for (int i = 0; i < g->n_ops; i++) items[i] = (named){g->ops[i].name, i};
    bad = duplicate(items, g->n_ops, "op", err, errlen);
  }
  free(items);
  return bad ? HWT_EINVAL : HWT_OK;
}

int gr_validate(const hwt_graph *g, gr_dag *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  if (!g) {
    gr_errorf(err, errlen, "no graph");
    return HWT_EINVAL;
  }
  if (g->first_err[0]) {
    gr_errorf(err, errlen, "%s", g->first_err);
    return HWT_EINVAL;
  }
  int st = check_names(g, err, errlen);
  if (st != HWT_OK) return st;
  for (int i = 0; i < g->n_tensors; i++) {
    const gr_tensor *t = &g->tensors[i];
    if (t->producer < 0 && (t->kind == HWT_TENSOR_ACTIVATION || t->kind == HWT_TENSOR_OUTPUT)) {
      gr_errorf(err, errlen, "%s tensor \"%s\" is never produced by an op",
                t->kind == HWT_TENSOR_OUTPUT ? "output" : "activation", t->name);
      return HWT_EINVAL;
    }
  }
  st = gr_dag_build(g, d, err, errlen);
  if (st != HWT_OK) return st;
  if (d->n_ordered < d->n) {
    gr_dag_describe_cycle(g, d, err, errlen);
    gr_dag_free(d);
    return HWT_EINVAL;
  }
  return HWT_OK;
}

int hwt_graph_validate(const hwt_graph *g, char *err, size_t errlen) {
  gr_dag d;
  int st = gr_validate(g, &d, err, errlen);
  gr_dag_free(&d);
  return st;
}
