/* The op bench (hwt_bench_op): an op of a graph prepared on caller buffers
 * and timed on team 0 of a pool the caller keeps. Checks that the timed runs
 * compute exactly what the op's shares compute (an add and a blocked conv,
 * 1..4 threads, every op on one pool), that every sample is a positive
 * time, and the refusals (thread count beyond the team, no such op, knobs
 * the kernels refuse). */
#include "hwtune/bench.h"
#include "ops_test_util.h"
#include "check.h"


/* Times t's op on the pool with nth threads, then checks the timed runs'
 * outputs are bit for bit those of the op's own shares run one by one
 * (ops_test_util's one_op_run: the engine's contract for an op). */
static void time_and_check(hwt_pool *p, one_op *t, int nth, const char *what) {
  for (int i = 0; i < t->n_out; i++)
    for (int64_t k = 0; k < t->out_n[i]; k++) t->out[i][k] = NAN;
  char err[256] = "";
  hwt_bench_op *b = hwt_bench_op_create(p, nth, t->g, t->op, -1, (const float *const *)t->in,
                                        t->out, err, sizeof err);
  CHECK(b != NULL);
  if (!b) {
    fprintf(stderr, "%s: create failed: %s\n", what, err);
    return;
  }
  double s[4] = {0};
  CHECK(hwt_bench_op_run(b, 1, 4, 3, s) == HWT_OK);
  for (int i = 0; i < 4; i++) CHECK(s[i] > 0.0);
  CHECK(hwt_bench_op_run(b, 0, 0, 1, s) == HWT_EINVAL);
  CHECK(hwt_bench_op_run(b, 0, 1, 0, s) == HWT_EINVAL);
  hwt_bench_op_destroy(b);
  int64_t n = t->out_n[0];
  float *got = alloc_floats(n);
  memcpy(got, t->out[0], (size_t)n * sizeof(float));
  CHECK(one_op_run(t, (hwt_isa)hwt_isa_select(), nth, err, sizeof err) == HWT_OK);
  CHECK(compare(what, got, t->out[0], n, 0.0, 0.0) == 0);
  free(got);
}

static void add_on_pool(hwt_pool *p, int nth) {
  int64_t n = rnd_int(1, 5000);
  int rank[2] = {1, 1}, orank[1] = {1};
  int64_t shapes[2][HWT_GRAPH_MAX_DIMS] = {{n}, {n}}, oshape[1][HWT_GRAPH_MAX_DIMS] = {{n}};
  one_op t;
  one_op_build(&t, "add", 2, rank, shapes, 1, orank, oshape);
  time_and_check(p, &t, nth, "add");
  for (int64_t i = 0; i < n; i++) CHECK(t.out[0][i] == t.in[0][i] + t.in[1][i]);
  one_op_free(&t);
}

/* An NCHW[8]c conv, 16 -> 16 channels, 3x3 over 10x10: the tuner's case. */
static void conv_on_pool(hwt_pool *p, int nth) {
  int rank[2] = {5, 6}, orank[1] = {5};
  int64_t shapes[2][HWT_GRAPH_MAX_DIMS] = {{1, 2, 10, 10, 8}, {2, 2, 3, 3, 8, 8}};
  int64_t oshape[1][HWT_GRAPH_MAX_DIMS] = {{1, 2, 8, 8, 8}};
  one_op t;
  one_op_build(&t, "conv2d", 2, rank, shapes, 1, orank, oshape);
  int64_t layout[5] = {'N', 'C', 'H', 'W', 'c'};
  hwt_graph_op_set_ints(t.g, t.op, "layout", 5, layout);
  time_and_check(p, &t, nth, "conv2d NCHW8c");
  one_op_free(&t);
}

static void refusals(hwt_pool *p, int team) {
  int rank[2] = {1, 1}, orank[1] = {1};
  int64_t shapes[2][HWT_GRAPH_MAX_DIMS] = {{8}, {8}}, oshape[1][HWT_GRAPH_MAX_DIMS] = {{8}};
  one_op t;
  one_op_build(&t, "add", 2, rank, shapes, 1, orank, oshape);
  char err[256] = "";
  const float *const *in = (const float *const *)t.in;
  CHECK(!hwt_bench_op_create(p, team + 1, t.g, t.op, -1, in, t.out, err, sizeof err));
  CHECK(strstr(err, "thread count") != NULL);
  CHECK(!hwt_bench_op_create(p, 1, t.g, 7, -1, in, t.out, err, sizeof err));
  CHECK(!hwt_bench_op_create(NULL, 1, t.g, t.op, -1, in, t.out, err, sizeof err));
  one_op_free(&t);

  /* A conv with an illegal block size: the op's prepare refuses it and
   * says why, as the engine would. */
  int crank[2] = {5, 6}, corank[1] = {5};
  int64_t cshapes[2][HWT_GRAPH_MAX_DIMS] = {{1, 1, 6, 6, 8}, {1, 1, 3, 3, 8, 8}};
  int64_t coshape[1][HWT_GRAPH_MAX_DIMS] = {{1, 1, 4, 4, 8}};
  one_op c;
  one_op_build(&c, "conv2d", 2, crank, cshapes, 1, corank, coshape);
  int64_t layout[5] = {'N', 'C', 'H', 'W', 'c'}, reg_n = 999;
  hwt_graph_op_set_ints(c.g, c.op, "layout", 5, layout);
  hwt_graph_op_set_ints(c.g, c.op, "reg_n", 1, &reg_n);
  hwt_bench_op *b = hwt_bench_op_create(p, 1, c.g, c.op, -1, (const float *const *)c.in,
                                        c.out, err, sizeof err);
  CHECK(b == NULL);
  CHECK(strstr(err, "conv2d") != NULL);
  hwt_bench_op_destroy(b); /* NULL is fine */
  one_op_free(&c);
}

int main(void) {
  int cpus[256];
  int n = hwt_allowed_cpus(cpus, 256);
  int team = n >= 4 ? 4 : (n >= 2 ? n : 2);
  hwt_pool_config cfg = {1, team, 0, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  if (!p) {
    fprintf(stderr, "pool: %s\n", err);
    return 1;
  }
  for (int nth = 1; nth <= team; nth++) {
    add_on_pool(p, nth);
    conv_on_pool(p, nth);
  }
  refusals(p, team);
  hwt_pool_destroy(p);
  return check_verdict("test_op_bench: ok\n");
}
