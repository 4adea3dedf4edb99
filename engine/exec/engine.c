/* Engine life cycle: create (plan, arena, folding plan, pool, scheduler
 * state), bind, prepare (folded ops, op contexts, packed weights,
 * workspaces), run, destroy. The scheduler is a row of sched_table.c: this
 * file applies its properties and calls its functions, never its name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/config_check.h"
#include "hwtune/errorf.h"
#include "hwtune/free_all.h"
#include "sched.h"
#include "hwtune/bench.h"
#include "hwtune/isa.h"

/* Why a call failed, into the caller's err or the engine's. */
#define set_err(...) ((void)hwt_errorf(0, __VA_ARGS__))

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* hwt_sched_alloc blocks: each starts with one cache line holding the link
 * to the previous block, so the caller's part stays cache-line aligned. */
void *hwt_sched_alloc(hwt_engine *e, size_t bytes) {
  size_t total = round_up(HWT_CACHELINE + bytes, HWT_CACHELINE);
  char *b = aligned_alloc(HWT_CACHELINE, total);
  if (!b) return NULL;
  memset(b, 0, total);
  *(void **)b = e->sched_mem;
  e->sched_mem = b;
  return b + HWT_CACHELINE;
}

void hwt_sched_free_all(hwt_engine *e) {
  while (e->sched_mem) {
    void *next = *(void **)e->sched_mem;
    free(e->sched_mem);
    e->sched_mem = next;
  }
}

void hwt_engine_config_init(hwt_engine_config *c) {
  memset(c, 0, sizeof *c);
  int n = hwt_allowed_cpus(NULL, 0);
  c->executors = 1;
  c->threads_per_executor = n > 0 ? n : 1;
  c->scheduler = NULL; /* the default_one row */
  c->pin = 1;
  c->isa = -1;
}

/* The row a config names, or NULL with the reason in err. */
static const hwt_sched_impl *find_sched(const char *name, char *err, size_t errlen) {
  const hwt_sched_impl *r = hwt_sched_find(name);
  if (r) return r;
  if (!name) {
    set_err(err, errlen, "no default scheduler in the table");
    return NULL;
  }
  char names[256];
  set_err(err, errlen, "unknown scheduler '%s' (one of: %s)", name,
          hwt_sched_list(names, sizeof names));
  return NULL;
}

static int check_config(const hwt_engine_config *c, const hwt_sched_impl *s, char *err,
                        size_t errlen) {
  (void)s;
  /* The rules `hwtune run` and hwtune-run apply too (config_check.c); no
   * CPU budget here: an oversubscribed engine runs unpinned. */
  if (hwt_config_check(c, 0, err, errlen) != HWT_CFG_OK) return HWT_EINVAL;
  if (c->op_cand_n < 0 || (c->op_cand_n > 0 && !c->op_cand_threads)) {
    set_err(err, errlen, "op_cand_n %d needs op_cand_threads", c->op_cand_n);
    return HWT_EINVAL;
  }
  if (c->isa >= 0 && !hwt_isa_supported((hwt_isa)c->isa)) {
    set_err(err, errlen, "ISA %d is not supported on this CPU/build", c->isa);
    return HWT_EISA;
  }
  return HWT_OK;
}

/* Copies the config's optional per-op arrays: the caller's may not outlive
 * create. */
static void free_op_copies(hwt_engine *e) {
  free(e->op_threads);
  free(e->op_cost);
  free(e->op_priority);
  free(e->cand_threads);
  free(e->cand_seconds);
  e->op_threads = NULL;
  e->op_cost = e->op_priority = e->cand_seconds = NULL;
  e->cand_threads = NULL;
  e->cand_n = 0;
}

static int copy_op_arrays(hwt_engine *e) {
  free_op_copies(e);
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  if (e->cfg.op_threads) {
    if (!(e->op_threads = malloc(n * sizeof(int)))) return HWT_ENOMEM;
    memcpy(e->op_threads, e->cfg.op_threads, (size_t)e->n_ops * sizeof(int));
  }
  if (e->cfg.op_cost) {
    if (!(e->op_cost = malloc(n * sizeof(double)))) return HWT_ENOMEM;
    memcpy(e->op_cost, e->cfg.op_cost, (size_t)e->n_ops * sizeof(double));
  }
  if (e->cfg.op_priority) {
    if (!(e->op_priority = malloc(n * sizeof(double)))) return HWT_ENOMEM;
    memcpy(e->op_priority, e->cfg.op_priority, (size_t)e->n_ops * sizeof(double));
  }
  if (e->cfg.op_cand_n > 0) {
    size_t m = n * (size_t)e->cfg.op_cand_n;
    e->cand_n = e->cfg.op_cand_n;
    e->cand_threads = malloc(m * sizeof(int));
    e->cand_seconds = malloc(m * sizeof(double));
    if (!e->cand_threads || !e->cand_seconds) return HWT_ENOMEM;
    for (size_t i = 0; i < (size_t)e->n_ops * (size_t)e->cand_n; i++) {
      int t = e->cfg.op_cand_threads[i];
      e->cand_threads[i] = t > e->max_nth ? e->max_nth : t;
      e->cand_seconds[i] = e->cfg.op_cand_seconds ? e->cfg.op_cand_seconds[i] : -1.0;
    }
  }
  e->cfg.op_cand_threads = e->cand_threads;
  e->cfg.op_cand_seconds = e->cand_seconds;
  e->cfg.op_threads = e->op_threads;
  e->cfg.op_cost = e->op_cost;
  e->cfg.op_priority = e->op_priority;
  return HWT_OK;
}

static int find_impls(hwt_engine *e, char *err, size_t errlen) {
  for (int op = 0; op < e->n_ops; op++) {
    const char *type = hwt_graph_op_type(e->g, op);
    if (hwt_graph_op_n_inputs(e->g, op) > HWT_OP_MAX_IO ||
        hwt_graph_op_n_outputs(e->g, op) > HWT_OP_MAX_IO) {
      set_err(err, errlen, "op %d '%s': more than %d inputs or outputs", op,
              hwt_graph_op_name(e->g, op), HWT_OP_MAX_IO);
      return HWT_EINVAL;
    }
    if (!(e->impl[op] = hwt_ops_find(type))) {
      set_err(err, errlen, "op %d '%s': op type '%s' is not implemented", op,
              hwt_graph_op_name(e->g, op), type);
      return HWT_EINVAL;
    }
    int t = e->op_threads ? e->op_threads[op] : 0;
    if (t < 0) {
      set_err(err, errlen, "op %d '%s': thread count %d < 0", op, hwt_graph_op_name(e->g, op), t);
      return HWT_EINVAL;
    }
    /* An explicit count is the tuner's or user's choice; the default
     * (the team) shrinks to one thread for an op too small to split. */
    if (e->folded[op])
      e->op_nth[op] = 1;
    else if (t == 0)
      e->op_nth[op] = e->solo[op] ? 1 : e->default_nth;
    else
      e->op_nth[op] = t > e->max_nth ? e->max_nth : t;
    e->op_maxth[op] = e->op_nth[op];
    for (int k = 0; k < e->cand_n; k++) {
      int c = e->cand_threads[(size_t)op * (size_t)e->cand_n + (size_t)k];
      if (c > e->op_maxth[op]) e->op_maxth[op] = c;
    }
  }
  return HWT_OK;
}

/* Activations and outputs point into the arena; inputs get engine-owned
 * buffers until bound; params have no storage until bound. */
static int place_tensors(hwt_engine *e) {
  int64_t arena = hwt_plan_arena_bytes(e->plan), in_bytes = 0;
  for (int t = 0; t < e->n_tensors; t++)
    if (hwt_graph_tensor_kind(e->g, t) == HWT_TENSOR_INPUT)
      in_bytes += (int64_t)round_up((size_t)hwt_graph_tensor_bytes(e->g, t), HWT_PLAN_ALIGN);
  size_t total = round_up((size_t)(arena + in_bytes), HWT_PLAN_ALIGN);
  if (!(e->arena = aligned_alloc(HWT_PLAN_ALIGN, total ? total : HWT_PLAN_ALIGN))) return HWT_ENOMEM;
  memset(e->arena, 0, total);
  char *base = e->arena;
  int64_t next_in = arena;
  for (int t = 0; t < e->n_tensors; t++) {
    int kind = hwt_graph_tensor_kind(e->g, t);
    if (kind == HWT_TENSOR_PARAM) {
      e->tensor[t] = NULL;
    } else if (kind == HWT_TENSOR_INPUT) {
      e->tensor[t] = (float *)(base + next_in);
      next_in += (int64_t)round_up((size_t)hwt_graph_tensor_bytes(e->g, t), HWT_PLAN_ALIGN);
    } else {
      e->tensor[t] = (float *)(base + hwt_plan_tensor_offset(e->plan, t));
    }
  }
  return HWT_OK;
}

static int make_pool(hwt_engine *e, char *err, size_t errlen) {
  int cpus = hwt_allowed_cpus(NULL, 0);
  int threads = e->executors * e->team_size;
  /* A scheduler that never pins is an unpinned baseline; a configuration
   * with more threads than CPUs cannot pin disjointly and runs unpinned. */
  int pin = e->cfg.pin && e->sched->info.pins != HWT_PIN_NEVER && cpus > 0 && threads <= cpus;
  hwt_pool_config pc = {e->executors, e->team_size, pin, NULL, 0};
  e->pool = hwt_pool_create(&pc, err, errlen);
  if (!e->pool) return HWT_ESYS;
  /* Oversubscribed: a spinning master would steal the CPU of the thread it
   * waits for. */
  e->spin = cpus > 0 && threads > cpus ? 0 : HWT_EXEC_SPIN;
  return HWT_OK;
}

int hwt_exec_alloc_op_arrays(hwt_engine *e) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  e->impl = calloc(n, sizeof *e->impl);
  e->op_nth = calloc(n, sizeof(int));
  e->prio = calloc(n, sizeof(double));
  e->cost = calloc(n, sizeof(double));
  e->tiny = calloc(n, 1);
  e->solo = calloc(n, 1);
  e->folded = calloc(n, 1);
  e->op_maxth = calloc(n, sizeof(int));
  e->pending = calloc(n, sizeof(_Atomic int));
  e->events = calloc(n, sizeof(hwt_op_event));
  if (!e->impl || !e->op_nth || !e->prio || !e->cost || !e->tiny || !e->solo || !e->folded ||
      !e->op_maxth || !e->pending || !e->events)
    return HWT_ENOMEM;
  return HWT_OK;
}

void hwt_exec_free_op_arrays(hwt_engine *e) {
  free_op_copies(e);
  HWT_FREE_ALL(e->run_order, e->init_pending, e->roots, e->impl, e->op_nth, e->prio, e->cost,
               e->tiny, e->solo, e->folded, e->op_maxth, e->pending, e->events);
}

int hwt_exec_configure(hwt_engine *e, const hwt_engine_config *cfg, char *err, size_t errlen) {
  const hwt_sched_impl *sched = find_sched(cfg->scheduler, err, errlen);
  if (!sched) return HWT_EINVAL;
  int st = check_config(cfg, sched, err, errlen);
  if (st < 0) return st;
  e->cfg = *cfg;
  e->cfg.scheduler = sched->info.name; /* the caller's string may not outlive create */
  e->sched = sched;
  e->executors = sched->info.single_team ? 1 : cfg->executors;
  e->team_size = cfg->threads_per_executor;
  e->default_nth = e->max_nth = e->team_size;
  if (sched->info.worker_groups) {
    /* One worker per core; an op's threads are a group formed per dispatch. */
    e->executors = cfg->executors * cfg->threads_per_executor;
    e->team_size = 1;
    e->max_nth = e->executors;
  }
  if ((st = copy_op_arrays(e)) < 0) {
    set_err(err, errlen, "out of memory");
    return st;
  }
  hwt_exec_levels(e);
  return find_impls(e, err, errlen);
}

static int create_steps(hwt_engine *e, const hwt_engine_config *cfg, char *err, size_t errlen) {
  int st;
  /* The reuse policy needs the row before the rest of the config is applied. */
  const hwt_sched_impl *sched = find_sched(cfg->scheduler, err, errlen);
  if (!sched) return HWT_EINVAL;
  hwt_plan_options po;
  hwt_plan_options_init(&po);
  po.reuse = sched->info.in_order ? HWT_REUSE_SEQUENTIAL : HWT_REUSE_PARALLEL_SAFE;
  if (!(e->plan = hwt_plan_build(e->g, &po, err, errlen))) return HWT_EINVAL;
  size_t nt = (size_t)(e->n_tensors > 0 ? e->n_tensors : 1), n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  e->tensor = calloc(nt, sizeof *e->tensor);
  e->bound = calloc(nt, 1);
  e->ctx = calloc(n, sizeof *e->ctx);
  e->ctx_prepared = calloc(n, 1);
  if (!e->tensor || !e->bound || !e->ctx || !e->ctx_prepared) return HWT_ENOMEM;
  if ((st = hwt_exec_alloc_op_arrays(e)) < 0) return st;
  if ((st = place_tensors(e)) < 0 || (st = hwt_fold_plan(e)) < 0 || (st = hwt_fold_place(e)) < 0)
    return st;
  if ((st = hwt_exec_configure(e, cfg, err, errlen)) < 0) return st;
  if ((st = make_pool(e, err, errlen)) < 0) return st;
  if (e->sched->init && (st = e->sched->init(e, &e->sched_state)) < 0) return st;
  e->sched_ready = 1;
  return HWT_OK;
}

int hwt_engine_create(const hwt_graph *g, const hwt_engine_config *cfg, hwt_engine **out,
                      char *err, size_t errlen) {
  hwt_engine_config def;
  if (!out) return HWT_EINVAL;
  *out = NULL;
  if (!cfg) {
    hwt_engine_config_init(&def);
    cfg = &def;
  }
  if (!g) {
    set_err(err, errlen, "no graph");
    return HWT_EINVAL;
  }
  /* Config errors before anything is allocated (configure checks again). */
  const hwt_sched_impl *sched = find_sched(cfg->scheduler, err, errlen);
  if (!sched) return HWT_EINVAL;
  int st = check_config(cfg, sched, err, errlen);
  if (st < 0) return st;
  hwt_engine *e = calloc(1, sizeof *e);
  if (!e) {
    set_err(err, errlen, "out of memory");
    return HWT_ENOMEM;
  }
  e->g = g;
  e->n_ops = hwt_graph_n_ops(g);
  e->n_tensors = hwt_graph_n_tensors(g);
  e->clock = hwt_now;
  char local[256] = "";
  st = create_steps(e, cfg, local, sizeof local);
  if (st < 0) {
    if (!local[0]) snprintf(local, sizeof local, "out of memory");
    set_err(err, errlen, "%s", local);
    hwt_engine_destroy(e);
    return st;
  }
  *out = e;
  return HWT_OK;
}

static void release_op(hwt_engine *e, int op) {
  if (e->ctx_prepared[op] && e->impl[op]->release) e->impl[op]->release(&e->ctx[op]);
  e->ctx_prepared[op] = 0;
}

static void release_ops(hwt_engine *e) {
  for (int op = 0; op < e->n_ops && e->ctx; op++) release_op(e, op);
  e->prepared = 0;
}

void hwt_engine_destroy(hwt_engine *e) {
  if (!e) return;
  release_ops(e);
  hwt_op_shared_destroy(e->shared);
  if (e->pool) hwt_pool_destroy(e->pool);
  if (e->sched_ready && e->sched->release) e->sched->release(e, e->sched_state);
  hwt_sched_free_all(e);
  hwt_plan_destroy(e->plan);
  free(e->const_mem);
  hwt_exec_free_op_arrays(e);
  HWT_FREE_ALL(e->ws, e->arena, e->tensor, e->bound, e->ctx, e->ctx_prepared);
  free(e);
}

const char *hwt_engine_error(const hwt_engine *e) { return e ? e->err : "no engine"; }

int hwt_engine_bind(hwt_engine *e, int t, float *data) {
  if (!e) return HWT_EINVAL;
  if (t < 0 || t >= e->n_tensors || !data) {
    set_err(e->err, sizeof e->err, "bind: bad tensor id %d or NULL data", t);
    return HWT_EINVAL;
  }
  if (((uintptr_t)data & 3) != 0) {
    set_err(e->err, sizeof e->err, "bind: tensor %d '%s': data is not 4-byte aligned", t,
            hwt_graph_tensor_name(e->g, t));
    return HWT_EINVAL;
  }
  /* Op contexts hold tensor pointers: a new binding needs a new prepare. */
  release_ops(e);
  e->tensor[t] = data;
  e->bound[t] = 1;
  return HWT_OK;
}

static int prepare_op(hwt_engine *e, int op) {
  if (!e->impl[op]) return HWT_EINVAL;
  hwt_op_ctx *c = &e->ctx[op];
  memset(c, 0, sizeof *c);
  c->g = e->g;
  c->op = op;
  c->n_in = hwt_graph_op_n_inputs(e->g, op);
  c->n_out = hwt_graph_op_n_outputs(e->g, op);
  const int *in = hwt_graph_op_inputs(e->g, op), *out = hwt_graph_op_outputs(e->g, op);
  for (int i = 0; i < c->n_in; i++) {
    c->in[i] = e->tensor[in[i]];
    int producer = hwt_graph_tensor_producer(e->g, in[i]);
    if (hwt_graph_tensor_kind(e->g, in[i]) == HWT_TENSOR_PARAM ||
        (producer >= 0 && e->folded[producer]))
      c->const_in |= (uint64_t)1 << i;
  }
  for (int i = 0; i < c->n_out; i++) c->out[i] = e->tensor[out[i]];
  c->isa = (hwt_isa)(e->cfg.isa >= 0 ? e->cfg.isa : hwt_isa_select());
  c->max_threads = e->op_maxth[op];
  /* Without a table (out of memory) every op packs its own copy. */
  if (!e->shared) e->shared = hwt_op_shared_create();
  c->shared = e->shared;
  char why[200] = "";
  int st = e->impl[op]->prepare(c, why, sizeof why);
  if (st < 0) {
    set_err(e->err, sizeof e->err, "op %d '%s' (%s): %s", op, hwt_graph_op_name(e->g, op),
            hwt_graph_op_type(e->g, op), why[0] ? why : "prepare failed");
    return st;
  }
  e->ctx_prepared[op] = 1;
  return HWT_OK;
}

int hwt_engine_prepare(hwt_engine *e) {
  if (!e) return HWT_EINVAL;
  release_ops(e);
  for (int t = 0; t < e->n_tensors; t++)
    if (hwt_graph_tensor_kind(e->g, t) == HWT_TENSOR_PARAM && !e->bound[t]) {
      set_err(e->err, sizeof e->err, "param tensor %d '%s' is not bound", t,
              hwt_graph_tensor_name(e->g, t));
      return HWT_EINVAL;
    }
  int st = hwt_fold_run(e, prepare_op, release_op);
  if (st < 0) {
    release_ops(e);
    return st;
  }
  size_t ws = 0;
  for (int op = 0; op < e->n_ops; op++) {
    if (e->folded[op]) continue;
    st = prepare_op(e, op);
    if (st < 0) {
      release_ops(e);
      return st;
    }
    if (e->ctx[op].ws_floats > ws) ws = e->ctx[op].ws_floats;
  }
  /* 16 floats: every thread's workspace starts on its own cache line. */
  e->ws_stride = round_up(ws, 16);
  free(e->ws);
  size_t bytes = (size_t)e->executors * (size_t)e->team_size * e->ws_stride * sizeof(float);
  e->ws = aligned_alloc(HWT_CACHELINE, bytes ? bytes : HWT_CACHELINE);
  if (!e->ws) {
    release_ops(e);
    set_err(e->err, sizeof e->err, "out of memory for %zu bytes of workspace", bytes);
    return HWT_ENOMEM;
  }
  e->prepared = 1;
  return HWT_OK;
}

float *hwt_engine_tensor(hwt_engine *e, int t) {
  if (!e || t < 0 || t >= e->n_tensors) return NULL;
  return e->tensor[t];
}

int hwt_engine_run(hwt_engine *e) {
  if (!e) return HWT_EINVAL;
  if (!e->prepared) {
    set_err(e->err, sizeof e->err, "run before prepare (or a bind since the last prepare)");
    return HWT_EINVAL;
  }
  hwt_exec_reset_pending(e);
  int st = e->sched->run(e, e->sched_state);
  if (st < 0) set_err(e->err, sizeof e->err, "run: the pool refused the run (%d)", st);
  e->events_valid = st == HWT_OK && e->profile;
  return st;
}

int hwt_engine_profile(hwt_engine *e, int enable) {
  if (!e) return HWT_EINVAL;
  e->profile = enable != 0;
  return HWT_OK;
}

int hwt_engine_events(const hwt_engine *e, hwt_op_event *out, int max) {
  if (!e || !e->events_valid) return 0;
  int n = 0;
  for (int op = 0; op < e->n_ops && n < max; op++) {
    if (e->folded[op]) continue;
    if (out) out[n] = e->events[op];
    n++;
  }
  return n;
}

int64_t hwt_engine_arena_bytes(const hwt_engine *e) {
  return e && e->plan ? hwt_plan_arena_bytes(e->plan) : HWT_EINVAL;
}

int64_t hwt_engine_arena_bytes_no_reuse(const hwt_engine *e) {
  return e && e->plan ? hwt_plan_arena_bytes_no_reuse(e->plan) : HWT_EINVAL;
}

int hwt_engine_n_folded(const hwt_engine *e) { return e ? e->n_folded : HWT_EINVAL; }

int hwt_engine_op_folded(const hwt_engine *e, int op) {
  if (!e || op < 0 || op >= e->n_ops) return HWT_EINVAL;
  return e->folded[op];
}
