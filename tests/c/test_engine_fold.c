/* Constant folding: ops whose inputs are all params (transitively) run once
 * in hwt_engine_prepare, never in hwt_engine_run, have no profiled event,
 * keep their outputs in storage the arena never reuses, and run again when a
 * param is re-bound. Under every scheduler, the outputs equal a plain-C
 * evaluation over several runs.
 *
 * Graph (test ops defined here through the registry's test hook):
 *   w (param) -> pack -> w2 -> pack -> w3        folded: 2 ops
 *   x (input) -> use(x, w3) -> a1 -> use(a1, w3) -> a2 -> use(a2, w3) -> y */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "check.h"

#define LEN 256


static _Atomic int pack_runs, use_runs;

static int prep(hwt_op_ctx *ctx, char *err, size_t errlen) {
  (void)ctx, (void)err, (void)errlen;
  return HWT_OK;
}

/* out = 2 * in + 1 (a stand-in for a weight layout transform) */
static void pack_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  (void)ws;
  if (tid == 0) atomic_fetch_add(&pack_runs, 1);
  for (int i = LEN * tid / nth; i < LEN * (tid + 1) / nth; i++) ctx->out[0][i] = 2 * ctx->in[0][i] + 1;
}

/* out = in0 * 0.5 + in1 */
static void use_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  (void)ws;
  if (tid == 0) atomic_fetch_add(&use_runs, 1);
  for (int i = LEN * tid / nth; i < LEN * (tid + 1) / nth; i++)
    ctx->out[0][i] = 0.5f * ctx->in[0][i] + ctx->in[1][i];
}

static const hwt_op_impl TEST_OPS[] = {{"test_pack", prep, pack_run, NULL},
                                       {"test_use", prep, use_run, NULL}};
const hwt_op_impl *hwt_ops_test(int *n) {
  *n = 2;
  return TEST_OPS;
}

static void expected(const float *x, const float *w, float *y) {
  for (int i = 0; i < LEN; i++) {
    float w3 = 2 * (2 * w[i] + 1) + 1, a = x[i];
    for (int k = 0; k < 3; k++) a = 0.5f * a + w3;
    y[i] = a;
  }
}

static void check_sched(hwt_graph *g, const char *sched, int ex, int th, int t_x, int t_w,
                        int t_y) {
  char what[64], err[256] = "";
  snprintf(what, sizeof what, "%s %dx%d", sched, ex, th);
  hwt_engine_config c;
  hwt_engine_config_init(&c);
  c.scheduler = sched;
  c.executors = ex;
  c.threads_per_executor = th;
  hwt_engine *e;
  CHECK(hwt_engine_create(g, &c, &e, err, sizeof err) == HWT_OK, "%s: create: %s", what, err);
  if (!e) return;
  CHECK(hwt_engine_n_folded(e) == 2, "%s: %d ops folded, want 2", what, hwt_engine_n_folded(e));
  CHECK(hwt_engine_op_folded(e, 0) == 1 && hwt_engine_op_folded(e, 1) == 1 &&
            hwt_engine_op_folded(e, 2) == 0,
        "%s: wrong ops folded", what);
  static float w[LEN], x[LEN], want[LEN];
  for (int i = 0; i < LEN; i++) {
    w[i] = (float)(i % 13) * 0.25f;
    x[i] = (float)(i % 7) - 3.0f;
  }
  expected(x, w, want);
  CHECK(hwt_engine_bind(e, t_w, w) == HWT_OK, "%s: bind", what);
  atomic_store(&pack_runs, 0);
  atomic_store(&use_runs, 0);
  CHECK(hwt_engine_prepare(e) == HWT_OK, "%s: prepare: %s", what, hwt_engine_error(e));
  CHECK(atomic_load(&pack_runs) == 2, "%s: prepare ran pack %d times, want 2", what,
        atomic_load(&pack_runs));
  memcpy(hwt_engine_tensor(e, t_x), x, sizeof x);
  for (int r = 0; r < 4; r++) {
    hwt_engine_profile(e, r == 3);
    CHECK(hwt_engine_run(e) == HWT_OK, "%s: run: %s", what, hwt_engine_error(e));
    CHECK(memcmp(hwt_engine_tensor(e, t_y), want, sizeof want) == 0, "%s: run %d: wrong output",
          what, r);
  }
  CHECK(atomic_load(&pack_runs) == 2, "%s: run() executed a folded op (%d packs)", what,
        atomic_load(&pack_runs));
  CHECK(atomic_load(&use_runs) == 12, "%s: %d use runs, want 12", what, atomic_load(&use_runs));
  hwt_op_event ev[8];
  int n = hwt_engine_events(e, ev, 8);
  CHECK(n == 3 && ev[0].op == 2 && ev[1].op == 3 && ev[2].op == 4, "%s: %d events (first op %d)",
        what, n, n > 0 ? ev[0].op : -1);
  /* A new param value is folded again at the next prepare. */
  for (int i = 0; i < LEN; i++) w[i] = -(float)(i % 5);
  expected(x, w, want);
  CHECK(hwt_engine_bind(e, t_w, w) == HWT_OK, "%s: re-bind", what);
  CHECK(hwt_engine_prepare(e) == HWT_OK, "%s: re-prepare", what);
  CHECK(hwt_engine_run(e) == HWT_OK, "%s: run after re-bind", what);
  CHECK(memcmp(hwt_engine_tensor(e, t_y), want, sizeof want) == 0,
        "%s: the re-bound param was not re-folded", what);
  CHECK(atomic_load(&pack_runs) == 4, "%s: %d packs after re-prepare, want 4", what,
        atomic_load(&pack_runs));
  hwt_engine_destroy(e);
}

int main(void) {
  hwt_graph *g = hwt_graph_create();
  int64_t shape[1] = {LEN};
  int w = hwt_graph_add_tensor(g, "w", 1, shape, HWT_TENSOR_PARAM);
  int w2 = hwt_graph_add_tensor(g, "w2", 1, shape, HWT_TENSOR_ACTIVATION);
  int w3 = hwt_graph_add_tensor(g, "w3", 1, shape, HWT_TENSOR_ACTIVATION);
  int x = hwt_graph_add_tensor(g, "x", 1, shape, HWT_TENSOR_INPUT);
  int a1 = hwt_graph_add_tensor(g, "a1", 1, shape, HWT_TENSOR_ACTIVATION);
  int a2 = hwt_graph_add_tensor(g, "a2", 1, shape, HWT_TENSOR_ACTIVATION);
  int y = hwt_graph_add_tensor(g, "y", 1, shape, HWT_TENSOR_OUTPUT);
  hwt_graph_add_op(g, "pack1", "test_pack", 1, &w, 1, &w2);
  hwt_graph_add_op(g, "pack2", "test_pack", 1, &w2, 1, &w3);
  int in1[2] = {x, w3}, in2[2] = {a1, w3}, in3[2] = {a2, w3};
  hwt_graph_add_op(g, "use1", "test_use", 2, in1, 1, &a1);
  hwt_graph_add_op(g, "use2", "test_use", 2, in2, 1, &a2);
  hwt_graph_add_op(g, "use3", "test_use", 2, in3, 1, &y);
  for (int row = 0; row < hwt_sched_count(); row++)
    for (int ex = 1; ex <= 2; ex++)
      for (int th = 1; th <= 2; th++)
        if (!(hwt_sched_at(row)->single_team && ex > 1))
          check_sched(g, hwt_sched_at(row)->name, ex, th, x, w, y);
  hwt_graph_destroy(g);
  return check_verdict("test_engine_fold: ok\n");
}
