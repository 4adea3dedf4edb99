/* Running batches: the team loop, one batch's groups and chunks, gathers
 * and moves, an op over a row count as bucket pieces, and the readouts.
 *
 * A team claims whole batches (an atomic counter), so executors never share
 * a batch and write disjoint rows of the outputs; inside a batch its master
 * walks the groups and forks each op piece onto its team. */
#include <stdlib.h>
#include <string.h>
#include "dyn_internal.h"
#include "hwtune/bench.h"

/* Rounding a piece up to the next bucket when at most a quarter of it is
 * padding: a padded row costs one row of work, while splitting costs
 * another op call (a fork-join, and a GEMM streaming its packed weights
 * again). benchmarks/bench_dynamic.py --pieces measures the two on the
 * bundled models' shapes. */
#define PAD_DIVISOR 4

int hwt_dyn_piece(const hwt_dyn *d, int64_t rem, int64_t *rows) {
  const int top = d->n_buckets - 1;
  if (rem >= ((int64_t)1 << top)) {
    *rows = (int64_t)1 << top;
    return top;
  }
  int j = 0;
  while (((int64_t)1 << j) < rem) j++;
  int64_t b = (int64_t)1 << j;
  if (j > 0 && (b - rem) * PAD_DIVISOR > b) {
    j--;
    b >>= 1;
  }
  *rows = rem < b ? rem : b;
  return j;
}

typedef struct {
  const hwt_op_ctx *ctx;
  const hwt_op_impl *impl;
  float *ws;
  size_t ws_stride;
} piece_task;

static void piece_fn(void *arg, int tid, int nth) {
  const piece_task *t = arg;
  t->impl->run(t->ctx, t->ws + (size_t)tid * t->ws_stride, tid, nth);
}

/* Op `op` over `rows` rows starting at each row tensor's cur pointer. */
static void run_rows(hwt_dyn *d, int team, int op, int64_t rows, int dry) {
  dyn_team *tm = &d->teams[team];
  const int n_in = hwt_graph_op_n_inputs(d->g, op), n_out = hwt_graph_op_n_outputs(d->g, op);
  const int *in = hwt_graph_op_inputs(d->g, op), *out = hwt_graph_op_outputs(d->g, op);
  int64_t r0 = 0;
  while (r0 < rows) {
    int64_t real;
    int j = hwt_dyn_piece(d, rows - r0, &real);
    size_t k = (size_t)op * (size_t)d->n_buckets + (size_t)j;
    if (dry) {
      d->used[k] = 1;
      d->calls[k]++;
      r0 += real;
      continue;
    }
    hwt_op_ctx c = d->ctx[k];
    for (int i = 0; i < n_in; i++)
      if (d->space[in[i]] != SP_PARAM) c.in[i] = tm->cur[in[i]] + r0 * d->width[in[i]];
    for (int i = 0; i < n_out; i++) c.out[i] = tm->cur[out[i]] + r0 * d->width[out[i]];
    piece_task t = {&c, d->impl[op], tm->ws, d->ws_stride};
    const int nth = d->nth[k];
    double t0 = d->profile ? hwt_now() : 0.0;
    if (nth <= 1)
      piece_fn(&t, 0, 1);
    else
      hwt_team_parallel(d->pool, team, piece_fn, &t, nth);
    if (d->profile) tm->seconds[k] += hwt_now() - t0;
    r0 += real;
  }
}

/* The vertex input rows of slots [0, nv): embedding rows or feature rows. */
static void fill_inputs(hwt_dyn *d, dyn_team *tm, int64_t v0, int64_t nv) {
  if (d->x_tensor < 0) return;
  const int w = d->width[d->x_tensor];
  float *x = tm->base[d->x_tensor];
  const int32_t *tok = hwt_samples_tokens(d->s);
  const float *feat = hwt_samples_features(d->s);
  const float *emb = d->fn.embedding >= 0 ? d->param[d->fn.embedding] : NULL;
  for (int64_t i = 0; i < nv; i++) {
    int64_t gv = v0 + tm->order[i];
    float *row = x + i * w;
    if (emb) {
      if (tok[gv] >= 0)
        memcpy(row, emb + (int64_t)tok[gv] * w, (size_t)w * sizeof(float));
      else
        memset(row, 0, (size_t)w * sizeof(float));
    } else {
      memcpy(row, feat + gv * w, (size_t)w * sizeof(float));
    }
  }
}

static void gather(hwt_dyn *d, dyn_team *tm, int t, int64_t n, const int64_t *co_b,
                   int64_t e0, int64_t c0) {
  const hwt_dyn_role *r = &d->fn.roles[t];
  const int w = d->width[t];
  const float *st = tm->state[r->a];
  float *dst = tm->cur[t];
  const size_t bytes = (size_t)w * sizeof(float);
  if (r->kind == HWT_DYN_CHILD_EACH) {
    for (int64_t k = 0; k < tm->seg[n]; k++)
      memcpy(dst + k * w, st + tm->edge_child[k] * w, bytes);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t v = tm->order[c0 + i];
    int64_t lo = co_b[v] - e0, hi = co_b[v + 1] - e0;
    float *row = dst + i * w;
    if (r->kind == HWT_DYN_CHILD) {
      if (lo + r->b < hi)
        memcpy(row, st + tm->slot[tm->child[lo + r->b]] * w, bytes);
      else
        memset(row, 0, bytes);
      continue;
    }
    /* CHILD_SUM */
    if (lo == hi) {
      memset(row, 0, bytes);
      continue;
    }
    memcpy(row, st + tm->slot[tm->child[lo]] * w, bytes);
    for (int64_t k = lo + 1; k < hi; k++) {
      const float *src = st + tm->slot[tm->child[k]] * w;
      for (int c = 0; c < w; c++) row[c] += src[c];
    }
  }
}

static void move(hwt_dyn *d, dyn_team *tm, int t, int64_t n) {
  const hwt_dyn_role *r = &d->fn.roles[t];
  const int w = d->width[t];
  const float *src = tm->cur[r->a];
  float *dst = tm->cur[t];
  const int64_t *seg = tm->seg;
  if (r->kind == HWT_DYN_TO_EDGES) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = seg[i]; k < seg[i + 1]; k++)
        memcpy(dst + k * w, src + i * w, (size_t)w * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; i++) { /* SUM_EDGES */
    float *row = dst + i * w;
    memset(row, 0, (size_t)w * sizeof(float));
    for (int64_t k = seg[i]; k < seg[i + 1]; k++) {
      const float *e = src + k * w;
      for (int c = 0; c < w; c++) row[c] += e[c];
    }
  }
}

/* Rows [c0, c0+n) of the slot order as one batched F. */
static void run_chunk(hwt_dyn *d, int team, int64_t c0, int64_t n, int64_t links,
                      const int64_t *co_b, int64_t e0, int dry) {
  dyn_team *tm = &d->teams[team];
  if (dry) {
    if (links > d->edge_rows_cap) d->edge_rows_cap = links;
    for (int i = 0; i < d->n_nodes; i++) {
      const dyn_node *nd = &d->nodes[i];
      if (!nd->is_op) continue;
      int sp = d->op_space[nd->id];
      if (sp == SP_VERTEX || (sp == SP_INPUT && !d->hoist)) run_rows(d, team, nd->id, n, 1);
      if (sp == SP_EDGE) run_rows(d, team, nd->id, links, 1);
    }
    return;
  }
  for (int t = 0; t < d->n_tensors; t++) {
    int sp = d->space[t];
    if (sp == SP_INPUT) {
      tm->cur[t] = tm->base[t] + c0 * d->width[t];
    } else if (sp == SP_VERTEX && d->update_of[t] >= 0) {
      tm->cur[t] = tm->state[d->update_of[t]] + c0 * d->width[t];
    } else if (sp == SP_VERTEX || sp == SP_EDGE) {
      tm->cur[t] = tm->base[t];
    }
  }
  /* links of the chunk, in row order */
  tm->seg[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = tm->order[c0 + i], lo = co_b[v] - e0, hi = co_b[v + 1] - e0;
    int64_t k = tm->seg[i];
    for (int64_t j = lo; j < hi; j++) tm->edge_child[k++] = tm->slot[tm->child[j]];
    tm->seg[i + 1] = k;
  }
  for (int t = 0; t < d->n_tensors; t++) {
    int kind = d->fn.roles[t].kind;
    if (kind == HWT_DYN_CHILD || kind == HWT_DYN_CHILD_SUM || kind == HWT_DYN_CHILD_EACH)
      gather(d, tm, t, n, co_b, e0, c0);
  }
  for (int i = 0; i < d->n_nodes; i++) {
    const dyn_node *nd = &d->nodes[i];
    if (!nd->is_op) {
      move(d, tm, nd->id, n);
      continue;
    }
    int sp = d->op_space[nd->id];
    if (sp == SP_VERTEX || (sp == SP_INPUT && !d->hoist)) run_rows(d, team, nd->id, n, 0);
    else if (sp == SP_EDGE) run_rows(d, team, nd->id, tm->seg[n], 0);
  }
}

/* Input-space ops once over every vertex of the batch, chunk by chunk. */
static void run_hoisted(hwt_dyn *d, int team, int64_t nv, int dry) {
  dyn_team *tm = &d->teams[team];
  const int64_t chunk = d->cfg.chunk;
  for (int64_t c0 = 0; c0 < nv; c0 += chunk) {
    int64_t n = nv - c0 < chunk ? nv - c0 : chunk;
    if (!dry)
      for (int t = 0; t < d->n_tensors; t++)
        if (d->space[t] == SP_INPUT) tm->cur[t] = tm->base[t] + c0 * d->width[t];
    for (int i = 0; i < d->n_nodes; i++) {
      const dyn_node *nd = &d->nodes[i];
      if (nd->is_op && d->op_space[nd->id] == SP_INPUT) run_rows(d, team, nd->id, n, dry);
    }
  }
}

static void run_readouts(hwt_dyn *d, int team, int64_t s0, int64_t s1, int64_t v0, int dry) {
  dyn_team *tm = &d->teams[team];
  const int64_t chunk = d->cfg.chunk;
  int out_idx = 0;
  for (int r = 0; r < d->fn.n_readouts; r++) {
    const int o0 = d->fn.readout_offsets[r], o1 = d->fn.readout_offsets[r + 1];
    const int64_t first = d->sel_off[r][s0], last = d->sel_off[r][s1];
    for (int64_t p0 = first; p0 < last; p0 += chunk) {
      int64_t n = last - p0 < chunk ? last - p0 : chunk;
      if (!dry) {
        for (int t = 0; t < d->n_tensors; t++) {
          if (d->space[t] != SP_READOUT) continue;
          tm->cur[t] = tm->base[t];
          const hwt_dyn_role *ro = &d->fn.roles[t];
          if (ro->kind != HWT_DYN_STATE || ro->a != r) continue; /* not this readout's */
          const int w = d->width[t];
          const float *st = tm->state[ro->b];
          for (int64_t i = 0; i < n; i++)
            memcpy(tm->cur[t] + i * w, st + tm->slot[d->sel[r][p0 + i] - v0] * w,
                   (size_t)w * sizeof(float));
        }
      }
      for (int i = 0; i < d->n_nodes; i++) {
        const dyn_node *nd = &d->nodes[i];
        if (!nd->is_op || d->op_space[nd->id] != SP_READOUT) continue;
        if (d->op_readout[nd->id] == r) run_rows(d, team, nd->id, n, dry);
      }
      if (dry) continue;
      for (int k = o0; k < o1; k++) {
        int t = d->fn.readout_outputs[k];
        const int w = d->width[t];
        memcpy(d->out[out_idx + (k - o0)] + p0 * w, tm->cur[t], (size_t)(n * w) * sizeof(float));
      }
    }
    out_idx += o1 - o0;
  }
}

int hwt_dyn_exec_batch(hwt_dyn *d, int team, int64_t batch, int dry) {
  dyn_team *tm = &d->teams[team];
  int64_t s0, s1, v0, v1;
  hwt_dyn_batch_range(d, batch, &s0, &s1, &v0, &v1);
  const int64_t nv = v1 - v0;
  const int64_t *co_b = hwt_samples_child_offsets(d->s) + v0;
  const int64_t e0 = co_b[0];
  const int64_t groups = hwt_dyn_schedule(d, tm, batch);
  const int64_t chunk = d->cfg.chunk;
  /* A chunk also stops at this many child links, so per-child rows stay
   * within a few chunks of memory; one vertex with more links still runs
   * alone (its links in several pieces). */
  const int64_t link_budget = 4 * chunk;
  if (!dry) fill_inputs(d, tm, v0, nv);
  if (d->hoist) run_hoisted(d, team, nv, dry);
  for (int64_t g = 0; g < groups; g++) {
    const int64_t a = tm->step_off[g], b = tm->step_off[g + 1];
    int64_t c0 = a;
    while (c0 < b) {
      int64_t n = 0, links = 0;
      while (c0 + n < b && n < chunk) {
        int64_t v = tm->order[c0 + n], deg = co_b[v + 1] - co_b[v];
        if (n > 0 && links + deg > link_budget) break;
        links += deg;
        n++;
      }
      run_chunk(d, team, c0, n, links, co_b, e0, dry);
      if (!dry && d->record)
        for (int64_t i = 0; i < n; i++) {
          int64_t gv = v0 + tm->order[c0 + i];
          d->eval_count[gv]++;
          d->eval_group[gv] = (int32_t)g;
        }
      c0 += n;
    }
  }
  if (d->fn.n_readouts > 0) run_readouts(d, team, s0, s1, v0, dry);
  if (!dry && d->keep)
    for (int s = 0; s < d->fn.n_states; s++) {
      const int w = d->state_width[s];
      for (int64_t v = 0; v < nv; v++)
        memcpy(d->states_out[s] + (v0 + v) * w, tm->state[s] + tm->slot[v] * w,
               (size_t)w * sizeof(float));
    }
  tm->groups += groups;
  tm->rows += nv;
  return HWT_OK;
}

static void team_loop(void *arg, int team) {
  hwt_dyn *d = arg;
  for (;;) {
    int64_t b = atomic_fetch_add_explicit(&d->next_batch, 1, memory_order_relaxed);
    if (b >= d->n_batches) break;
    hwt_dyn_exec_batch(d, team, b, 0);
  }
}

int hwt_dyn_run(hwt_dyn *d) {
  if (!d) return HWT_EINVAL;
  if (!d->s || !d->teams[0].arena) {
    hwt_dyn_set_err(d, "run before prepare (or after a bind: prepare again)");
    return HWT_EINVAL;
  }
  if (d->record) {
    int64_t nv = hwt_samples_n_vertices(d->s);
    memset(d->eval_count, 0, (size_t)nv * sizeof(int32_t));
    for (int64_t v = 0; v < nv; v++) d->eval_group[v] = -1;
  }
  for (int t = 0; t < d->cfg.executors; t++) d->teams[t].groups = d->teams[t].rows = 0;
  atomic_store_explicit(&d->next_batch, 0, memory_order_relaxed);
  int st = hwt_pool_run_teams(d->pool, team_loop, d);
  if (st < 0) {
    hwt_dyn_set_err(d, "the thread pool refused the run");
    return st;
  }
  return HWT_OK;
}
