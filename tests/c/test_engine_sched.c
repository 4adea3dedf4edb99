/* The engine's schedulers on random DAGs: every op runs exactly once per run
 * on every one of its threads, only after all its predecessors finished, and
 * every row of the scheduler table x executors x threads configuration
 * (worker-group schedulers also with random thread-count candidates) gives
 * bit-identical outputs (equal to a plain-C evaluation in topological
 * order). Ops too small to split run with one thread unless a count is
 * configured. Also: an unimplemented op type or scheduler is a one-line
 * error at create, and profiling events respect the dependencies.
 *
 * The ops are "test_add", a family this binary defines itself through the
 * registry's test hook (hwt_ops_test). The table's rows include "test-lifo",
 * a scheduler this binary adds through the scheduler table's hook
 * (hwt_scheds_test): a new scheduler is its own C file plus a table row, and
 * this test runs it like every built-in one.
 *
 * Usage: test_engine_sched [n_graphs] [seed] */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "../../engine/exec/sched.h"
#include "check.h"

#define LEN 48        /* floats per tensor */
#define MAX_OPS 80
#define MAX_NTH 4 /* corun 2x2: four workers */
#include "random_dag.h"


/* Per-op, per-thread start/end stamps from one global clock of events. */
static _Atomic long clock_;
static _Atomic long t_start[MAX_OPS][MAX_NTH], t_end[MAX_OPS][MAX_NTH];
static _Atomic int runs[MAX_OPS][MAX_NTH];
static _Atomic int nth_seen[MAX_OPS];

static int add_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  (void)err, (void)errlen;
  ctx->ws_floats = 8; /* exercises the per-thread workspace */
  return HWT_OK;
}

/* out[j][i] = 0.5 * sum(inputs[i]) + (op + j): order of summation fixed. */
static void add_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  int op = ctx->op;
  atomic_store(&t_start[op][tid], atomic_fetch_add(&clock_, 1));
  atomic_fetch_add(&runs[op][tid], 1);
  atomic_store(&nth_seen[op], nth);
  ws[0] = (float)tid; /* must be this thread's own */
  int lo = LEN * tid / nth, hi = LEN * (tid + 1) / nth;
  for (int j = 0; j < ctx->n_out; j++)
    for (int i = lo; i < hi; i++) {
      float s = 0;
      for (int k = 0; k < ctx->n_in; k++) s += ctx->in[k][i];
      ctx->out[j][i] = 0.5f * s + (float)(op + j);
    }
  if (ws[0] != (float)tid) abort();
  atomic_store(&t_end[op][tid], atomic_fetch_add(&clock_, 1));
}

static const hwt_op_impl TEST_OPS[] = {{"test_add", add_prepare, add_run, NULL}};
const hwt_op_impl *hwt_ops_test(int *n) {
  *n = 1;
  return TEST_OPS;
}

/* test-lifo: one team runs the most recently readied op first (depth
 * first), so ops do not run in the plan's order: the arena must not reuse
 * memory sequentially (in_order = 0), which the outputs check. */
typedef struct {
  int *stack, n;
} lifo_state;

static int lifo_init(hwt_engine *e, void **state) {
  lifo_state *s = hwt_sched_alloc(e, sizeof *s);
  if (!s || !(s->stack = hwt_sched_alloc(e, sizeof(int) * (size_t)(e->n_ops > 0 ? e->n_ops : 1))))
    return HWT_ENOMEM;
  *state = s;
  return HWT_OK;
}

static void lifo_push(void *arg, int op) {
  lifo_state *s = arg;
  s->stack[s->n++] = op;
}

static void lifo_team(void *arg, int team) {
  hwt_engine *e = arg;
  lifo_state *s = e->sched_state;
  while (s->n > 0) {
    int op = s->stack[--s->n];
    hwt_exec_run_op(e, team, op);
    hwt_exec_complete(e, op, lifo_push, s);
  }
}

static int lifo_run(hwt_engine *e, void *state) {
  lifo_state *s = state;
  s->n = 0;
  for (int i = 0; i < e->n_roots; i++) lifo_push(s, e->roots[i]);
  return hwt_pool_run_teams(e->pool, lifo_team, e);
}

static const hwt_sched_impl TEST_SCHEDS[] = {
    {.info = {.name = "test-lifo",
              .summary = "one team, the most recently readied op first",
              .single_team = 1,
              .pins = HWT_PIN_ON_REQUEST},
     .init = lifo_init,
     .run = lifo_run}};
const hwt_sched_impl *hwt_scheds_test(int *n) {
  *n = 1;
  return TEST_SCHEDS;
}

/* Plain-C evaluation in op order (ops are created in a topological order). */
static void reference(const dag *d, const float in[2][LEN], float (*val)[LEN]) {
  memcpy(val[0], in[0], sizeof val[0]);
  memcpy(val[1], in[1], sizeof val[1]);
  for (int k = 0; k < d->n_ops; k++)
    for (int j = 0; j < d->n_out[k]; j++)
      for (int i = 0; i < LEN; i++) {
        float s = 0;
        for (int q = 0; q < d->n_in[k]; q++) s += val[d->in[k][q]][i];
        val[d->out[k][j]][i] = 0.5f * s + (float)(k + j);
      }
}

/* Threads op k must run with: the configured count (capped by the team, or
 * by all workers under corun), else the team unless the op is tiny; under
 * corun with candidates, any of its (capped) candidates. */
static int nth_ok(const dag *d, int k, int nth, int team, int workers, int cands) {
  if (cands) {
    for (int c = 0; c < N_CAND && d->cand_threads[k * N_CAND + c] > 0; c++) {
      int t = d->cand_threads[k * N_CAND + c];
      if (nth == (t > workers ? workers : t)) return 1;
    }
    return 0;
  }
  int cap = workers > 0 ? workers : team, t = d->op_threads[k];
  int want = t > 0 ? (t > cap ? cap : t) : d->cost[k] < 1e-6 ? 1 : team;
  return nth == want;
}

static void check_run(const dag *d, hwt_engine *e, const float (*want)[LEN], int team,
                      int workers, int cands, const char *what) {
  for (int k = 0; k < d->n_ops; k++) {
    int nth = atomic_load(&nth_seen[k]);
    CHECK(nth_ok(d, k, nth, team, workers, cands), "%s: op %d ran with %d threads", what, k,
          nth);
    for (int t = 0; t < MAX_NTH; t++)
      CHECK(atomic_load(&runs[k][t]) == (t < nth), "%s: op %d thread %d ran %d times", what, k,
            t, atomic_load(&runs[k][t]));
    long start = atomic_load(&t_start[k][0]);
    for (int t = 1; t < nth; t++)
      if (atomic_load(&t_start[k][t]) < start) start = atomic_load(&t_start[k][t]);
    for (int q = 0; q < d->n_in[k]; q++) {
      int p = d->producer[d->in[k][q]];
      if (p < 0) continue;
      int pn = atomic_load(&nth_seen[p]);
      for (int t = 0; t < pn; t++)
        CHECK(atomic_load(&t_end[p][t]) < start, "%s: op %d started before its input op %d ended",
              what, k, p);
    }
  }
  for (int t = 2; t < d->n_t; t++) {
    /* Activations may be overwritten by reuse; outputs must match. */
    if (d->consumed[t] && t % 5) continue;
    const float *got = hwt_engine_tensor(e, t);
    CHECK(memcmp(got, want[t], sizeof want[t]) == 0, "%s: tensor %d differs", what, t);
  }
}

static void check_events(const dag *d, hwt_engine *e, int executors, const char *what) {
  hwt_op_event ev[MAX_OPS];
  int n = hwt_engine_events(e, ev, MAX_OPS);
  CHECK(n == d->n_ops, "%s: %d events for %d ops", what, n, d->n_ops);
  for (int k = 0; k < n; k++) {
    CHECK(ev[k].op == k && ev[k].executor >= 0 && ev[k].executor < executors &&
              ev[k].start_s <= ev[k].end_s,
          "%s: bad event for op %d", what, k);
    for (int q = 0; q < d->n_in[k]; q++) {
      int p = d->producer[d->in[k][q]];
      if (p >= 0) CHECK(ev[p].end_s <= ev[k].start_s, "%s: event of op %d before op %d's", what, k, p);
    }
  }
}

static void reset_stamps(void) {
  memset((void *)t_start, 0, sizeof t_start);
  memset((void *)t_end, 0, sizeof t_end);
  memset((void *)runs, 0, sizeof runs);
  memset((void *)nth_seen, 0, sizeof nth_seen);
}

static void run_dag(const dag *d, unsigned seed) {
  static float want[MAX_T][LEN];
  float in[2][LEN];
  for (int i = 0; i < LEN; i++) {
    in[0][i] = (float)((seed + (unsigned)i) % 17) - 8.0f;
    in[1][i] = 0.25f * (float)(i % 7);
  }
  reference(d, (const float(*)[LEN])in, want);
  hwt_graph *g = build(d);
  /* Every row; a worker-group row once more with candidates. */
  for (int row = 0; row < hwt_sched_count(); row++) {
    const hwt_sched_info *info = hwt_sched_at(row);
    for (int cfg_i = 0; cfg_i < 4 * (1 + info->worker_groups); cfg_i++) {
      int ex = 1 + (cfg_i & 1), th = 1 + (cfg_i >> 1 & 1), cands = cfg_i >= 4;
      if (info->single_team && ex > 1) continue;
      int corun = info->worker_groups;
      char what[128], err[256] = "";
      snprintf(what, sizeof what, "seed %u %s%s %dx%d (%d ops)", seed, info->name,
               cands ? " with candidates" : "", ex, th, d->n_ops);
      hwt_engine_config c;
      hwt_engine_config_init(&c);
      c.scheduler = info->name;
      if (cands) {
        c.op_cand_threads = d->cand_threads;
        c.op_cand_seconds = d->cand_seconds;
        c.op_cand_n = N_CAND;
      }
      c.executors = ex;
      c.threads_per_executor = th;
      c.op_threads = d->op_threads;
      hwt_engine *e;
      CHECK(hwt_engine_create(g, &c, &e, err, sizeof err) == HWT_OK, "%s: create: %s", what,
            err);
      if (!e) continue;
      /* Input 0 bound to caller memory, input 1 engine-owned. */
      CHECK(hwt_engine_bind(e, 0, in[0]) == HWT_OK, "%s: bind", what);
      memcpy(hwt_engine_tensor(e, 1), in[1], sizeof in[1]);
      CHECK(hwt_engine_prepare(e) == HWT_OK, "%s: prepare: %s", what, hwt_engine_error(e));
      for (int rep = 0; rep < 2; rep++) {
        reset_stamps();
        hwt_engine_profile(e, rep == 1);
        CHECK(hwt_engine_run(e) == HWT_OK, "%s: run: %s", what, hwt_engine_error(e));
        check_run(d, e, (const float(*)[LEN])want, th, corun ? ex * th : 0, cands, what);
        if (rep == 1)
          check_events(d, e, info->single_team ? 1 : corun ? ex * th : ex, what);
      }
      hwt_engine_destroy(e);
    }
  }
  hwt_graph_destroy(g);
}

static void test_unimplemented(void) {
  hwt_graph *g = hwt_graph_create();
  int64_t shape[1] = {4};
  int a = hwt_graph_add_tensor(g, "a", 1, shape, HWT_TENSOR_INPUT);
  int b = hwt_graph_add_tensor(g, "b", 1, shape, HWT_TENSOR_ACTIVATION);
  int c = hwt_graph_add_tensor(g, "c", 1, shape, HWT_TENSOR_OUTPUT);
  hwt_graph_add_op(g, "h1", "test_add", 1, &a, 1, &b);
  hwt_graph_add_op(g, "h3", "no_such_op", 1, &b, 1, &c);
  char err[256] = "";
  hwt_engine *e = (hwt_engine *)&e; /* create must clear it */
  CHECK(hwt_engine_create(g, NULL, &e, err, sizeof err) == HWT_EINVAL && !e,
        "an unknown op type was accepted");
  CHECK(strcmp(err, "op 1 'h3': op type 'no_such_op' is not implemented") == 0, "message: %s",
        err);
  hwt_engine_config cfg;
  hwt_engine_config_init(&cfg);
  cfg.scheduler = "shared_queue";
  char names[256], want[512];
  snprintf(want, sizeof want, "unknown scheduler 'shared_queue' (one of: %s)",
           hwt_sched_list(names, sizeof names));
  CHECK(hwt_engine_create(g, &cfg, &e, err, sizeof err) == HWT_EINVAL && !e &&
            strcmp(err, want) == 0 && strstr(names, "shared-queue, ") &&
            strstr(names, ", test-lifo"),
        "bad scheduler accepted: %s", err);
  /* The table: names unique, one default of each kind, looked up by name. */
  int one = 0, many = 0;
  for (int i = 0; i < hwt_sched_count(); i++) {
    const hwt_sched_info *r = hwt_sched_at(i);
    CHECK(hwt_sched_by_name(r->name) == r, "row %d '%s' not found by its name", i, r->name);
    one += r->default_one;
    many += r->default_many;
  }
  CHECK(one == 1 && many == 1, "%d default_one and %d default_many rows", one, many);
  CHECK(!hwt_sched_at(-1) && !hwt_sched_at(hwt_sched_count()) && !hwt_sched_by_name(""),
        "out-of-table lookups");
  CHECK(hwt_sched_by_name(NULL) && hwt_sched_by_name(NULL)->default_one, "no default row");
  hwt_graph_destroy(g);
}

/* Engines one DAG runs under: per row, executors x threads (1..2 each; one
 * executor for single-team rows), twice for worker-group rows. */
static int configs_per_dag(void) {
  int n = 0;
  for (int row = 0; row < hwt_sched_count(); row++) {
    const hwt_sched_info *info = hwt_sched_at(row);
    n += (info->single_team ? 2 : 4) * (1 + info->worker_groups);
  }
  return n;
}

int main(int argc, char **argv) {
  /* 210 DAGs x 20 configurations (4200 engines, two runs each): under TSan
   * ~100 s on this loaded 2-core machine (test_c_suite allows 120 s a
   * program); 4250 engines measured ~100 s. */
  int n = argc > 1 ? atoi(argv[1]) : 210;
  unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : 12345u;
  test_unimplemented();
  for (int i = 0; i < n && failures == 0; i++) {
    unsigned s = seed + (unsigned)i * 7919u, r = s;
    dag d;
    make_dag(&d, &r);
    run_dag(&d, s);
  }
  return check_verdict("test_engine_sched: %d random DAGs x %d configurations (%d schedulers) ok\n",
                       n, configs_per_dag(), hwt_sched_count());
}
