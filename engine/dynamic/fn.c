/* The vertex function's analysis and the executor's life cycle.
 *
 * Spaces: every non-param tensor of F has one row per vertex, per child
 * link or per selected vertex; which one follows from the roles of F's
 * inputs, propagated through the ops in dependency order (an op's outputs
 * live where its non-param inputs live). Ops fed only by the vertex's own
 * input are in the input space: they can run before any child is
 * evaluated (hoisting). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dyn_internal.h"
#include "hwtune/errorf.h"
#include "hwtune/free_all.h"
#include "hwtune/isa.h"

void hwt_dyn_set_err(hwt_dyn *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->err, sizeof d->err, fmt, ap);
  va_end(ap);
}

int hwt_dyn_is_row(const hwt_dyn *d, int t) { return d->space[t] != SP_PARAM; }

void hwt_dyn_config_init(hwt_dyn_config *c) {
  memset(c, 0, sizeof *c);
  int n = hwt_allowed_cpus(NULL, 0);
  c->policy = HWT_DYN_BATCHED;
  c->batch = 64;
  /* 256 rows: the GEMM of a Tree-LSTM cell (K = 2 x 150 .. 2 x 512) runs at
   * its full rate from about 64 rows, and 256 rows of its 10-20 activations
   * stay within a 1-2 MiB L2; benchmarks/bench_dynamic.py sweeps it. */
  c->chunk = 256;
  c->executors = 1;
  c->threads_per_executor = n > 0 ? n : 1;
  c->pin = 1;
  c->isa = -1;
  c->hoist = -1;
}

int hwt_dyn_n_buckets(int chunk) {
  int n = 1;
  while ((1 << (n - 1)) < chunk) n++;
  return n;
}

/* A refused configuration or vertex function: HWT_EINVAL, the reason in err. */
#define bad(...) hwt_errorf(HWT_EINVAL, __VA_ARGS__)

static int check_config(const hwt_dyn_config *c, char *err, size_t errlen) {
  if (c->policy < HWT_DYN_BATCHED || c->policy > HWT_DYN_SERIAL)
    return bad(err, errlen, "unknown policy %d", c->policy);
  if (c->batch < 1) return bad(err, errlen, "batch must be >= 1, got %d", c->batch);
  if (c->chunk < 1 || c->chunk > HWT_DYN_MAX_CHUNK || (c->chunk & (c->chunk - 1)))
    return bad(err, errlen, "chunk must be a power of two 1..%d, got %d", HWT_DYN_MAX_CHUNK,
               c->chunk);
  if (c->executors < 1 || c->executors > 64)
    return bad(err, errlen, "executors must be 1..64, got %d", c->executors);
  if (c->threads_per_executor < 1)
    return bad(err, errlen, "threads per executor must be >= 1, got %d",
               c->threads_per_executor);
  if (c->isa >= 0 && !hwt_isa_supported((hwt_isa)c->isa))
    return bad(err, errlen, "ISA %d is not supported on this CPU/build", c->isa);
  if (c->hoist < -1 || c->hoist > 1) return bad(err, errlen, "hoist must be -1, 0 or 1");
  return HWT_OK;
}

/* Row tensors are [1, width]; params keep their shapes. */
static int check_shapes(hwt_dyn *d, char *err, size_t errlen) {
  for (int t = 0; t < d->n_tensors; t++) {
    int kind = d->fn.roles[t].kind;
    int gk = hwt_graph_tensor_kind(d->g, t);
    if ((kind == HWT_DYN_PARAM) != (gk == HWT_TENSOR_PARAM))
      return bad(err, errlen, "tensor '%s': role %s but graph kind %d",
                 hwt_graph_tensor_name(d->g, t), kind == HWT_DYN_PARAM ? "param" : "row", gk);
    if (kind == HWT_DYN_PARAM) continue;
    const int64_t *sh = hwt_graph_tensor_shape(d->g, t);
    if (hwt_graph_tensor_ndim(d->g, t) != 2 || sh[0] != 1 || sh[1] < 1 || sh[1] > (1 << 24))
      return bad(err, errlen, "tensor '%s': rows of a vertex function are [1, width]",
                 hwt_graph_tensor_name(d->g, t));
    d->width[t] = (int)sh[1];
    if ((kind == HWT_DYN_OP) != (gk == HWT_TENSOR_ACTIVATION || gk == HWT_TENSOR_OUTPUT))
      return bad(err, errlen, "tensor '%s': only op outputs may have role op",
                 hwt_graph_tensor_name(d->g, t));
  }
  return HWT_OK;
}

/* Spaces of role tensors, then of ops in dependency order (nodes). */
static int role_space(hwt_dyn *d, int t, char *err, size_t errlen) {
  const hwt_dyn_role *r = &d->fn.roles[t];
  const char *name = hwt_graph_tensor_name(d->g, t);
  switch (r->kind) {
    case HWT_DYN_PARAM: return SP_PARAM;
    case HWT_DYN_VERTEX_IN:
      if (d->x_tensor >= 0) return bad(err, errlen, "two vertex-input tensors");
      d->x_tensor = t;
      return SP_INPUT;
    case HWT_DYN_CHILD:
    case HWT_DYN_CHILD_SUM:
    case HWT_DYN_CHILD_EACH:
      if (r->a < 0 || r->a >= d->fn.n_states)
        return bad(err, errlen, "tensor '%s': no state %d", name, r->a);
      if (r->kind == HWT_DYN_CHILD && r->b < 0)
        return bad(err, errlen, "tensor '%s': child index %d < 0", name, r->b);
      return r->kind == HWT_DYN_CHILD_EACH ? SP_EDGE : SP_VERTEX;
    case HWT_DYN_TO_EDGES: return SP_EDGE;
    case HWT_DYN_SUM_EDGES: return SP_VERTEX;
    case HWT_DYN_STATE:
      if (r->a < 0 || r->a >= d->fn.n_readouts || r->b < 0 || r->b >= d->fn.n_states)
        return bad(err, errlen, "tensor '%s': no readout %d or state %d", name, r->a, r->b);
      return SP_READOUT;
    case HWT_DYN_OP: return -2; /* from its op */
    default: return bad(err, errlen, "tensor '%s': unknown role %d", name, r->kind);
  }
}

static int op_space_of(hwt_dyn *d, int op, const int *ro, int *out_ro, char *err,
                       size_t errlen) {
  int n = hwt_graph_op_n_inputs(d->g, op);
  const int *in = hwt_graph_op_inputs(d->g, op);
  int has_in = 0, has_v = 0, has_e = 0, has_r = 0, r_idx = -1;
  const char *name = hwt_graph_op_name(d->g, op);
  for (int i = 0; i < n; i++) {
    int sp = d->space[in[i]];
    if (sp < 0) return bad(err, errlen, "op '%s': input '%s' is used before it is produced",
                           name, hwt_graph_tensor_name(d->g, in[i]));
    if (sp == SP_INPUT) has_in = 1;
    if (sp == SP_VERTEX) has_v = 1;
    if (sp == SP_EDGE) has_e = 1;
    if (sp == SP_READOUT) {
      if (has_r && ro[in[i]] != r_idx)
        return bad(err, errlen, "op '%s' mixes two readouts", name);
      has_r = 1;
      r_idx = ro[in[i]];
    }
  }
  *out_ro = r_idx;
  if (!has_in && !has_v && !has_e && !has_r)
    return bad(err, errlen, "op '%s' reads only params (fold it into a param)", name);
  if (has_r) {
    if (has_in || has_v || has_e)
      return bad(err, errlen, "op '%s' mixes a readout with the vertex function", name);
    return SP_READOUT;
  }
  if (has_e) {
    if (has_in || has_v)
      return bad(err, errlen, "op '%s' mixes per-child rows with per-vertex rows (a "
                 "to-edges tensor repeats a vertex's row for its children)", name);
    return SP_EDGE;
  }
  if (has_v) return SP_VERTEX;
  int n_out = hwt_graph_op_n_outputs(d->g, op);
  const int *out = hwt_graph_op_outputs(d->g, op);
  for (int i = 0; i < n_out; i++)
    if (d->update_of[out[i]] >= 0) return SP_VERTEX; /* written into the state table */
  return SP_INPUT;
}

static int analyse(hwt_dyn *d, char *err, size_t errlen) {
  int nt = d->n_tensors, no = d->n_ops, st;
  int *ro = calloc((size_t)nt, sizeof *ro);
  int *op_ro = d->op_readout;
  int *waiting = calloc((size_t)(no ? no : 1), sizeof *waiting);
  unsigned char *moved = calloc((size_t)nt, 1);
  d->nodes = calloc((size_t)(no + nt + 1), sizeof *d->nodes);
  if (!ro || !op_ro || !waiting || !moved || !d->nodes) {
    st = HWT_ENOMEM;
    goto out;
  }
  for (int t = 0; t < nt; t++) {
    d->space[t] = -1;
    int sp = role_space(d, t, err, errlen);
    if (sp == HWT_EINVAL) {
      st = HWT_EINVAL;
      goto out;
    }
    if (sp >= 0) d->space[t] = sp;
    ro[t] = d->fn.roles[t].kind == HWT_DYN_STATE ? d->fn.roles[t].a : -1;
  }
  /* Kahn over ops and moves: a move waits for its source's producer; an op
   * for every input's producer (an op, or a move). Ready moves go first. */
  for (int op = 0; op < no; op++) {
    int n = hwt_graph_op_n_inputs(d->g, op);
    const int *in = hwt_graph_op_inputs(d->g, op);
    for (int i = 0; i < n; i++) {
      int k = d->fn.roles[in[i]].kind;
      if (k == HWT_DYN_OP || k == HWT_DYN_TO_EDGES || k == HWT_DYN_SUM_EDGES) waiting[op]++;
    }
  }
  int done = 0, progress = 1;
  while (progress) {
    progress = 0;
    for (int t = 0; t < nt; t++) {
      int k = d->fn.roles[t].kind;
      if (moved[t] || (k != HWT_DYN_TO_EDGES && k != HWT_DYN_SUM_EDGES)) continue;
      int src = d->fn.roles[t].a;
      if (src < 0 || src >= nt) {
        st = bad(err, errlen, "tensor '%s': no source tensor %d", hwt_graph_tensor_name(d->g, t),
                 src);
        goto out;
      }
      if (d->space[src] < 0) continue; /* its producer has not run yet */
      int want = k == HWT_DYN_TO_EDGES ? (d->space[src] == SP_INPUT || d->space[src] == SP_VERTEX)
                                       : d->space[src] == SP_EDGE;
      if (!want || d->width[src] != d->width[t]) {
        st = bad(err, errlen, "tensor '%s': %s of '%s' needs a %s source of its width",
                 hwt_graph_tensor_name(d->g, t), k == HWT_DYN_TO_EDGES ? "to-edges" : "sum",
                 hwt_graph_tensor_name(d->g, src), k == HWT_DYN_TO_EDGES ? "per-vertex" :
                 "per-child");
        goto out;
      }
      moved[t] = 1;
      d->nodes[d->n_nodes++] = (dyn_node){0, t};
      progress = 1;
      /* consumers of t wait one less */
      for (int op = 0; op < no; op++) {
        int n = hwt_graph_op_n_inputs(d->g, op);
        const int *in = hwt_graph_op_inputs(d->g, op);
        for (int i = 0; i < n; i++) waiting[op] -= in[i] == t;
      }
    }
    for (int op = 0; op < no; op++) {
      if (waiting[op] != 0) continue;
      waiting[op] = -1;
      int r_idx = -1;
      int sp = op_space_of(d, op, ro, &r_idx, err, errlen);
      if (sp < 0) {
        st = sp;
        goto out;
      }
      d->op_space[op] = sp;
      op_ro[op] = r_idx;
      int n_out = hwt_graph_op_n_outputs(d->g, op);
      const int *outs = hwt_graph_op_outputs(d->g, op);
      for (int i = 0; i < n_out; i++) {
        d->space[outs[i]] = sp;
        ro[outs[i]] = r_idx;
      }
      d->nodes[d->n_nodes++] = (dyn_node){1, op};
      done++;
      progress = 1;
      for (int c = 0; c < no; c++) {
        if (waiting[c] <= 0) continue;
        int n = hwt_graph_op_n_inputs(d->g, c);
        const int *in = hwt_graph_op_inputs(d->g, c);
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n_out; j++) waiting[c] -= in[i] == outs[j];
      }
    }
  }
  if (done < no) {
    st = bad(err, errlen, "the vertex function has a cycle or an input no op produces");
    goto out;
  }
  for (int t = 0; t < nt; t++)
    if (d->space[t] < 0) {
      st = bad(err, errlen, "tensor '%s' is never produced", hwt_graph_tensor_name(d->g, t));
      goto out;
    }
  /* states: widths, where updates live, gathers' widths */
  for (int s = 0; s < d->fn.n_states; s++) {
    int t = d->fn.state_update[s];
    if (t < 0 || t >= nt || d->fn.roles[t].kind != HWT_DYN_OP || d->space[t] != SP_VERTEX) {
      st = bad(err, errlen, "state %d: its update must be a per-vertex op output", s);
      goto out;
    }
    d->state_width[s] = d->width[t];
  }
  for (int t = 0; t < nt; t++) {
    const hwt_dyn_role *r = &d->fn.roles[t];
    int s = r->kind == HWT_DYN_STATE ? r->b
            : (r->kind == HWT_DYN_CHILD || r->kind == HWT_DYN_CHILD_SUM ||
               r->kind == HWT_DYN_CHILD_EACH) ? r->a : -1;
    if (s >= 0 && d->width[t] != d->state_width[s]) {
      st = bad(err, errlen, "tensor '%s' is %d wide, its state %d wide",
               hwt_graph_tensor_name(d->g, t), d->width[t], d->state_width[s]);
      goto out;
    }
  }
  for (int r = 0; r < d->fn.n_readouts; r++) {
    int at = d->fn.readout_at ? d->fn.readout_at[r] : -1;
    if (at < HWT_DYN_AT_ROOT || at > HWT_DYN_AT_LAST) {
      st = bad(err, errlen, "readout %d: unknown selection %d", r, at);
      goto out;
    }
    for (int k = d->fn.readout_offsets[r]; k < d->fn.readout_offsets[r + 1]; k++) {
      int t = d->fn.readout_outputs[k];
      if (t < 0 || t >= nt || d->space[t] != SP_READOUT || ro[t] != r) {
        st = bad(err, errlen, "readout %d: output %d is not computed by that readout", r, t);
        goto out;
      }
    }
  }
  if (d->fn.embedding >= 0) {
    int e = d->fn.embedding;
    if (e >= nt || d->fn.roles[e].kind != HWT_DYN_PARAM || hwt_graph_tensor_ndim(d->g, e) != 2 ||
        (d->x_tensor >= 0 && hwt_graph_tensor_shape(d->g, e)[1] != d->width[d->x_tensor])) {
      st = bad(err, errlen, "the embedding must be a param [vocab, input width]");
      goto out;
    }
  }
  st = HWT_OK;
out:
  free(ro);
  free(waiting);
  free(moved);
  return st;
}

static int make_pool(hwt_dyn *d, char *err, size_t errlen) {
  int cpus = hwt_allowed_cpus(NULL, 0);
  int threads = d->cfg.executors * d->cfg.threads_per_executor;
  hwt_pool_config pc = {d->cfg.executors, d->cfg.threads_per_executor,
                        d->cfg.pin && cpus > 0 && threads <= cpus, NULL, 0};
  d->pool = hwt_pool_create(&pc, err, errlen);
  return d->pool ? HWT_OK : HWT_ESYS;
}

int hwt_dyn_create(const hwt_dyn_fn *fn, const hwt_dyn_config *cfg, hwt_dyn **out, char *err,
                   size_t errlen) {
  hwt_dyn_config def;
  if (!out) return HWT_EINVAL;
  *out = NULL;
  if (!cfg) {
    hwt_dyn_config_init(&def);
    cfg = &def;
  }
  if (!fn || !fn->g || !fn->roles || fn->n_states < 1 || !fn->state_update ||
      fn->n_readouts < 0 || (fn->n_readouts > 0 && (!fn->readout_at || !fn->readout_offsets)))
    return bad(err, errlen, "incomplete vertex function (graph, roles, at least one state)");
  int st = check_config(cfg, err, errlen);
  if (st < 0) return st;
  hwt_dyn *d = calloc(1, sizeof *d);
  if (!d) return bad(err, errlen, "out of memory");
  d->fn = *fn;
  d->cfg = *cfg;
  d->cfg.op_threads = NULL; /* copied below */
  d->g = fn->g;
  d->n_tensors = hwt_graph_n_tensors(fn->g);
  d->n_ops = hwt_graph_n_ops(fn->g);
  d->n_buckets = hwt_dyn_n_buckets(cfg->chunk);
  d->hoist = cfg->hoist >= 0 ? cfg->hoist : cfg->policy != HWT_DYN_SERIAL;
  d->x_tensor = -1;
  d->team_size = cfg->threads_per_executor;
  size_t nt = (size_t)(d->n_tensors > 0 ? d->n_tensors : 1);
  size_t no = (size_t)(d->n_ops > 0 ? d->n_ops : 1), nb = no * (size_t)d->n_buckets;
  d->space = calloc(nt, sizeof(int));
  d->width = calloc(nt, sizeof(int));
  d->update_of = malloc(nt * sizeof(int));
  d->op_space = calloc(no, sizeof(int));
  d->op_readout = calloc(no, sizeof(int));
  d->state_width = calloc((size_t)fn->n_states, sizeof(int));
  d->param = calloc(nt, sizeof *d->param);
  d->gb = calloc((size_t)d->n_buckets, sizeof *d->gb);
  d->impl = calloc(no, sizeof *d->impl);
  d->ctx = calloc(nb, sizeof *d->ctx);
  d->prepared = calloc(nb, 1);
  d->used = calloc(nb, 1);
  d->nth = calloc(nb, sizeof(int));
  d->calls = calloc(nb, sizeof(int64_t));
  if (!d->space || !d->width || !d->update_of || !d->op_space || !d->op_readout || !d->state_width || !d->param ||
      !d->gb || !d->impl || !d->ctx || !d->prepared || !d->used || !d->nth || !d->calls) {
    hwt_dyn_destroy(d);
    return bad(err, errlen, "out of memory");
  }
  if (cfg->op_threads)
    for (size_t i = 0; i < nb; i++) {
      if (cfg->op_threads[i] < 0) {
        hwt_dyn_destroy(d);
        return bad(err, errlen, "op_threads[%zu] = %d < 0", i, cfg->op_threads[i]);
      }
      d->nth[i] = cfg->op_threads[i];
    }
  for (size_t t = 0; t < nt; t++) d->update_of[t] = -1;
  for (int s = 0; s < fn->n_states; s++) {
    int t = fn->state_update[s];
    if (t < 0 || t >= d->n_tensors || d->update_of[t] >= 0) {
      hwt_dyn_destroy(d);
      return bad(err, errlen, "state %d: bad or shared update tensor %d", s, t);
    }
    d->update_of[t] = s;
  }
  char why[256] = "";
  if ((st = check_shapes(d, why, sizeof why)) < 0 || (st = analyse(d, why, sizeof why)) < 0) {
    hwt_dyn_destroy(d);
    return bad(err, errlen, "%s", why[0] ? why : "out of memory");
  }
  for (int op = 0; op < d->n_ops; op++) {
    const char *type = hwt_graph_op_type(d->g, op);
    if (hwt_graph_op_n_inputs(d->g, op) > HWT_OP_MAX_IO ||
        hwt_graph_op_n_outputs(d->g, op) > HWT_OP_MAX_IO || !(d->impl[op] = hwt_ops_find(type))) {
      hwt_dyn_destroy(d);
      return bad(err, errlen, "op '%s': op type '%s' is not implemented",
                 hwt_graph_op_name(d->g, op), type);
    }
  }
  d->teams = calloc((size_t)cfg->executors, sizeof *d->teams);
  if (!d->teams) {
    hwt_dyn_destroy(d);
    return bad(err, errlen, "out of memory");
  }
  if ((st = make_pool(d, why, sizeof why)) < 0) {
    hwt_dyn_destroy(d);
    return bad(err, errlen, "%s", why);
  }
  *out = d;
  return HWT_OK;
}

void hwt_dyn_destroy(hwt_dyn *d) {
  if (!d) return;
  hwt_dyn_release_prepared(d);
  hwt_op_shared_destroy(d->shared);
  if (d->pool) hwt_pool_destroy(d->pool);
  for (int j = 0; d->gb && j < d->n_buckets; j++) hwt_graph_destroy(d->gb[j]);
  HWT_FREE_ALL(d->gb, d->teams, d->space, d->width, d->update_of, d->op_space, d->op_readout,
               d->state_width, d->param, d->nodes, d->impl, d->ctx, d->prepared, d->used, d->nth,
               d->calls);
  free(d);
}

const char *hwt_dyn_error(const hwt_dyn *d) { return d ? d->err : "no executor"; }

int hwt_dyn_bind(hwt_dyn *d, int t, const float *data) {
  if (!d) return HWT_EINVAL;
  if (t < 0 || t >= d->n_tensors || d->space[t] != SP_PARAM || !data) {
    hwt_dyn_set_err(d, "bind: tensor %d is not a param (or data is NULL)", t);
    return HWT_EINVAL;
  }
  hwt_dyn_release_prepared(d); /* contexts pack params: prepare again */
  d->param[t] = data;
  return HWT_OK;
}

int hwt_dyn_profile(hwt_dyn *d, int on) {
  if (!d) return HWT_EINVAL;
  d->profile = on != 0;
  return HWT_OK;
}

int hwt_dyn_op_calls(const hwt_dyn *d, int op, int bucket, int64_t *calls, double *seconds) {
  if (!d || op < 0 || op >= d->n_ops || bucket < 0 || bucket >= d->n_buckets) return HWT_EINVAL;
  size_t k = (size_t)op * (size_t)d->n_buckets + (size_t)bucket;
  if (calls) *calls = d->calls[k];
  if (seconds) {
    double sum = 0;
    for (int t = 0; d->teams && t < d->cfg.executors; t++)
      if (d->teams[t].seconds) sum += d->teams[t].seconds[k];
    *seconds = sum;
  }
  return HWT_OK;
}

int hwt_dyn_groups(const hwt_dyn *d, int64_t *groups, int64_t *rows) {
  if (!d) return HWT_EINVAL;
  if (groups) *groups = d->groups;
  if (rows) *rows = d->group_rows;
  return HWT_OK;
}
