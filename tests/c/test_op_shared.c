/* Shared derived constants (hwtune/op.h): one buffer per (constant, form,
 * size), filled by its first holder, freed with its last; private buffers
 * without a table. Then an engine whose matmuls share a param (an unrolled
 * recurrence) computes what plain C computes, also after the param is
 * re-bound with new values (the packed copy is made again, not reused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "check.h"

static void table_semantics(void) {
  hwt_op_shared *s = hwt_op_shared_create();
  CHECK(s != NULL);
  if (!s) return;
  hwt_op_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.shared = s;
  static float a[4], b[4];
  int fill = -1;
  float *p1 = hwt_op_shared_acquire(&ctx, a, 7, 100, &fill);
  CHECK(p1 && fill == 1 && ((uintptr_t)p1 & 63) == 0, "first holder fills an aligned buffer");
  float *p2 = hwt_op_shared_acquire(&ctx, a, 7, 100, &fill);
  CHECK(p2 == p1 && fill == 0, "same constant and form: the same buffer, already filled");
  float *p3 = hwt_op_shared_acquire(&ctx, a, 8, 100, &fill);
  CHECK(p3 && p3 != p1 && fill == 1, "another form of the same constant is its own buffer");
  float *p4 = hwt_op_shared_acquire(&ctx, b, 7, 100, &fill);
  CHECK(p4 && p4 != p1 && fill == 1, "another constant is its own buffer");
  float *p5 = hwt_op_shared_acquire(&ctx, a, 7, 50, &fill);
  CHECK(p5 && p5 != p1 && fill == 1, "another size is its own buffer");
  size_t bytes = 0;
  CHECK(hwt_op_shared_count(s, &bytes) == 4 && bytes == 4 * 350, "4 buffers, %zu bytes", bytes);
  hwt_op_shared_release(&ctx, p1);
  CHECK(hwt_op_shared_count(s, NULL) == 4, "a buffer stays while it has a holder");
  hwt_op_shared_release(&ctx, p2);
  CHECK(hwt_op_shared_count(s, NULL) == 3, "freed with its last holder");
  float *p6 = hwt_op_shared_acquire(&ctx, a, 7, 100, &fill);
  CHECK(p6 && fill == 1, "after the last release the next holder fills again");
  hwt_op_shared_release(&ctx, p6);
  hwt_op_shared_release(&ctx, p3);
  hwt_op_shared_release(&ctx, p4);
  hwt_op_shared_release(&ctx, p5);
  CHECK(hwt_op_shared_count(s, NULL) == 0);
  hwt_op_shared_destroy(s);
  /* without a table: private buffers, always filled by their holder */
  ctx.shared = NULL;
  float *q1 = hwt_op_shared_acquire(&ctx, a, 7, 100, &fill);
  CHECK(q1 && fill == 1);
  float *q2 = hwt_op_shared_acquire(&ctx, a, 7, 100, &fill);
  CHECK(q2 && q2 != q1 && fill == 1, "no table: no sharing");
  hwt_op_shared_release(&ctx, q1);
  hwt_op_shared_release(&ctx, q2);
  CHECK(hwt_op_form_hash(0, "ab", 2) != hwt_op_form_hash(0, "ba", 2));
}

#define M 8  /* >= the matmul's packing threshold */
#define K 48
#define STEPS 6

/* y_{i+1} = y_i @ W (STEPS times), then z = y @ V */
static void reference(const float *x, const float *w, const float *v, float *z) {
  float y[M * K], t[M * K];
  memcpy(y, x, sizeof y);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < M; i++)
      for (int j = 0; j < K; j++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += (double)y[i * K + k] * w[k * K + j];
        t[i * K + j] = (float)acc;
      }
    memcpy(y, t, sizeof y);
  }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < K; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)y[i * K + k] * v[k * K + j];
      z[i * K + j] = (float)acc;
    }
}

static void fill_values(float *p, int n, int seed) {
  for (int i = 0; i < n; i++) p[i] = (float)(((i * 7 + seed * 13) % 17) - 8) / 32.0f;
}

static void engine_shares(void) {
  hwt_graph *g = hwt_graph_create();
  int64_t act[2] = {M, K}, wsh[2] = {K, K};
  int x = hwt_graph_add_tensor(g, "x", 2, act, HWT_TENSOR_INPUT);
  int w = hwt_graph_add_tensor(g, "w", 2, wsh, HWT_TENSOR_PARAM);
  int v = hwt_graph_add_tensor(g, "v", 2, wsh, HWT_TENSOR_PARAM);
  int prev = x;
  for (int s = 0; s < STEPS; s++) {
    char name[16];
    snprintf(name, sizeof name, "y%d", s);
    int y = hwt_graph_add_tensor(g, name, 2, act, HWT_TENSOR_ACTIVATION);
    int in[2] = {prev, w};
    hwt_graph_add_op(g, name, "matmul", 2, in, 1, &y);
    prev = y;
  }
  int z = hwt_graph_add_tensor(g, "z", 2, act, HWT_TENSOR_OUTPUT);
  int in[2] = {prev, v};
  hwt_graph_add_op(g, "z", "matmul", 2, in, 1, &z);
  hwt_engine_config c;
  hwt_engine_config_init(&c);
  hwt_engine *e = NULL;
  char err[256] = "";
  CHECK(hwt_engine_create(g, &c, &e, err, sizeof err) == HWT_OK, "create: %s", err);
  if (!e) {
    hwt_graph_destroy(g);
    return;
  }
  static float wv[K * K], vv[K * K], xv[M * K], want[M * K];
  for (int round = 0; round < 2; round++) {
    fill_values(wv, K * K, 1 + round);
    fill_values(vv, K * K, 5 + round);
    fill_values(xv, M * K, 9);
    reference(xv, wv, vv, want);
    CHECK(hwt_engine_bind(e, w, wv) == HWT_OK && hwt_engine_bind(e, v, vv) == HWT_OK);
    CHECK(hwt_engine_prepare(e) == HWT_OK, "prepare: %s", hwt_engine_error(e));
    memcpy(hwt_engine_tensor(e, x), xv, sizeof xv);
    CHECK(hwt_engine_run(e) == HWT_OK, "run: %s", hwt_engine_error(e));
    const float *got = hwt_engine_tensor(e, z);
    double worst = 0;
    for (int i = 0; i < M * K; i++) {
      double d = got[i] - want[i];
      if (d < 0) d = -d;
      if (d > worst) worst = d;
    }
    CHECK(worst < 1e-4, "round %d: max |error| %g (a stale packed weight?)", round, worst);
  }
  hwt_engine_destroy(e);
  hwt_graph_destroy(g);
}

int main(void) {
  table_semantics();
  engine_shares();
  return check_verdict("test_op_shared: ok\n");
}
