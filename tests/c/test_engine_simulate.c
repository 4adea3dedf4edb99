/* The simulator (engine/exec/simulate.c) against the threaded schedulers:
 * on random DAGs with given op times, every row of the scheduler table
 * under executors x threads in {1,2}^2 (corun also with thread-count
 * candidates) gives the same schedule in virtual time as on real threads:
 * the same ops start at the same virtual times, in the same order, with the
 * same thread counts, on the same executors where the scheduler places ops
 * (vplaces), so the makespans agree.
 *
 * How real threads run in virtual time, deterministically and without
 * timing: every op of the threaded engine is a "test_add" that blocks until
 * a conductor thread releases it. The conductor replays the simulator's
 * step log: it sets the virtual clock to a part's end, releases that part,
 * then waits until the threaded engine has done everything the simulator
 * says it does at that instant: the parts the log starts next have arrived
 * (stamped with the clock), and every executor (worker) is either inside an
 * op or asleep waiting for work (hwt_exec_wait_hook, with spinning off).
 * Only then does it release the next part. A part that arrives
 * unannounced, or a start that never comes, is a disagreement. Corun's
 * Strategy 3 reads the engine's clock, which is set to the virtual one.
 *
 * Usage: see main(). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hwtune/engine.h"
#include "hwtune/op.h"
#include "hwtune/simulate.h"
#include "../../engine/exec/sched.h"
#include "../../engine/exec/simulate.h"

#define LEN 16
#define MAX_OPS 40
#define MAX_NTH 4 /* corun 2x2: four workers */
#include "random_dag.h"

#define MAX_STEPS (4 * MAX_OPS * MAX_NTH)
/* A disagreement leaves threads blocked for good: give up after this long
 * without progress (never reached when the schedules agree). */
#define STALL_S 30

static int fails;
#define FAIL(...)                                      \
  do {                                                 \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                      \
    fprintf(stderr, "\n");                             \
    fails++;                                           \
  } while (0)

/* ---- the conductor's shared state (one run at a time) ---- */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived[MAX_OPS][MAX_NTH];  /* part entered its op */
  int released[MAX_OPS][MAX_NTH]; /* the conductor let it end */
  int in_op;                      /* parts blocked inside ops */
  int parked;                     /* executors asleep waiting for work */
  double start[MAX_OPS];          /* virtual start: the clock at the first part's arrival */
  int nth[MAX_OPS];
  int order[MAX_OPS], n_order;    /* ops in the order their first part arrived */
  int expected[MAX_OPS][MAX_NTH]; /* the log announced this part */
  int surprise;                   /* a part arrived unannounced: op * MAX_NTH + tid + 1 */
  int run_done;                   /* hwt_engine_run returned */
} C = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static _Atomic double vclock;
static double virtual_now(void) { return atomic_load(&vclock); }

void hwt_exec_wait_hook(int entering) {
  pthread_mutex_lock(&C.mu);
  C.parked += entering ? 1 : -1;
  pthread_cond_broadcast(&C.cv);
  pthread_mutex_unlock(&C.mu);
}

static int op_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  (void)ctx, (void)err, (void)errlen;
  return HWT_OK;
}

static void op_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  (void)ws;
  int op = ctx->op;
  pthread_mutex_lock(&C.mu);
  if (!C.expected[op][tid] && !C.surprise) C.surprise = op * MAX_NTH + tid + 1;
  if (C.nth[op] == 0) {
    C.start[op] = atomic_load(&vclock);
    C.nth[op] = nth;
    C.order[C.n_order++] = op;
  }
  C.arrived[op][tid]++;
  C.in_op++;
  pthread_cond_broadcast(&C.cv);
  while (!C.released[op][tid]) pthread_cond_wait(&C.cv, &C.mu);
  C.in_op--;
  pthread_cond_broadcast(&C.cv);
  pthread_mutex_unlock(&C.mu);
}

static const hwt_op_impl TEST_OPS[] = {{"test_add", op_prepare, op_run, NULL}};
const hwt_op_impl *hwt_ops_test(int *n) {
  *n = 1;
  return TEST_OPS;
}

/* ---- one configuration ---- */
typedef struct {
  const hwt_sim_step *steps;
  int n_steps;
  int workers;     /* executors, or corun workers */
  int parts_per_op; /* 0: a part is a team op (all its threads), 1: one worker each */
  int next;        /* the first step not announced yet */
  int ok;
  char why[256];
} replay;

/* Busy executors: team ops whose every thread arrived, or corun parts. */
static int busy_locked(const replay *r, int n_ops) {
  int busy = 0;
  for (int op = 0; op < n_ops; op++) {
    if (!C.nth[op]) continue;
    if (r->parts_per_op) {
      for (int t = 0; t < C.nth[op]; t++) busy += C.arrived[op][t] && !C.released[op][t];
    } else if (!C.released[op][0]) {
      int all = 1;
      for (int t = 0; t < C.nth[op]; t++) all &= C.arrived[op][t] > 0;
      busy += all;
    }
  }
  return busy;
}

/* Waits until the announced parts arrived and every executor is in an op
 * or asleep; 0 on a surprise or a stall. */
static int settle(replay *r, int n_ops) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += STALL_S;
  for (;;) {
    if (C.surprise) {
      int k = C.surprise - 1;
      snprintf(r->why, sizeof r->why, "op %d part %d started at virtual %g, not announced",
               k / MAX_NTH, k % MAX_NTH, atomic_load(&vclock));
      return 0;
    }
    int missing = -1;
    for (int op = 0; op < n_ops && missing < 0; op++)
      for (int t = 0; t < MAX_NTH; t++)
        if (C.expected[op][t] && !C.arrived[op][t]) missing = op * MAX_NTH + t;
    if (missing < 0 && C.parked + busy_locked(r, n_ops) == r->workers) return 1;
    if (pthread_cond_timedwait(&C.cv, &C.mu, &until) != 0) {
      snprintf(r->why, sizeof r->why,
               "stalled at virtual %g: %s (parked %d, busy %d of %d executors)",
               atomic_load(&vclock), missing >= 0 ? "an announced part never started" : "not settled",
               C.parked, busy_locked(r, n_ops), r->workers);
      if (missing >= 0)
        snprintf(r->why + strlen(r->why), sizeof r->why - strlen(r->why), ": op %d part %d",
                 missing / MAX_NTH, missing % MAX_NTH);
      return 0;
    }
  }
}

/* Announces the starts from step i on, up to the next end; returns that index. */
static int announce(const replay *r, int i) {
  for (; i < r->n_steps && !r->steps[i].end; i++) {
    const hwt_sim_step *s = &r->steps[i];
    if (r->parts_per_op)
      C.expected[s->op][s->tid] = 1;
    else
      for (int t = 0; t < s->nth; t++) C.expected[s->op][t] = 1;
  }
  return i;
}

static void *conduct(void *arg) {
  replay *r = arg;
  int n_ops = MAX_OPS;
  pthread_mutex_lock(&C.mu);
  int i = r->next;
  r->ok = settle(r, n_ops);
  while (r->ok && i < r->n_steps) {
    const hwt_sim_step *s = &r->steps[i];
    atomic_store(&vclock, s->t);
    if (r->parts_per_op)
      C.released[s->op][s->tid] = 1;
    else
      for (int t = 0; t < s->nth; t++) C.released[s->op][t] = 1;
    pthread_cond_broadcast(&C.cv);
    i = announce(r, i + 1);
    /* After the last end the executors leave the run instead of settling. */
    if (i < r->n_steps) r->ok = settle(r, n_ops);
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += STALL_S;
  while (r->ok && !C.run_done && !C.surprise)
    if (pthread_cond_timedwait(&C.cv, &C.mu, &until) != 0) {
      snprintf(r->why, sizeof r->why, "the run did not end after its last op");
      r->ok = 0;
    }
  if (r->ok && C.surprise) r->ok = settle(r, n_ops); /* reports the surprise */
  if (!r->ok) {
    /* Let every blocked op go so the run can end; the result is failed anyway. */
    for (int op = 0; op < MAX_OPS; op++)
      for (int t = 0; t < MAX_NTH; t++) C.released[op][t] = C.expected[op][t] = 1;
    C.surprise = 0;
    pthread_cond_broadcast(&C.cv);
  }
  pthread_mutex_unlock(&C.mu);
  return NULL;
}

/* Op times: a dyadic grid (multiples of 2^-20 s) so that every sum of them
 * is exact and equal ends happen often; tiny ops (2^-21 s) stay below the
 * engine's inline threshold, the others above its solo threshold. */
static void op_times(const dag *d, unsigned *s, double *sec) {
  static const double scale[MAX_NTH] = {1.0, 0.625, 0.5, 0.4375};
  for (int k = 0; k < d->n_ops; k++) {
    double base = d->cost[k] < 1e-6 ? 0x1p-21 : (double)(16 + rnd(s) % 64) * 0x1p-14;
    for (int t = 0; t < MAX_NTH; t++) sec[k * MAX_NTH + t] = base * scale[t];
  }
}

static void check_one(const dag *d, hwt_graph *g, hwt_sim *sim, const double *sec,
                         const hwt_sched_impl *row, int ex, int th, int cands, unsigned seed) {
  char what[160];
  snprintf(what, sizeof what, "seed %u %s%s %dx%d (%d ops)", seed, row->info.name,
           cands ? " with candidates" : "", ex, th, d->n_ops);
  hwt_engine_config cfg;
  hwt_engine_config_init(&cfg);
  cfg.scheduler = row->info.name;
  cfg.executors = ex;
  cfg.threads_per_executor = th;
  cfg.op_threads = d->op_threads;
  double cost[MAX_OPS];
  for (int k = 0; k < d->n_ops; k++) cost[k] = sec[k * MAX_NTH];
  cfg.op_cost = cost;
  if (cands) {
    cfg.op_cand_threads = d->cand_threads;
    cfg.op_cand_seconds = d->cand_seconds;
    cfg.op_cand_n = N_CAND;
  }
  /* the simulator */
  hwt_sim_costs c = {.max_threads = MAX_NTH, .seconds = sec};
  static hwt_sim_step steps[MAX_STEPS];
  hwt_op_event sev[MAX_OPS];
  int n_steps = 0;
  double makespan = 0;
  int ran = hwt_sim_run_steps(sim, &cfg, &c, &makespan, sev, MAX_OPS, steps, MAX_STEPS, &n_steps);
  if (ran != d->n_ops) {
    FAIL("%s: simulator ran %d of %d ops: %s", what, ran, d->n_ops, hwt_sim_error(sim));
    return;
  }
  /* the threaded engine under the conductor */
  hwt_engine *e = NULL;
  char err[256] = "";
  if (hwt_engine_create(g, &cfg, &e, err, sizeof err) != HWT_OK) {
    FAIL("%s: create: %s", what, err);
    return;
  }
  e->spin = 0;
  e->clock = virtual_now;
  if (hwt_engine_prepare(e) != HWT_OK) {
    FAIL("%s: prepare: %s", what, hwt_engine_error(e));
    hwt_engine_destroy(e);
    return;
  }
  hwt_engine_profile(e, 1);
  memset(C.arrived, 0, sizeof C.arrived);
  memset(C.released, 0, sizeof C.released);
  memset(C.expected, 0, sizeof C.expected);
  memset(C.nth, 0, sizeof C.nth);
  C.n_order = C.in_op = C.parked = C.surprise = C.run_done = 0;
  atomic_store(&vclock, 0.0);
  replay r = {steps, n_steps, e->executors, row->info.worker_groups, 0, 0, ""};
  /* The first starts are announced before the run can make them. */
  r.next = announce(&r, 0);
  pthread_t conductor;
  pthread_create(&conductor, NULL, conduct, &r);
  int st = hwt_engine_run(e);
  pthread_mutex_lock(&C.mu);
  C.run_done = 1;
  pthread_cond_broadcast(&C.cv);
  pthread_mutex_unlock(&C.mu);
  pthread_join(conductor, NULL);
  if (st != HWT_OK) FAIL("%s: run: %s", what, hwt_engine_error(e));
  if (!r.ok) {
    FAIL("%s: %s", what, r.why);
    hwt_engine_destroy(e);
    return;
  }
  /* same starts, thread counts and placement; the start order follows */
  hwt_op_event tev[MAX_OPS];
  int n = hwt_engine_events(e, tev, MAX_OPS);
  double real_makespan = 0;
  for (int k = 0; k < d->n_ops; k++) {
    double end = C.start[k] + sec[k * MAX_NTH + C.nth[k] - 1];
    if (end > real_makespan) real_makespan = end;
    if (C.start[k] != sev[k].start_s || C.nth[k] != sev[k].threads)
      FAIL("%s: op %d: threads start at %g with %d threads, simulated %g with %d", what, k,
           C.start[k], C.nth[k], sev[k].start_s, sev[k].threads);
    if (row->vplaces && k < n && tev[k].executor != sev[k].executor)
      FAIL("%s: op %d ran on executor %d, simulated %d", what, k, tev[k].executor,
           sev[k].executor);
  }
  if (n != d->n_ops) FAIL("%s: %d events for %d ops", what, n, d->n_ops);
  if (real_makespan != makespan) FAIL("%s: makespan %g, simulated %g", what, real_makespan, makespan);
  /* The order of first arrivals: within one virtual instant threads race,
   * so equal starts are compared as sets (sorted by op id). */
  int sim_order[MAX_OPS];
  for (int k = 0; k < d->n_ops; k++) sim_order[k] = k;
  for (int a = 1; a < d->n_ops; a++)
    for (int b = a; b > 0; b--) {
      int x = sim_order[b - 1], y = sim_order[b];
      if (sev[x].start_s < sev[y].start_s || (sev[x].start_s == sev[y].start_s && x < y)) break;
      sim_order[b - 1] = y, sim_order[b] = x;
    }
  for (int a = 0, b = 0; a < C.n_order; a = b) {
    for (b = a; b < C.n_order && C.start[C.order[b]] == C.start[C.order[a]]; b++) {
    }
    for (int x = a + 1; x < b; x++)
      for (int y = x; y > a && C.order[y - 1] > C.order[y]; y--) {
        int t = C.order[y];
        C.order[y] = C.order[y - 1], C.order[y - 1] = t;
      }
  }
  for (int k = 0; k < d->n_ops && k < C.n_order; k++)
    if (C.order[k] != sim_order[k]) {
      FAIL("%s: start order differs at position %d: op %d, simulated op %d", what, k, C.order[k],
           sim_order[k]);
      break;
    }
  hwt_engine_destroy(e);
}

static int configs_checked;

/* every: each DAG under every configuration of every row; otherwise each
 * row under one configuration per DAG, in turn (all of them every 8 DAGs). */
static void check_dag(unsigned seed, int index, int every) {
  unsigned s = seed;
  dag d;
  make_dag(&d, &s);
  if (d.n_ops > MAX_OPS) d.n_ops = MAX_OPS;
  static double sec[MAX_OPS * MAX_NTH];
  op_times(&d, &s, sec);
  hwt_graph *g = build(&d);
  hwt_sim *sim = NULL;
  char err[256];
  if (hwt_sim_create(g, &sim, err, sizeof err) != HWT_OK) {
    FAIL("seed %u: sim create: %s", seed, err);
    hwt_graph_destroy(g);
    return;
  }
  for (int i = 0; i < hwt_sched_count(); i++) {
    const hwt_sched_impl *row = hwt_sched_row(i);
    /* executors x threads in {1,2}^2 (one executor for single-team rows),
     * worker-group rows also with candidates */
    int valid[8], n_valid = 0;
    for (int cfg = 0; cfg < 4 * (1 + row->info.worker_groups); cfg++)
      if (!(row->info.single_team && (cfg & 1))) valid[n_valid++] = cfg;
    for (int v = 0; v < n_valid; v++) {
      int cfg = valid[v];
      int ex = 1 + (cfg & 1), th = 1 + (cfg >> 1 & 1), cands = cfg >= 4;
      if (!every && v != (index + i) % n_valid) continue;
      check_one(&d, g, sim, sec, row, ex, th, cands, seed);
      configs_checked++;
      if (fails > 10) exit(1);
    }
  }
  hwt_sim_destroy(sim);
  hwt_graph_destroy(g);
}

/* The simulator alone: bad costs are one-line errors, a wider config than
 * the cost table is refused, and the memory model stretches co-running ops
 * only when their demand exceeds the bandwidth. */
static void test_errors_and_memory(void) {
  hwt_graph *g = hwt_graph_create();
  int64_t shape[1] = {LEN};
  int a = hwt_graph_add_tensor(g, "a", 1, shape, HWT_TENSOR_INPUT);
  int b = hwt_graph_add_tensor(g, "b", 1, shape, HWT_TENSOR_OUTPUT);
  int c2 = hwt_graph_add_tensor(g, "c", 1, shape, HWT_TENSOR_OUTPUT);
  hwt_graph_add_op(g, "x", "test_add", 1, &a, 1, &b);
  hwt_graph_add_op(g, "y", "test_add", 1, &a, 1, &c2);
  hwt_sim *sim;
  char err[256];
  if (hwt_sim_create(g, &sim, err, sizeof err) != HWT_OK) {
    FAIL("sim create: %s", err);
    return;
  }
  hwt_engine_config cfg;
  hwt_engine_config_init(&cfg);
  cfg.scheduler = "critical-path";
  cfg.executors = 2;
  cfg.threads_per_executor = 1;
  double sec[2] = {1e-3, 1e-3}, frac[2] = {0.5, 0.5}, bps[2] = {8e9, 8e9}, cap[3] = {0, 10e9, 10e9};
  hwt_sim_costs c = {.max_threads = 1, .seconds = sec};
  double ms;
  hwt_op_event ev[2];
  if (hwt_sim_run(sim, &cfg, &c, &ms, ev, 2) != 2 || ms != 1e-3)
    FAIL("two independent 1 ms ops on 2 executors: makespan %g", ms);
  /* 16 GB/s wanted, 10 served: the memory half of each op stretches 1.6x. */
  c.mem_frac = frac, c.mem_bps = bps, c.bw_cap = cap, c.cores = 2;
  if (hwt_sim_run(sim, &cfg, &c, &ms, ev, 2) != 2 || ms < 1.29e-3 || ms > 1.31e-3)
    FAIL("memory-bound co-run: makespan %g, expected 1.3e-3", ms);
  cap[2] = 20e9;
  if (hwt_sim_run(sim, &cfg, &c, &ms, ev, 2) != 2 || ms != 1e-3)
    FAIL("enough bandwidth: makespan %g", ms);
  cfg.threads_per_executor = 2;
  if (hwt_sim_run(sim, &cfg, &c, &ms, NULL, 0) >= 0 || !strstr(hwt_sim_error(sim), "up to 1 threads"))
    FAIL("a 2-thread config with a 1-thread cost table: %s", hwt_sim_error(sim));
  cfg.threads_per_executor = 1;
  sec[1] = -1;
  if (hwt_sim_run(sim, &cfg, &c, &ms, NULL, 0) >= 0 || !strstr(hwt_sim_error(sim), "op 1"))
    FAIL("a negative op time: %s", hwt_sim_error(sim));
  hwt_sim_destroy(sim);
  hwt_graph_destroy(g);
}

/* Usage: test_engine_simulate [n_dags] [seed] [every]. The default, 1000
 * DAGs with one configuration per row each (4000 runs), takes ~15 s on this
 * 2-core box without sanitizers; every configuration of every DAG (18,000
 * runs) ~50 s. */
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : 4242u;
  int every = argc > 3 && strcmp(argv[3], "every") == 0;
  test_errors_and_memory();
  for (int i = 0; i < n && fails == 0; i++) check_dag(seed + (unsigned)i * 7919u, i, every);
  if (fails) return 1;
  printf("test_engine_simulate: %d random DAGs, %d configurations: threaded and simulated "
         "schedules agree\n", n, configs_checked);
  return 0;
}
