/* Op-level dependency DAG and its deterministic topological order. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "hwtune/free_all.h"

void gr_dag_free(gr_dag *d) {
  HWT_FREE_ALL(d->pred_off, d->pred, d->succ_off, d->succ, d->order);
  memset(d, 0, sizeof *d);
}

/* Binary min-heap of op ids: Kahn's ready set, so ties go to the lowest id
 * and the order depends only on the graph, never on insertion history. */
static void heap_push(int *h, int *n, int v) {
  int i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] > v) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static int heap_pop(int *h, int *n) {
  int top = h[0], last = h[--(*n)], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= last) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = last;
  return top;
}

static int kahn(gr_dag *d) {
  int n = d->n;
  int *waiting = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int *heap = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!waiting || !heap) {
    free(waiting);
    free(heap);
    return HWT_ENOMEM;
  }
  int hn = 0;
  for (int v = 0; v < n; v++) {
    waiting[v] = d->pred_off[v + 1] - d->pred_off[v];
    if (waiting[v] == 0) heap_push(heap, &hn, v);
  }
  d->n_ordered = 0;
  while (hn > 0) {
    int u = heap_pop(heap, &hn);
    d->order[d->n_ordered++] = u;
    for (int e = d->succ_off[u]; e < d->succ_off[u + 1]; e++)
      if (--waiting[d->succ[e]] == 0) heap_push(heap, &hn, d->succ[e]);
  }
  free(waiting);
  free(heap);
  return HWT_OK;
}

int gr_dag_build(const hwt_graph *g, gr_dag *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  int n = g->n_ops;
  size_t n1 = (size_t)n + 1;
  d->n = n;
  int *mark = malloc(sizeof(int) * (size_t)(n ? n : 1));
  d->pred_off = calloc(n1, sizeof(int));
  d->succ_off = calloc(n1 + 1, sizeof(int)); /* +1: shifted prefix sums */
  d->order = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!mark || !d->pred_off || !d->succ_off || !d->order) goto nomem;
  for (int v = 0; v < n; v++) mark[v] = -1;

  /* Distinct producers of each op's inputs; a producer reading its own
   * output is kept as a self-edge so that it shows up as a cycle. */
  int64_t edges = 0;
  for (int v = 0; v < n; v++) {
    for (int i = 0, u; (u = gr_next_input(g, v, 1, &i, mark)) >= 0;) {
      edges++;
      d->succ_off[u + 2]++;
    }
    if (edges > INT_MAX) {
      gr_errorf(err, errlen, "more than %d dependency edges", INT_MAX);
      free(mark);
      gr_dag_free(d);
      return HWT_EINVAL;
    }
    d->pred_off[v + 1] = (int)edges;
  }
  d->pred = malloc(sizeof(int) * (size_t)(edges ? edges : 1));
  d->succ = malloc(sizeof(int) * (size_t)(edges ? edges : 1));
  if (!d->pred || !d->succ) goto nomem;
  for (int u = 0; u < n; u++) d->succ_off[u + 2] += d->succ_off[u + 1];
  /* succ_off[u+1] is the fill cursor of u; visiting v ascending leaves every
   * successor list sorted and ends with succ_off[u] = start of u. */
  for (int v = 0; v < n; v++) mark[v] = -1;
  for (int v = 0; v < n; v++)
    for (int i = 0, u; (u = gr_next_input(g, v, 1, &i, mark)) >= 0;)
      d->succ[d->succ_off[u + 1]++] = v;
  /* Predecessor lists from the successor lists, ascending by construction. */
  int *cursor = mark;
  for (int v = 0; v < n; v++) cursor[v] = d->pred_off[v];
  for (int u = 0; u < n; u++)
    for (int e = d->succ_off[u]; e < d->succ_off[u + 1]; e++) d->pred[cursor[d->succ[e]]++] = u;
  free(mark);
  mark = NULL;
  if (kahn(d) != HWT_OK) goto nomem;
  return HWT_OK;
nomem:
  free(mark);
  gr_dag_free(d);
  gr_errorf(err, errlen, "out of memory building the dependency graph of %d ops", n);
  return HWT_ENOMEM;
}

/* Appends s to err at *len, keeping the text terminated when it is cut. */
static void append(char *err, size_t errlen, size_t *len, const char *s) {
  size_t k = strlen(s);
  if (*len + 1 >= errlen) return;
  if (*len + k + 1 > errlen) k = errlen - 1 - *len;
  memcpy(err + *len, s, k);
  *len += k;
  err[*len] = '\0';
}

void gr_dag_describe_cycle(const hwt_graph *g, const gr_dag *d, char *err, size_t errlen) {
  if (!err || errlen == 0) return;
  int n = d->n;
  char *done = calloc((size_t)(n ? n : 1), 1);
  int *seen = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int *path = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!done || !seen || !path) {
    gr_errorf(err, errlen, "the graph has a cycle");
    goto out;
  }
  for (int i = 0; i < d->n_ordered; i++) done[d->order[i]] = 1;
  int start = 0;
  while (start < n && done[start]) start++;
  for (int v = 0; v < n; v++) seen[v] = -1;
  /* Every op left out of the order waits on another left-out op, so walking
   * the lowest such predecessor must revisit an op: that closes a cycle. */
  int len = 0, v = start;
  while (seen[v] < 0) {
    seen[v] = len;
    path[len++] = v;
    int next = -1;
    for (int e = d->pred_off[v]; e < d->pred_off[v + 1]; e++)
      if (!done[d->pred[e]]) {
        next = d->pred[e];
        break;
      }
    v = next;
  }
  int first = seen[v], k = len - first;
  /* path[first..len) walks predecessors: reverse it into data-flow order,
   * starting at the cycle's lowest op id. */
  int lo = first;
  for (int i = first; i < len; i++)
    if (path[i] < path[lo]) lo = i;
  size_t at = 0;
  err[0] = '\0';
  append(err, errlen, &at, "cycle: ");
  for (int j = 0; j <= k; j++) {
    int idx = first + ((lo - first) - j % k + k) % k;
    if (j) append(err, errlen, &at, " -> ");
    append(err, errlen, &at, g->ops[path[idx]].name);
  }
out:
  free(done);
  free(seen);
  free(path);
}
