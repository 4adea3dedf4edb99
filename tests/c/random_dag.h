/* Random DAGs of "test_add" ops for the scheduler tests (test_engine_sched,
 * test_engine_simulate): long chains mixed with wide levels, a third of the
 * ops tiny (below the engine's inline threshold), random per-op thread
 * counts and corun candidates. Include after defining LEN (floats per
 * tensor) and MAX_OPS; the including program registers "test_add". */
#ifndef HWTUNE_TEST_RANDOM_DAG_H
#define HWTUNE_TEST_RANDOM_DAG_H
#include <stdio.h>
#include <string.h>
#include "hwtune/graph.h"

#define MAX_T (MAX_OPS * 2 + 2)
#define N_CAND 3

/* A random DAG: tensors 0..1 are inputs, op k writes tensors out_[k][]. */
typedef struct {
  int n_ops, n_t;
  int n_in[MAX_OPS], in[MAX_OPS][4], n_out[MAX_OPS], out[MAX_OPS][2];
  int consumed[MAX_T], producer[MAX_T];
  double cost[MAX_OPS];
  int op_threads[MAX_OPS];
  int cand_threads[MAX_OPS * N_CAND];
  double cand_seconds[MAX_OPS * N_CAND];
} dag;

static inline unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

static inline void make_dag(dag *d, unsigned *s) {
  memset(d, 0, sizeof *d);
  d->n_ops = 1 + (int)(rnd(s) % MAX_OPS);
  d->n_t = 2;
  d->producer[0] = d->producer[1] = -1;
  /* Fan-in from a window of recent tensors (or anywhere) mixes long chains
   * with wide levels. */
  int window = 2 + (int)(rnd(s) % 12);
  for (int k = 0; k < d->n_ops; k++) {
    d->n_in[k] = 1 + (int)(rnd(s) % 4);
    for (int i = 0; i < d->n_in[k]; i++) {
      int lo = rnd(s) % 4 == 0 ? 0 : (d->n_t > window ? d->n_t - window : 0);
      int t = lo + (int)(rnd(s) % (unsigned)(d->n_t - lo));
      d->in[k][i] = t;
      d->consumed[t] = 1;
    }
    d->n_out[k] = 1 + (int)(rnd(s) % 2);
    for (int j = 0; j < d->n_out[k]; j++) {
      d->producer[d->n_t] = k;
      d->out[k][j] = d->n_t++;
    }
    /* A third of the ops are "tiny" (estimated below the inline threshold). */
    d->cost[k] = rnd(s) % 3 == 0 ? 1e-7 : 1e-3 * (1 + rnd(s) % 5);
    d->op_threads[k] = (int)(rnd(s) % 3); /* 0: team size */
    /* corun candidates: 1..3 of them, counts 1..4, some past the list end */
    int nc = 1 + (int)(rnd(s) % N_CAND);
    for (int c = 0; c < N_CAND; c++) {
      d->cand_threads[k * N_CAND + c] = c < nc ? 1 + (int)(rnd(s) % 4) : 0;
      d->cand_seconds[k * N_CAND + c] = rnd(s) % 4 == 0 ? -1.0 : 1e-4 * (1 + rnd(s) % 50);
    }
  }
}

static inline hwt_graph *build(const dag *d) {
  hwt_graph *g = hwt_graph_create();
  int64_t shape[1] = {LEN};
  char name[32];
  for (int t = 0; t < d->n_t; t++) {
    snprintf(name, sizeof name, "t%d", t);
    int kind = t < 2 ? HWT_TENSOR_INPUT
                     : (d->consumed[t] && t % 5 ? HWT_TENSOR_ACTIVATION : HWT_TENSOR_OUTPUT);
    hwt_graph_add_tensor(g, name, 1, shape, kind);
  }
  for (int k = 0; k < d->n_ops; k++) {
    snprintf(name, sizeof name, "op%d", k);
    hwt_graph_add_op(g, name, "test_add", d->n_in[k], d->in[k], d->n_out[k], d->out[k]);
    hwt_graph_op_set_cost(g, k, d->cost[k]);
  }
  return g;
}

#endif
