/* The simulation driver: a discrete-event loop over the parts that run on
 * each worker (an executor's team, or one corun worker), calling the
 * scheduler row's virtual-time functions (sched.h) whenever a part ends.
 * The virtual engine is a hwt_engine without a pool, tensors or op
 * contexts: the same plan, folding, levels, tiny/solo flags and thread
 * counts as hwt_engine_create computes (hwt_exec_configure), so the
 * schedulers' decisions read exactly what they read in a threaded run.
 *
 * Time: a part that starts at t with duration d (the op's seconds at its
 * thread count, plus what pulling its inputs from other cores costs when
 * the transfer term is on: xfer_part) ends at t + d while nothing it
 * shares the memory system with changes; when the memory model is on
 * (hwtune/simulate.h), every start and end re-rates the running parts.
 * Without it, ends are exact sums of start and duration, which the
 * agreement test relies on. Parts that end at the same time are processed
 * in (time, op, part) order. A group op's part 0 (worker_groups schedulers)
 * ends only after its other parts: its worker waits for them, without
 * memory traffic, and completes the op, as sched_corun.c's does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sched.h"
#include "simulate.h"

struct hwt_sim {
  hwt_engine e; /* the virtual engine */
  char err[256];
};

typedef struct {
  hwt_vrun v; /* what the schedulers see */
  const hwt_sim_costs *c;
  int workers, model;
  int *op, *tid, *nth;      /* [workers] running part; op -1: idle */
  int *waits;               /* [workers] 1: part 0 done, waiting for its group's others */
  double *ready, *end;      /* when its work starts (after overheads), when it ends */
  double *idle_since;       /* when its last part ended (0 before any: the run's start) */
  double *left, *rate;      /* memory model: alone-seconds of work left, progress rate */
  double *mu, *bps;         /* its memory share and bytes/s alone (per part) */
  double last;              /* when `left` was last brought up to date */
  int *parts_left;          /* [n_ops] parts of each started op still running */
  double sect_end;          /* end of this event's serial sections so far */
  double serial_free;       /* when the serial section is free again */
  hwt_op_event *events;     /* [n_ops] by op id */
  hwt_sim_step *steps;
  int max_steps, n_steps;
  int xfer;                 /* the transfer term is on (hwtune/simulate.h) */
  int n_cores;              /* executors x team_size: the cores parts run on */
  float *held;              /* [n_tensors * n_cores * 2]: slice [lo, hi) of each
                               tensor each core holds, as fractions of its bytes */
  int ran;                  /* ops started */
  char *err;                /* first error (a scheduler bug), "" otherwise */
} vrun_impl;

static void set_err(char *dst, const char *msg, int a, int b) {
  if (!dst[0]) snprintf(dst, 256, msg, a, b);
}

static void log_step(vrun_impl *r, int end, int w, int op, int tid, int nth, double t) {
  if (!r->steps || r->n_steps >= r->max_steps) return;
  r->steps[r->n_steps++] = (hwt_sim_step){end, op, w, tid, nth, t};
}

void hwt_vrun_section(hwt_vrun *v) {
  vrun_impl *r = (vrun_impl *)v;
  double t = r->sect_end > r->serial_free ? r->sect_end : r->serial_free;
  r->sect_end = r->serial_free = t + r->c->section_s;
}

/* Transfer term: every tensor's holders at the start of a run. Inputs,
 * params and folded constants are held whole by every core (see
 * hwtune/simulate.h); activations and outputs by none until written. */
static void xfer_reset(vrun_impl *r) {
  const hwt_engine *e = r->v.e;
  for (int t = 0; t < e->n_tensors; t++) {
    int kind = hwt_graph_tensor_kind(e->g, t), prod = hwt_graph_tensor_producer(e->g, t);
    float hi = kind == HWT_TENSOR_INPUT || kind == HWT_TENSOR_PARAM ||
                       (prod >= 0 && e->folded[prod])
                   ? 1.0f
                   : 0.0f;
    float *h = r->held + (size_t)t * (size_t)r->n_cores * 2;
    for (int c = 0; c < r->n_cores; c++) h[2 * c] = 0.0f, h[2 * c + 1] = hi;
  }
}

/* Seconds a part of op (its thread or part `tid` of nth; a team's part is
 * all nth threads) spends pulling its inputs' bytes from other cores, and
 * the holders after its reads and writes. */
static double xfer_part(vrun_impl *r, int w, int op, int tid, int nth) {
  const hwt_engine *e = r->v.e;
  const hwt_sim_costs *c = r->c;
  int team = !e->sched->info.worker_groups;
  /* (core, slice) pairs of this part: a team's threads i on w*T + i, or
   * one corun worker's own part */
  int first = team ? 0 : tid, last = team ? nth : tid + 1;
  int base = team ? w * e->team_size : w - tid;
  double extra = 0;
  const int *in = hwt_graph_op_inputs(e->g, op);
  for (int j = 0; j < hwt_graph_op_n_inputs(e->g, op); j++) {
    float *h = r->held + (size_t)in[j] * (size_t)r->n_cores * 2;
    double most = 0;
    for (int i = first; i < last; i++) {
      float *hc = h + 2 * (base + i);
      float lo = (float)i / (float)nth, hi = (float)(i + 1) / (float)nth;
      float a = hc[0] > lo ? hc[0] : lo, b = hc[1] < hi ? hc[1] : hi;
      double miss = (double)(hi - lo) - (b > a ? (double)(b - a) : 0.0);
      if (miss > most) most = miss;
      /* the core now holds its slice too (one interval: their hull when
       * they touch, else the slice just read) */
      if (hc[1] >= lo && hc[0] <= hi && hc[1] > hc[0]) {
        hc[0] = hc[0] < lo ? hc[0] : lo;
        hc[1] = hc[1] > hi ? hc[1] : hi;
      } else {
        hc[0] = lo, hc[1] = hi;
      }
    }
    if (most > 1e-6) {
      double bytes = most * (double)hwt_graph_tensor_bytes(e->g, in[j]);
      extra += c->xfer_s + (c->xfer_bps > 0 ? bytes / c->xfer_bps : 0.0);
    }
  }
  /* Writes: each core of the part holds its slice, no other core does (a
   * tensor is written once a run, so only its other parts' cores can hold
   * any of it, and they hold their own slices). */
  const int *out = hwt_graph_op_outputs(e->g, op);
  for (int j = 0; j < hwt_graph_op_n_outputs(e->g, op); j++) {
    float *h = r->held + (size_t)out[j] * (size_t)r->n_cores * 2;
    for (int i = first; i < last; i++) {
      h[2 * (base + i)] = (float)i / (float)nth;
      h[2 * (base + i) + 1] = (float)(i + 1) / (float)nth;
    }
  }
  return extra;
}

/* Whether worker w, idle since its last part ended, has parked by t. */
static int parked(const vrun_impl *r, int w, double t) {
  return r->c->wake_s > 0 && t - r->idle_since[w] > r->c->park_s;
}

void hwt_vrun_start(hwt_vrun *v, int w, int op, int tid, int nth, int handoff) {
  vrun_impl *r = (vrun_impl *)v;
  hwt_engine *e = v->e;
  const hwt_sim_costs *c = r->c;
  if (w < 0 || w >= r->workers || r->op[w] >= 0) {
    set_err(r->err, "virtual time: worker %d given op %d while busy (a scheduler bug)", w, op);
    return;
  }
  if (nth < 1 || nth > c->max_threads) {
    set_err(r->err, "virtual time: op %d started with %d threads, beyond the cost table", op,
            nth);
    return;
  }
  size_t k = (size_t)op * (size_t)c->max_threads + (size_t)(nth - 1);
  double dur = c->seconds[k] + (r->xfer ? xfer_part(r, w, op, tid, nth) : 0.0);
  double t = (r->sect_end > v->now ? r->sect_end : v->now) + (handoff ? c->dispatch_s : c->inline_s);
  if (handoff && e->sched->vplaces && parked(r, w, t)) t += c->wake_s;
  r->op[w] = op;
  r->tid[w] = tid;
  r->nth[w] = nth;
  r->ready[w] = t;
  r->end[w] = t + dur;
  r->left[w] = dur;
  r->rate[w] = 1;
  /* A team op is one part with all the memory traffic; corun's parts share it. */
  int parts = e->sched->info.worker_groups ? nth : 1;
  r->mu[w] = r->model ? c->mem_frac[k] : 0;
  r->bps[w] = r->model ? c->mem_bps[k] / parts : 0;
  if (tid == 0) {
    r->parts_left[op] = parts;
    r->events[op] = (hwt_op_event){op, w, nth, t, 0};
    r->ran++;
  }
  log_step(r, 0, w, op, tid, nth, t);
}

int hwt_vrun_next_inline(hwt_vrun *v, int w, const int *stack, int *n) {
  if (*n == 0) return 0;
  int op = stack[--(*n)];
  hwt_vrun_start(v, w, op, 0, v->e->op_nth[op], 0);
  return 1;
}

/* Memory model: brings `left` up to `now`, then re-rates every running part
 * from the demand of all of them against what the memory system serves. */
static void rerate(vrun_impl *r) {
  const double now = r->v.now;
  int busy = 0;
  double demand = 0;
  for (int w = 0; w < r->workers; w++) {
    if (r->op[w] < 0 || r->waits[w]) continue;
    double from = r->last > r->ready[w] ? r->last : r->ready[w];
    if (now > from) r->left[w] -= (now - from) * r->rate[w];
    if (r->left[w] < 0) r->left[w] = 0;
    busy += r->v.e->sched->info.worker_groups ? 1 : r->nth[w];
    demand += r->bps[w];
  }
  r->last = now;
  int cores = busy < r->c->cores ? busy : r->c->cores;
  double cap = r->c->bw_cap[cores];
  double stretch = cap > 0 && demand > cap ? demand / cap : 1.0;
  for (int w = 0; w < r->workers; w++) {
    if (r->op[w] < 0 || r->waits[w]) continue;
    r->rate[w] = 1.0 / (1.0 - r->mu[w] + r->mu[w] * stretch);
    double from = now > r->ready[w] ? now : r->ready[w];
    r->end[w] = from + r->left[w] / r->rate[w];
  }
}

/* The running part that ends first: (end, op, tid) order; -1 if none. */
static int next_end(const vrun_impl *r) {
  int best = -1;
  for (int w = 0; w < r->workers; w++) {
    if (r->op[w] < 0) continue;
    if (best < 0 || r->end[w] < r->end[best] ||
        (r->end[w] == r->end[best] &&
         (r->op[w] < r->op[best] || (r->op[w] == r->op[best] && r->tid[w] < r->tid[best]))))
      best = w;
  }
  return best;
}

static int simulate(hwt_sim *s, void *vstate, const hwt_sim_costs *c, double *makespan,
                    hwt_sim_step *steps, int max_steps, int *n_steps) {
  hwt_engine *e = &s->e;
  const hwt_sched_impl *sched = e->sched;
  int W = e->executors;
  vrun_impl r;
  memset(&r, 0, sizeof r);
  r.v.e = e;
  r.c = c;
  r.workers = W;
  r.model = c->mem_frac && c->mem_bps && c->bw_cap && c->cores > 0;
  r.steps = steps;
  r.max_steps = max_steps;
  r.err = s->err;
  size_t wn = (size_t)W, n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  r.op = malloc(wn * 4 * sizeof(int));
  r.ready = malloc(wn * 7 * sizeof(double));
  r.parts_left = calloc(n, sizeof(int));
  r.xfer = c->xfer_bps > 0 || c->xfer_s > 0;
  r.n_cores = e->executors * e->team_size;
  if (r.xfer)
    r.held = malloc((size_t)(e->n_tensors > 0 ? e->n_tensors : 1) * (size_t)r.n_cores * 2 *
                    sizeof(float));
  int st = HWT_OK;
  if (!r.op || !r.ready || !r.parts_left || (r.xfer && !r.held)) {
    snprintf(s->err, sizeof s->err, "out of memory");
    st = HWT_ENOMEM;
    goto out;
  }
  r.tid = r.op + wn;
  r.nth = r.op + 2 * wn;
  r.waits = r.op + 3 * wn;
  r.end = r.ready + wn;
  r.left = r.ready + 2 * wn;
  r.rate = r.ready + 3 * wn;
  r.mu = r.ready + 4 * wn;
  r.bps = r.ready + 5 * wn;
  r.idle_since = r.ready + 6 * wn;
  for (int w = 0; w < W; w++) r.op[w] = -1, r.waits[w] = 0, r.idle_since[w] = 0;
  r.events = e->events;
  memset(e->events, 0, n * sizeof *e->events);
  hwt_exec_reset_pending(e);

  if (r.xfer) xfer_reset(&r);
  r.v.now = r.sect_end = 0;
  sched->vstart(&r.v, vstate);
  if (r.model) rerate(&r);
  double finish = 0;
  const int groups = sched->info.worker_groups;
  int w;
  while (!s->err[0] && (w = next_end(&r)) >= 0) {
    r.v.now = r.end[w];
    int op = r.op[w], tid = r.tid[w], nth = r.nth[w];
    if (r.model) rerate(&r); /* brings the others' progress up to now */
    if (groups && tid == 0 && r.parts_left[op] > 1) {
      r.waits[w] = 1;
      r.left[w] = r.bps[w] = r.mu[w] = 0;
      r.end[w] = HUGE_VAL;
      if (r.model) rerate(&r);
      continue;
    }
    r.op[w] = -1;
    r.idle_since[w] = r.v.now;
    log_step(&r, 1, w, op, tid, nth, r.v.now);
    int last = --r.parts_left[op] == 0;
    if (last) r.events[op].end_s = r.v.now;
    if (r.v.now > finish) finish = r.v.now;
    r.sect_end = r.v.now;
    sched->vdone(&r.v, vstate, w, op, last);
    /* the other parts are done: a waiting part 0 ends now */
    if (groups && r.parts_left[op] == 1)
      for (int x = 0; x < W; x++)
        if (r.waits[x] && r.op[x] == op) r.waits[x] = 0, r.ready[x] = r.end[x] = r.v.now;
    if (r.model) rerate(&r);
  }
  if (!s->err[0] && r.ran != e->n_run)
    set_err(s->err, "virtual time: %d of %d ops ran (the scheduler stalled)", r.ran, e->n_run);
  if (s->err[0]) st = HWT_EINVAL;
  /* The run is over when every worker has seen its end: a parked one wakes. */
  double woken = 0;
  for (int x = 0; x < W; x++)
    if (parked(&r, x, finish)) woken = c->wake_s;
  *makespan = finish + woken + c->run_s;
  if (n_steps) *n_steps = r.n_steps;
out:
  free(r.op);
  free(r.ready);
  free(r.parts_left);
  free(r.held);
  return st < 0 ? st : r.ran;
}

int hwt_sim_create(const hwt_graph *g, hwt_sim **out, char *err, size_t errlen) {
  if (!out) return HWT_EINVAL;
  *out = NULL;
  if (!g) {
    if (err && errlen) snprintf(err, errlen, "no graph");
    return HWT_EINVAL;
  }
  hwt_sim *s = calloc(1, sizeof *s);
  if (!s) {
    if (err && errlen) snprintf(err, errlen, "out of memory");
    return HWT_ENOMEM;
  }
  hwt_engine *e = &s->e;
  e->g = g;
  e->n_ops = hwt_graph_n_ops(g);
  e->n_tensors = hwt_graph_n_tensors(g);
  /* No arena is ever allocated: no reuse keeps planning linear. */
  hwt_plan_options po;
  hwt_plan_options_init(&po);
  po.reuse = HWT_REUSE_NONE;
  char local[256] = "out of memory";
  int st = HWT_EINVAL;
  if ((e->plan = hwt_plan_build(g, &po, local, sizeof local)) &&
      (st = hwt_exec_alloc_op_arrays(e)) == HWT_OK && (st = hwt_fold_plan(e)) == HWT_OK) {
    *out = s;
    return HWT_OK;
  }
  if (err && errlen) snprintf(err, errlen, "%s", local);
  hwt_sim_destroy(s);
  return st < 0 ? st : HWT_EINVAL;
}

void hwt_sim_destroy(hwt_sim *s) {
  if (!s) return;
  hwt_sched_free_all(&s->e);
  hwt_plan_destroy(s->e.plan);
  hwt_exec_free_op_arrays(&s->e);
  free(s);
}

const char *hwt_sim_error(const hwt_sim *s) { return s ? s->err : "no simulator"; }

static int check_costs(hwt_sim *s, const hwt_sim_costs *c) {
  const hwt_engine *e = &s->e;
  if (!c || !c->seconds || c->max_threads < 1) {
    snprintf(s->err, sizeof s->err, "costs: no op times (seconds, max_threads >= 1)");
    return HWT_EINVAL;
  }
  if (c->max_threads < e->max_nth) {
    snprintf(s->err, sizeof s->err, "costs: op times up to %d threads, the config runs ops on up to %d",
             c->max_threads, e->max_nth);
    return HWT_EINVAL;
  }
  if (!(c->inline_s >= 0 && c->dispatch_s >= 0 && c->section_s >= 0 && c->run_s >= 0 &&
        c->xfer_s >= 0 && c->xfer_bps >= 0 && c->xfer_s < 1e30 && c->xfer_bps < 1e30 &&
        c->park_s >= 0 && c->wake_s >= 0 && c->park_s < 1e30 && c->wake_s < 1e30)) {
    snprintf(s->err, sizeof s->err, "costs: overheads, transfer and wake figures must be >= 0");
    return HWT_EINVAL;
  }
  size_t n = (size_t)e->n_ops * (size_t)c->max_threads;
  for (size_t i = 0; i < n; i++)
    if (!(c->seconds[i] >= 0 && c->seconds[i] < 1e30)) {
      snprintf(s->err, sizeof s->err, "costs: op %zu at %zu thread(s): %g seconds", i / (size_t)c->max_threads,
               i % (size_t)c->max_threads + 1, c->seconds[i]);
      return HWT_EINVAL;
    }
  return HWT_OK;
}

int hwt_sim_run_steps(hwt_sim *s, const hwt_engine_config *cfg, const hwt_sim_costs *c,
                      double *makespan_s, hwt_op_event *events, int max_events,
                      hwt_sim_step *steps, int max_steps, int *n_steps) {
  if (!s || !cfg || !makespan_s) return HWT_EINVAL;
  hwt_engine *e = &s->e;
  s->err[0] = '\0';
  /* The previous configuration's scheduler state. */
  hwt_sched_free_all(e);
  int st = hwt_exec_configure(e, cfg, s->err, sizeof s->err);
  if (st < 0 || (st = check_costs(s, c)) < 0) return st;
  void *vstate = NULL;
  if ((st = e->sched->vinit(e, &vstate)) < 0) {
    snprintf(s->err, sizeof s->err, "out of memory");
    return st;
  }
  st = simulate(s, vstate, c, makespan_s, steps, max_steps, n_steps);
  if (st < 0 || !events) return st;
  int k = 0;
  for (int op = 0; op < e->n_ops && k < max_events; op++)
    if (!e->folded[op]) events[k++] = e->events[op];
  return st;
}

int hwt_sim_run(hwt_sim *s, const hwt_engine_config *cfg, const hwt_sim_costs *c,
                double *makespan_s, hwt_op_event *events, int max_events) {
  return hwt_sim_run_steps(s, cfg, c, makespan_s, events, max_events, NULL, 0, NULL);
}
