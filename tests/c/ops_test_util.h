/* Shared by tests/c/test_ops_*.c: a one-op graph with its own buffers, run
 * through the op's hwt_op_impl the way the engine will (prepare once, every
 * share of nth, release), with outputs poisoned with NaN first so a share
 * that leaves elements unwritten is caught. */
#ifndef HWTUNE_OPS_TEST_UTIL_H
#define HWTUNE_OPS_TEST_UTIL_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/graph.h"
#include "hwtune/op.h"
#include "check.h"

typedef struct {
  hwt_graph *g;
  int op, n_in, n_out;
  int64_t in_n[HWT_OP_MAX_IO], out_n[HWT_OP_MAX_IO];
  float *in[HWT_OP_MAX_IO], *out[HWT_OP_MAX_IO];
} one_op;

static int64_t shape_numel(int ndim, const int64_t *s) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= s[i];
  return n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rnd(float lo, float hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}
static int rnd_int(int lo, int hi) { /* inclusive */
  return lo + (int)(rnd(0.0f, 1.0f) * (float)(hi - lo + 1)) % (hi - lo + 1);
}

/* in_shapes[i] / out_shapes[i] have ranks in_rank[i] / out_rank[i]; inputs
 * are filled with uniform values in [-3, 3]. */
static void one_op_build(one_op *t, const char *type, int n_in, const int *in_rank,
                         const int64_t (*in_shapes)[HWT_GRAPH_MAX_DIMS], int n_out,
                         const int *out_rank, const int64_t (*out_shapes)[HWT_GRAPH_MAX_DIMS]) {
  memset(t, 0, sizeof *t);
  t->g = hwt_graph_create();
  int ids_in[HWT_OP_MAX_IO], ids_out[HWT_OP_MAX_IO];
  char name[32];
  for (int i = 0; i < n_in; i++) {
    snprintf(name, sizeof name, "x%d", i);
    ids_in[i] = hwt_graph_add_tensor(t->g, name, in_rank[i], in_shapes[i], HWT_TENSOR_INPUT);
    t->in_n[i] = shape_numel(in_rank[i], in_shapes[i]);
    t->in[i] = alloc_floats(t->in_n[i]);
    for (int64_t k = 0; k < t->in_n[i]; k++) t->in[i][k] = rnd(-3.0f, 3.0f);
  }
  for (int i = 0; i < n_out; i++) {
    snprintf(name, sizeof name, "y%d", i);
    ids_out[i] = hwt_graph_add_tensor(t->g, name, out_rank[i], out_shapes[i], HWT_TENSOR_OUTPUT);
    t->out_n[i] = shape_numel(out_rank[i], out_shapes[i]);
    t->out[i] = alloc_floats(t->out_n[i]);
  }
  t->op = hwt_graph_add_op(t->g, "op", type, n_in, ids_in, n_out, ids_out);
  t->n_in = n_in;
  t->n_out = n_out;
}

static void one_op_free(one_op *t) {
  for (int i = 0; i < t->n_in; i++) free(t->in[i]);
  for (int i = 0; i < t->n_out; i++) free(t->out[i]);
  hwt_graph_destroy(t->g);
}

/* The registry declares the families weak, and a weak reference does not
 * pull an object out of a static archive: without these strong references
 * a test linked against hwtune_static would find no op at all. */
static void link_families(void) {
  int n = 0;
  hwt_ops_eltwise(&n);
  hwt_ops_pool(&n);
  hwt_ops_norm(&n);
  hwt_ops_movement(&n);
}

/* HWT_OK after running every share, or prepare's status (err filled);
 * const_in: the bit mask of inputs prepare may take as constants (op.h). */
static int one_op_run_const(one_op *t, hwt_isa isa, int nth, unsigned const_in, char *err,
                            size_t errlen) {
  link_families();
  const hwt_op_impl *impl = hwt_ops_find(hwt_graph_op_type(t->g, t->op));
  if (!impl) {
    snprintf(err, errlen, "no implementation");
    return HWT_EINVAL;
  }
  hwt_op_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.g = t->g;
  ctx.op = t->op;
  ctx.n_in = t->n_in;
  ctx.n_out = t->n_out;
  for (int i = 0; i < t->n_in; i++) ctx.in[i] = t->in[i];
  for (int i = 0; i < t->n_out; i++) {
    ctx.out[i] = t->out[i];
    for (int64_t k = 0; k < t->out_n[i]; k++) t->out[i][k] = NAN;
  }
  ctx.isa = isa;
  ctx.max_threads = nth;
  ctx.const_in = const_in;
  int rc = impl->prepare(&ctx, err, errlen);
  if (rc != HWT_OK) return rc;
  float *ws = alloc_floats((int64_t)(ctx.ws_floats ? ctx.ws_floats : 1));
  for (int tid = nth - 1; tid >= 0; tid--) impl->run(&ctx, ws, tid, nth);
  free(ws);
  if (impl->release) impl->release(&ctx);
  return HWT_OK;
}

/* one_op_run_const with every input run-time. */
static int one_op_run(one_op *t, hwt_isa isa, int nth, char *err, size_t errlen) {
  return one_op_run_const(t, isa, nth, 0u, err, errlen);
}

/* Count of elements outside |got - want| <= atol + rtol |want| (NaN in got
 * always counts); prints the first. */
static int64_t compare(const char *what, const float *got, const float *want, int64_t n,
                       double rtol, double atol) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    int ok = !isnan(got[i]) && d <= atol + rtol * fabs((double)want[i]);
    if (rtol == 0.0 && atol == 0.0) ok = memcmp(&got[i], &want[i], sizeof(float)) == 0;
    if (!ok && bad++ == 0)
      fprintf(stderr, "%s: element %lld: got %.9g want %.9g\n", what, (long long)i, got[i],
              want[i]);
  }
  return bad;
}

/* Runs t at every nth of 1-4 (generic ISA) and compares each output k with
 * want[k] within tol (compare's rtol and atol; 0: bit for bit). The count of
 * mismatches, one more when prepare fails (then it stops). */
static inline int64_t one_op_check(one_op *t, float *const *want, const char *what, double tol) {
  int64_t bad = 0;
  char err[256];
  for (int nth = 1; nth <= 4; nth++) {
    if (one_op_run(t, HWT_ISA_GENERIC, nth, err, sizeof err) != HWT_OK) {
      fprintf(stderr, "%s: prepare failed: %s\n", what, err);
      return bad + 1;
    }
    for (int k = 0; k < t->n_out; k++)
      bad += compare(what, t->out[k], want[k], t->out_n[k], tol, tol);
  }
  return bad;
}

/* one_op_check, then frees want[0..n_out) (alloc_floats buffers) and t. */
static inline int64_t one_op_check_free(one_op *t, float **want, const char *what, double tol) {
  const int64_t bad = one_op_check(t, want, what, tol);
  for (int k = 0; k < t->n_out; k++) free(want[k]);
  one_op_free(t);
  return bad;
}

/* main's exit status: 1 after a line counting the mismatches, else
 * check_verdict's. */
static inline int one_op_verdict(int64_t bad) {
  if (bad) {
    fprintf(stderr, "FAIL: %lld mismatches\n", (long long)bad);
    return 1;
  }
  return check_verdict("ok\n");
}

#endif
