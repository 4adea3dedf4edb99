/* Fitting an executor to a sample set, once: the readouts' selections, a
 * walk over every batch that computes nothing but finds the largest batch,
 * the most child links of one chunk and the (op, bucket) pairs the set
 * needs; then one arena per team and an op context per needed pair. */
#include <stdlib.h>
#include <string.h>
#include "dyn_internal.h"
#include "hwtune/free_all.h"
#include "hwtune/isa.h"
#include "hwtune/plan.h"
/* F at another row count is F rebuilt with its attributes; the graph API
 * sets attributes by key but does not list them, so the copy reads the
 * graph's own layout (read only). */
#include "../graph/graph_internal.h"

/* Below this estimated time an op piece runs on its team's master alone:
 * the engine's own solo threshold (HWT_EXEC_SOLO_S, engine/exec/levels.c:
 * a fork-join costs 2-4 us on the 2-core dev box, so splitting pays from
 * ~4 us of work). */
#define SOLO_S 4e-6

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static hwt_graph *clone_rows(const hwt_graph *f, const unsigned char *row, int64_t rows) {
  hwt_graph *g = hwt_graph_create();
  if (!g) return NULL;
  for (int t = 0; t < f->n_tensors; t++) {
    const gr_tensor *x = &f->tensors[t];
    int64_t shape[HWT_GRAPH_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    if (row[t]) shape[0] = rows;
    if (hwt_graph_add_tensor(g, x->name, x->ndim, shape, x->kind) < 0) goto fail;
  }
  for (int o = 0; o < f->n_ops; o++) {
    const gr_op *op = &f->ops[o];
    if (hwt_graph_add_op(g, op->name, op->type, op->n_in, op->io, op->n_out, op->io + op->n_in) < 0)
      goto fail;
    for (int a = 0; a < op->n_attrs; a++) {
      const gr_attr *at = &op->attrs[a];
      int st = at->kind == HWT_ATTR_INTS
                   ? hwt_graph_op_set_ints(g, o, at->key, at->n, at->values)
                   : hwt_graph_op_set_floats(g, o, at->key, at->n, at->values);
      if (st < 0) goto fail;
    }
  }
  return g;
fail:
  hwt_graph_destroy(g);
  return NULL;
}

void hwt_dyn_release_prepared(hwt_dyn *d) {
  if (!d) return;
  size_t nb = (size_t)(d->n_ops > 0 ? d->n_ops : 1) * (size_t)d->n_buckets;
  for (size_t k = 0; d->ctx && k < nb; k++)
    if (d->prepared[k]) {
      int op = (int)(k / (size_t)d->n_buckets);
      if (d->impl[op] && d->impl[op]->release) d->impl[op]->release(&d->ctx[k]);
      d->prepared[k] = 0;
    }
  for (int t = 0; d->teams && t < d->cfg.executors; t++) {
    dyn_team *tm = &d->teams[t];
    HWT_FREE_ALL(tm->arena, tm->ws, tm->base, tm->cur, tm->state, tm->order, tm->slot, tm->step_off,
                 tm->pending, tm->poff, tm->parents, tm->child, tm->cursor, tm->seg, tm->edge_child,
                 tm->seconds);
    memset(tm, 0, sizeof *tm);
  }
  for (int r = 0; d->sel && r < d->fn.n_readouts; r++) {
    free(d->sel[r]);
    free(d->sel_off[r]);
  }
  free(d->sel);
  free(d->sel_off);
  d->sel = d->sel_off = NULL;
  int n_out = d->fn.n_readouts > 0 ? d->fn.readout_offsets[d->fn.n_readouts] : 0;
  for (int k = 0; d->out && k < n_out; k++) free(d->out[k]);
  free(d->out);
  d->out = NULL;
  for (int s = 0; d->states_out && s < d->fn.n_states; s++) free(d->states_out[s]);
  free(d->states_out);
  d->states_out = NULL;
  free(d->eval_count);
  free(d->eval_group);
  d->eval_count = d->eval_group = NULL;
  if (d->used) memset(d->used, 0, nb);
  if (d->calls) memset(d->calls, 0, nb * sizeof(int64_t));
  d->s = NULL;
}

/* Every readout's vertices, by sample: set-numbered vertex ids. */
static int select_vertices(hwt_dyn *d) {
  const hwt_samples *s = d->s;
  const int64_t count = hwt_samples_count(s), nv = hwt_samples_n_vertices(s);
  const int64_t *vo = hwt_samples_vertex_offsets(s), *co = hwt_samples_child_offsets(s);
  const int32_t *ch = hwt_samples_children(s);
  int nr = d->fn.n_readouts;
  d->sel = calloc((size_t)(nr > 0 ? nr : 1), sizeof *d->sel);
  d->sel_off = calloc((size_t)(nr > 0 ? nr : 1), sizeof *d->sel_off);
  if (!d->sel || !d->sel_off) return HWT_ENOMEM;
  unsigned char *child = NULL;
  for (int r = 0; r < nr; r++) {
    int at = d->fn.readout_at[r];
    if (at == HWT_DYN_AT_ROOT && !child) {
      if (!(child = calloc((size_t)(nv > 0 ? nv : 1), 1))) return HWT_ENOMEM;
      for (int64_t i = 0; i < count; i++)
        for (int64_t k = co[vo[i]]; k < co[vo[i + 1]]; k++) child[vo[i] + ch[k]] = 1;
    }
    int64_t n = at == HWT_DYN_AT_EVERY ? nv : at == HWT_DYN_AT_LAST ? count : 0;
    if (at == HWT_DYN_AT_ROOT)
      for (int64_t v = 0; v < nv; v++) n += !child[v];
    d->sel[r] = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    d->sel_off[r] = malloc((size_t)(count + 1) * sizeof(int64_t));
    if (!d->sel[r] || !d->sel_off[r]) {
      free(child);
      return HWT_ENOMEM;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < count; i++) {
      d->sel_off[r][i] = k;
      if (at == HWT_DYN_AT_LAST) {
        d->sel[r][k++] = vo[i + 1] - 1;
        continue;
      }
      for (int64_t v = vo[i]; v < vo[i + 1]; v++)
        if (at == HWT_DYN_AT_EVERY || !child[v]) d->sel[r][k++] = v;
    }
    d->sel_off[r][count] = k;
  }
  free(child);
  return HWT_OK;
}

static int alloc_scratch(hwt_dyn *d, dyn_team *tm) {
  size_t v = (size_t)d->v_cap + 1, e = (size_t)(d->e_cap > 0 ? d->e_cap : 1);
  size_t nb = (size_t)(d->n_ops > 0 ? d->n_ops : 1) * (size_t)d->n_buckets;
  tm->order = malloc(v * sizeof(int64_t));
  tm->slot = malloc(v * sizeof(int64_t));
  tm->step_off = malloc((v + 1) * sizeof(int64_t));
  tm->pending = malloc(v * sizeof(int64_t));
  tm->poff = malloc((v + 1) * sizeof(int64_t));
  tm->cursor = malloc(v * sizeof(int64_t));
  tm->parents = malloc(e * sizeof(int32_t));
  tm->child = malloc(e * sizeof(int32_t));
  tm->seg = malloc(((size_t)d->cfg.chunk + 1) * sizeof(int64_t));
  tm->seconds = calloc(nb, sizeof(double));
  size_t nt = (size_t)(d->n_tensors > 0 ? d->n_tensors : 1);
  tm->base = calloc(nt, sizeof(float *));
  tm->cur = calloc(nt, sizeof(float *));
  tm->state = calloc((size_t)d->fn.n_states, sizeof(float *));
  if (!tm->order || !tm->slot || !tm->step_off || !tm->pending || !tm->poff || !tm->cursor ||
      !tm->parents || !tm->child || !tm->seg || !tm->seconds || !tm->base || !tm->cur ||
      !tm->state)
    return HWT_ENOMEM;
  return HWT_OK;
}

/* Rows each tensor's storage holds (0: none of its own). */
static int64_t rows_of(const hwt_dyn *d, int t) {
  const int64_t chunk = d->cfg.chunk;
  switch (d->space[t]) {
    case SP_INPUT: return d->v_cap + chunk; /* + padding rows of the last piece */
    case SP_VERTEX: return d->update_of[t] >= 0 ? 0 : chunk;
    case SP_EDGE: return d->edge_rows_cap;
    case SP_READOUT: return chunk;
    default: return 0;
  }
}

static int alloc_arena(hwt_dyn *d, dyn_team *tm) {
  const size_t align = HWT_PLAN_ALIGN / sizeof(float);
  size_t total = 0;
  for (int t = 0; t < d->n_tensors; t++)
    total += round_up((size_t)rows_of(d, t) * (size_t)d->width[t], align);
  for (int s = 0; s < d->fn.n_states; s++)
    total += round_up((size_t)(d->v_cap + d->cfg.chunk) * (size_t)d->state_width[s], align);
  tm->arena = aligned_alloc(HWT_PLAN_ALIGN, (total ? total : align) * sizeof(float));
  tm->edge_child = malloc((size_t)(d->edge_rows_cap > 0 ? d->edge_rows_cap : 1) *
                          sizeof(int64_t));
  if (!tm->arena || !tm->edge_child) return HWT_ENOMEM;
  /* zeroed once: padding rows are read before anything writes them */
  memset(tm->arena, 0, (total ? total : align) * sizeof(float));
  float *p = tm->arena;
  for (int t = 0; t < d->n_tensors; t++) {
    size_t n = (size_t)rows_of(d, t) * (size_t)d->width[t];
    tm->base[t] = n ? p : NULL;
    p += round_up(n, align);
  }
  for (int s = 0; s < d->fn.n_states; s++) {
    tm->state[s] = p;
    p += round_up((size_t)(d->v_cap + d->cfg.chunk) * (size_t)d->state_width[s], align);
  }
  return HWT_OK;
}

/* The pointer an op context is prepared with: a param, or team 0's rows. */
static float *prep_ptr(hwt_dyn *d, int t) {
  if (d->space[t] == SP_PARAM) return (float *)d->param[t];
  dyn_team *tm = &d->teams[0];
  if (d->space[t] == SP_VERTEX && d->update_of[t] >= 0) return tm->state[d->update_of[t]];
  return tm->base[t];
}

static int prepare_ctx(hwt_dyn *d, int op, int j) {
  size_t k = (size_t)op * (size_t)d->n_buckets + (size_t)j;
  if (!d->gb[j]) {
    unsigned char *row = calloc((size_t)(d->n_tensors > 0 ? d->n_tensors : 1), 1);
    if (!row) return HWT_ENOMEM;
    for (int t = 0; t < d->n_tensors; t++) row[t] = d->space[t] != SP_PARAM;
    d->gb[j] = clone_rows(d->g, row, (int64_t)1 << j);
    free(row);
    if (!d->gb[j]) {
      hwt_dyn_set_err(d, "out of memory copying the vertex function");
      return HWT_ENOMEM;
    }
  }
  hwt_op_ctx *c = &d->ctx[k];
  memset(c, 0, sizeof *c);
  c->g = d->gb[j];
  c->op = op;
  c->n_in = hwt_graph_op_n_inputs(d->g, op);
  c->n_out = hwt_graph_op_n_outputs(d->g, op);
  const int *in = hwt_graph_op_inputs(d->g, op), *out = hwt_graph_op_outputs(d->g, op);
  for (int i = 0; i < c->n_in; i++) c->in[i] = prep_ptr(d, in[i]);
  for (int i = 0; i < c->n_out; i++) c->out[i] = prep_ptr(d, out[i]);
  c->isa = (hwt_isa)(d->cfg.isa >= 0 ? d->cfg.isa : hwt_isa_select());
  c->max_threads = d->team_size;
  if (!d->shared) d->shared = hwt_op_shared_create(); /* NULL: private copies */
  c->shared = d->shared;
  char why[200] = "";
  int st = d->impl[op]->prepare(c, why, sizeof why);
  if (st < 0) {
    hwt_dyn_set_err(d, "op '%s' (%s) at %d rows: %s", hwt_graph_op_name(d->g, op),
                    hwt_graph_op_type(d->g, op), 1 << j, why[0] ? why : "prepare failed");
    return st;
  }
  d->prepared[k] = 1;
  if (d->nth[k] <= 0 || d->nth[k] > d->team_size) {
    /* the default: the whole team unless the piece is too small to split */
    hwt_plan_options po;
    hwt_plan_options_init(&po);
    double rows = (double)((int64_t)1 << j), est;
    if (d->fn.op_flops && d->fn.op_bytes) {
      double f = d->fn.op_flops[op] * rows / po.flops_per_s;
      double b = d->fn.op_bytes[op] * rows / po.bytes_per_s;
      est = f > b ? f : b;
    } else {
      est = c->flops / po.flops_per_s;
    }
    int want = d->nth[k] > d->team_size ? d->team_size : d->nth[k];
    d->nth[k] = want > 0 ? want : (est < SOLO_S ? 1 : d->team_size);
  }
  size_t ws = round_up(c->ws_floats, 16);
  if (ws > d->ws_stride) d->ws_stride = ws;
  return HWT_OK;
}

int hwt_dyn_prepare(hwt_dyn *d, const hwt_samples *s) {
  if (!d) return HWT_EINVAL;
  if (!s) {
    hwt_dyn_set_err(d, "no samples");
    return HWT_EINVAL;
  }
  hwt_dyn_release_prepared(d);
  int st;
  for (int t = 0; t < d->n_tensors; t++)
    if (d->space[t] == SP_PARAM && !d->param[t]) {
      hwt_dyn_set_err(d, "param '%s' is not bound", hwt_graph_tensor_name(d->g, t));
      return HWT_EINVAL;
    }
  if (d->x_tensor >= 0) {
    int want = d->fn.embedding >= 0 ? HWT_DYN_INPUT_TOKENS : HWT_DYN_INPUT_FEATURES;
    if (hwt_samples_input(s) != want ||
        (want == HWT_DYN_INPUT_FEATURES && hwt_samples_feature_width(s) != d->width[d->x_tensor])) {
      hwt_dyn_set_err(d, "the samples were read for another vertex input (%s expected)",
                      want == HWT_DYN_INPUT_TOKENS ? "tokens" : "features of the input's width");
      return HWT_EINVAL;
    }
    if (want == HWT_DYN_INPUT_TOKENS) {
      const int32_t *tok = hwt_samples_tokens(s);
      int64_t vocab = hwt_graph_tensor_shape(d->g, d->fn.embedding)[0];
      for (int64_t v = 0; v < hwt_samples_n_vertices(s); v++)
        if (tok[v] >= vocab) {
          hwt_dyn_set_err(d, "token %d is outside the embedding's %lld rows", tok[v],
                          (long long)vocab);
          return HWT_EINVAL;
        }
    }
  }
  d->s = s;
  int64_t count = hwt_samples_count(s);
  d->n_batches = (count + d->cfg.batch - 1) / d->cfg.batch;
  d->v_cap = d->e_cap = d->edge_rows_cap = 0;
  const int64_t *co = hwt_samples_child_offsets(s);
  for (int64_t b = 0; b < d->n_batches; b++) {
    int64_t s0, s1, v0, v1;
    hwt_dyn_batch_range(d, b, &s0, &s1, &v0, &v1);
    if (v1 - v0 > d->v_cap) d->v_cap = v1 - v0;
    if (co[v1] - co[v0] > d->e_cap) d->e_cap = co[v1] - co[v0];
  }
  if ((st = select_vertices(d)) < 0) goto oom;
  for (int t = 0; t < d->cfg.executors; t++)
    if ((st = alloc_scratch(d, &d->teams[t])) < 0) goto oom;
  /* the walk: buckets, calls, the most links of a chunk */
  d->groups = d->group_rows = 0;
  for (int64_t b = 0; b < d->n_batches; b++) hwt_dyn_exec_batch(d, 0, b, 1);
  d->groups = d->teams[0].groups;
  d->group_rows = d->teams[0].rows;
  d->teams[0].groups = d->teams[0].rows = 0;
  if (d->edge_rows_cap > 0) d->edge_rows_cap = (int64_t)round_up((size_t)d->edge_rows_cap,
                                                                 (size_t)d->cfg.chunk);
  for (int t = 0; t < d->cfg.executors; t++)
    if ((st = alloc_arena(d, &d->teams[t])) < 0) goto oom;
  d->ws_stride = 0;
  for (int op = 0; op < d->n_ops; op++)
    for (int j = 0; j < d->n_buckets; j++)
      if (d->used[(size_t)op * (size_t)d->n_buckets + (size_t)j] &&
          (st = prepare_ctx(d, op, j)) < 0) {
        hwt_dyn_release_prepared(d);
        return st;
      }
  for (int t = 0; t < d->cfg.executors; t++) {
    size_t n = (size_t)d->team_size * (d->ws_stride > 0 ? d->ws_stride : 16);
    d->teams[t].ws = aligned_alloc(HWT_PLAN_ALIGN, round_up(n * sizeof(float), HWT_PLAN_ALIGN));
    if (!d->teams[t].ws) goto oom;
  }
  int n_out = d->fn.n_readouts > 0 ? d->fn.readout_offsets[d->fn.n_readouts] : 0;
  d->out = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *d->out);
  if (!d->out) goto oom;
  for (int r = 0; r < d->fn.n_readouts; r++)
    for (int k = d->fn.readout_offsets[r]; k < d->fn.readout_offsets[r + 1]; k++) {
      int64_t rows = d->sel_off[r][count];
      size_t n = (size_t)rows * (size_t)d->width[d->fn.readout_outputs[k]];
      if (!(d->out[k] = calloc(n > 0 ? n : 1, sizeof(float)))) goto oom;
    }
  if (d->keep && (st = hwt_dyn_keep_states(d, 1)) < 0) goto oom;
  if (d->record && (st = hwt_dyn_record(d, 1)) < 0) goto oom;
  return HWT_OK;
oom:
  hwt_dyn_release_prepared(d);
  hwt_dyn_set_err(d, "out of memory preparing for %lld samples",
                  (long long)hwt_samples_count(s));
  return HWT_ENOMEM;
}

int hwt_dyn_keep_states(hwt_dyn *d, int keep) {
  if (!d) return HWT_EINVAL;
  d->keep = keep != 0;
  if (!d->keep || !d->s || d->states_out) return HWT_OK;
  int64_t nv = hwt_samples_n_vertices(d->s);
  d->states_out = calloc((size_t)d->fn.n_states, sizeof *d->states_out);
  if (!d->states_out) return HWT_ENOMEM;
  for (int s = 0; s < d->fn.n_states; s++)
    if (!(d->states_out[s] = calloc((size_t)nv * (size_t)d->state_width[s], sizeof(float))))
      return HWT_ENOMEM;
  return HWT_OK;
}

int hwt_dyn_record(hwt_dyn *d, int on) {
  if (!d) return HWT_EINVAL;
  d->record = on != 0;
  if (!d->record || !d->s || d->eval_count) return HWT_OK;
  int64_t nv = hwt_samples_n_vertices(d->s);
  d->eval_count = calloc((size_t)nv, sizeof(int32_t));
  d->eval_group = calloc((size_t)nv, sizeof(int32_t));
  return d->eval_count && d->eval_group ? HWT_OK : HWT_ENOMEM;
}

int64_t hwt_dyn_readout_rows(const hwt_dyn *d, int r) {
  if (!d || !d->s || r < 0 || r >= d->fn.n_readouts) return HWT_EINVAL;
  return d->sel_off[r][hwt_samples_count(d->s)];
}

const float *hwt_dyn_readout(const hwt_dyn *d, int r, int k) {
  if (!d || !d->out || r < 0 || r >= d->fn.n_readouts) return NULL;
  int o = d->fn.readout_offsets[r] + k;
  if (k < 0 || o >= d->fn.readout_offsets[r + 1]) return NULL;
  return d->out[o];
}

const float *hwt_dyn_states(const hwt_dyn *d, int s) {
  if (!d || !d->states_out || s < 0 || s >= d->fn.n_states) return NULL;
  return d->states_out[s];
}

const int32_t *hwt_dyn_eval_count(const hwt_dyn *d) { return d ? d->eval_count : NULL; }
const int32_t *hwt_dyn_eval_group(const hwt_dyn *d) { return d ? d->eval_group : NULL; }
