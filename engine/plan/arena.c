/* Activation arena: offsets for every produced tensor, reusing the bytes of
 * tensors that are dead under the chosen policy.
 *
 * Tensors are placed in birth order (position of their producer in the plan
 * order, then id), each at the lowest aligned offset that overlaps no tensor
 * it may be live with (first fit). The candidates are kept in an "active"
 * list sorted by offset; a tensor leaves it once it is dead for every later
 * birth (SEQUENTIAL: its last use is behind; PARALLEL_SAFE: every op from
 * some position on descends from all its last readers, or a sync op that
 * every later op depends on follows them), or once a later tensor covering
 * its bytes shadows it.
 *
 * With reuse (SEQUENTIAL or PARALLEL_SAFE) a view chain (views.c) is one
 * item: its root is placed with the chain's readers and outputs, and every
 * member gets the root's offset. NONE keeps one buffer per tensor. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/* Exact reachability up to 20,000 ops: n rows of n bits = 50 MB, built in
 * ~edges * n/64 word ORs (well under a second). Bigger graphs get the same
 * bit budget spread over all ops as a window of recent positions per op
 * (200,000 ops: ~2,000 positions each); 10x more ops exact would need 5 GB
 * on this 24 GiB machine shared by several users. */
#define REACH_MAX_OPS_DEFAULT 20000

typedef struct {
  const hwt_graph *g;
  const int *position;
  int *root;            /* per tensor: its view chain's root (itself when none) */
  int *birth, *death;   /* per tensor; death INT_MAX: never (outputs) */
  int *retire;          /* per tensor: dead for every birth at or after it */
  int *cons_off, *cons; /* per tensor: distinct consumer ops (CSR) */
  pl_reach reach;
  int use_reach, exact;
} arena_ctx;

/* qsort_r is a GNU extension; sort (birth, id) pairs packed into 64 bits
 * instead so plain qsort suffices. */
static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static int in_arena(const gr_tensor *t) {
  return t->kind == HWT_TENSOR_ACTIVATION || t->kind == HWT_TENSOR_OUTPUT;
}

/* Op v's next input from *i on, as its view chain's root, each root once
 * per op (mark as in gr_next_input); -1 when none is left. */
static int next_root_input(const arena_ctx *c, int v, int *i, int *mark) {
  const gr_op *op = &c->g->ops[v];
  while (*i < op->n_in) {
    int r = c->root[op->io[(*i)++]];
    if (mark[r] == v) continue;
    mark[r] = v;
    return r;
  }
  return -1;
}

static int build_liveness(arena_ctx *c, int views) {
  const hwt_graph *g = c->g;
  int nt = g->n_tensors;
  size_t nt1 = (size_t)nt + 1;
  c->root = malloc(sizeof(int) * (nt ? (size_t)nt : 1));
  c->birth = malloc(sizeof(int) * (nt ? (size_t)nt : 1));
  c->death = malloc(sizeof(int) * (nt ? (size_t)nt : 1));
  c->cons_off = calloc(nt1 + 1, sizeof(int));
  int *mark = malloc(sizeof(int) * (nt ? (size_t)nt : 1));
  if (!c->root || !c->birth || !c->death || !c->cons_off || !mark) {
    free(mark);
    return HWT_ENOMEM;
  }
  if (views)
    pl_view_roots(g, c->root);
  else
    for (int t = 0; t < nt; t++) c->root[t] = t;
  /* Distinct consumers per chain root: an op reading a tensor twice, or two
   * views of one buffer, counts once. */
  for (int t = 0; t < nt; t++) mark[t] = -1;
  int64_t total = 0;
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0, t; (t = next_root_input(c, v, &i, mark)) >= 0;) {
      c->cons_off[t + 2]++;
      total++;
    }
  if (total > INT_MAX) {
    free(mark);
    return HWT_EINVAL;
  }
  c->cons = malloc(sizeof(int) * (size_t)(total ? total : 1));
  if (!c->cons) {
    free(mark);
    return HWT_ENOMEM;
  }
  for (int t = 0; t < nt; t++) c->cons_off[t + 2] += c->cons_off[t + 1];
  for (int t = 0; t < nt; t++) mark[t] = -1;
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0, t; (t = next_root_input(c, v, &i, mark)) >= 0;)
      c->cons[c->cons_off[t + 1]++] = v;
  for (int t = 0; t < nt; t++) mark[t] = 0;
  /* A chain holding an output must survive the run. */
  for (int t = 0; t < nt; t++)
    if (g->tensors[t].kind == HWT_TENSOR_OUTPUT) mark[c->root[t]] = 1;
  for (int t = 0; t < nt; t++) {
    const gr_tensor *x = &g->tensors[t];
    if (!in_arena(x) || c->root[t] != t) {
      c->birth[t] = c->death[t] = -1;
      continue;
    }
    int b = c->position[x->producer], dd = b;
    for (int e = c->cons_off[t]; e < c->cons_off[t + 1]; e++)
      if (c->position[c->cons[e]] > dd) dd = c->position[c->cons[e]];
    c->birth[t] = b;
    c->death[t] = mark[t] ? INT_MAX : dd;
  }
  free(mark);
  return HWT_OK;
}

/* Exact PARALLEL_SAFE test: T is dead before the op at position b starts in
 * every valid schedule iff each op that touches T last (its consumers, or
 * its producer when it has none) is a strict ancestor of that op. */
static int dead_before(const arena_ctx *c, int t, int b) {
  if (c->death[t] >= b) return 0; /* ancestors come earlier in any topo order */
  int lo = c->cons_off[t], hi = c->cons_off[t + 1];
  if (lo == hi) return pl_reach_before(&c->reach, c->birth[t], b);
  for (int e = lo; e < hi; e++)
    if (!pl_reach_before(&c->reach, c->position[c->cons[e]], b)) return 0;
  return 1;
}

/* Without retirement the active list keeps every dead tensor and the scan
 * for a gap grows with the whole graph (measured: a 20,000-op random graph
 * with skip edges planned in 3.3 s without it, 1.7 s with it). */
static int retirements(arena_ctx *c, int n_ops) {
  int *all_desc = malloc(sizeof(int) * (size_t)(n_ops ? n_ops : 1));
  c->retire = malloc(sizeof(int) * (size_t)(c->g->n_tensors ? c->g->n_tensors : 1));
  if (!all_desc || !c->retire || pl_reach_all_desc(&c->reach, n_ops, all_desc) != HWT_OK) {
    free(all_desc);
    return HWT_ENOMEM;
  }
  for (int t = 0; t < c->g->n_tensors; t++) {
    if (c->birth[t] < 0 || c->death[t] == INT_MAX) {
      c->retire[t] = INT_MAX;
      continue;
    }
    int lo = c->cons_off[t], hi = c->cons_off[t + 1];
    int r = lo == hi ? all_desc[c->birth[t]] : 0;
    for (int e = lo; e < hi; e++) {
      int f = all_desc[c->position[c->cons[e]]];
      if (f > r) r = f;
    }
    c->retire[t] = r;
  }
  free(all_desc);
  return HWT_OK;
}

/* Peak of the aligned bytes live at one position of the order. */
static int64_t peak_live(const arena_ctx *c, int n_ops) {
  int64_t *delta = calloc((size_t)n_ops + 1, sizeof(int64_t));
  if (!delta) return -1;
  const hwt_graph *g = c->g;
  for (int t = 0; t < g->n_tensors; t++) {
    if (c->birth[t] < 0) continue;
    int64_t sz = pl_align(g->tensors[t].bytes);
    delta[c->birth[t]] += sz;
    if (c->death[t] != INT_MAX) delta[c->death[t] + 1] -= sz;
  }
  int64_t live = 0, peak = 0;
  for (int p = 0; p < n_ops; p++) {
    live += delta[p];
    if (live > peak) peak = live;
  }
  free(delta);
  return peak;
}

static int place(arena_ctx *c, hwt_plan *p, const int *items, int n_items,
                 const int *sync_before) {
  const hwt_graph *g = c->g;
  int64_t *off = p->offset;
  int *active = malloc(sizeof(int) * (size_t)(n_items ? n_items : 1));
  if (!active) return HWT_ENOMEM;
  int n_active = 0;
  int64_t arena = 0;
  for (int k = 0; k < n_items; k++) {
    int u = items[k], b = c->birth[u];
    int64_t size = pl_align(g->tensors[u].bytes);
    int retire_before = p->reuse == HWT_REUSE_SEQUENTIAL ? b : sync_before[b];
    int keep = 0;
    for (int i = 0; i < n_active; i++) {
      int t = active[i];
      if (c->death[t] >= retire_before && !(c->retire && c->retire[t] <= b)) active[keep++] = t;
    }
    n_active = keep;
    /* Lowest gap between the offset-sorted conflicting intervals; they may
     * overlap each other (tensors that were mutually dead), hence the max. */
    int64_t cur = 0;
    for (int i = 0; i < n_active; i++) {
      int t = active[i];
      if (c->use_reach && dead_before(c, t, b)) continue;
      if (off[t] >= cur + size) break;
      int64_t end = off[t] + pl_align(g->tensors[t].bytes);
      if (end > cur) cur = end;
    }
    off[u] = cur;
    if (cur + size > arena) arena = cur + size;
    /* A dead tensor lying wholly inside U's bytes is shadowed by U: any later
     * birth that U is dead for, T is dead for too (T's last readers precede
     * U's producer, which precedes U's last readers), so dropping T is safe
     * and, with exact reachability, changes no placement. */
    if (c->use_reach) {
      keep = 0;
      for (int i = 0; i < n_active; i++) {
        int t = active[i];
        int inside = off[t] >= cur && off[t] + pl_align(g->tensors[t].bytes) <= cur + size;
        if (!(inside && dead_before(c, t, b))) active[keep++] = t;
      }
      n_active = keep;
    }
    int at = n_active;
    while (at > 0 && off[active[at - 1]] > cur) at--;
    memmove(active + at + 1, active + at, sizeof(int) * (size_t)(n_active - at));
    active[at] = u;
    n_active++;
  }
  p->arena_bytes = arena;
  free(active);
  return HWT_OK;
}

int pl_arena_assign(const hwt_graph *g, const gr_dag *d, hwt_plan *p, int reach_max_ops,
                    char *err, size_t errlen) {
  arena_ctx c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.position = p->position;
  int nt = g->n_tensors, st;
  uint64_t *keys = NULL;
  int *items = NULL, *sync_before = NULL;
  st = build_liveness(&c, p->reuse != HWT_REUSE_NONE);
  if (st != HWT_OK) goto out;
  int n_items = 0;
  keys = malloc(sizeof(uint64_t) * (nt ? (size_t)nt : 1));
  items = malloc(sizeof(int) * (nt ? (size_t)nt : 1));
  sync_before = malloc(sizeof(int) * (size_t)(d->n ? d->n : 1));
  if (!keys || !items || !sync_before) {
    st = HWT_ENOMEM;
    goto out;
  }
  for (int t = 0; t < nt; t++) {
    p->offset[t] = -1;
    if (c.birth[t] >= 0) keys[n_items++] = ((uint64_t)c.birth[t] << 32) | (uint32_t)t;
  }
  qsort(keys, (size_t)n_items, sizeof *keys, cmp_u64);
  int64_t total = 0;
  for (int k = 0; k < n_items; k++) {
    items[k] = (int)(keys[k] & 0xffffffffu);
    total += pl_align(g->tensors[items[k]].bytes);
  }
  p->arena_no_reuse = total;
  p->peak_live = peak_live(&c, d->n);
  if (p->peak_live < 0) {
    st = HWT_ENOMEM;
    goto out;
  }
  p->reach_exact = 1;
  if (p->reuse == HWT_REUSE_NONE) {
    int64_t cur = 0;
    for (int k = 0; k < n_items; k++) {
      p->offset[items[k]] = cur;
      cur += pl_align(g->tensors[items[k]].bytes);
    }
    p->arena_bytes = cur;
    st = HWT_OK;
    goto views;
  }
  if (p->reuse == HWT_REUSE_PARALLEL_SAFE) {
    st = pl_sync_points(d, sync_before);
    if (st != HWT_OK) goto out;
    int64_t limit = reach_max_ops > 0 ? reach_max_ops : REACH_MAX_OPS_DEFAULT;
    int64_t full = (d->n + 63) / 64, stride = full;
    if (d->n > limit) {
      stride = limit * ((limit + 63) / 64) / d->n;
      if (stride > full) stride = full;
    }
    /* No budget or no memory is not fatal: the sync-point rule alone is
     * still safe, it only reuses less. */
    c.use_reach = stride > 0 && pl_reach_build(d, p->position, stride, &c.reach) == HWT_OK;
    c.exact = c.use_reach && stride == full;
    if (c.use_reach && (st = retirements(&c, d->n)) != HWT_OK) goto out;
    p->reach_exact = c.exact;
  }
  st = place(&c, p, items, n_items, sync_before);
views:
  if (st == HWT_OK)
    for (int t = 0; t < nt; t++) p->offset[t] = p->offset[c.root[t]];
out:
  if (st == HWT_ENOMEM) gr_errorf(err, errlen, "out of memory planning the arena");
  else if (st != HWT_OK) gr_errorf(err, errlen, "more than %d tensor reads", INT_MAX);
  pl_reach_free(&c.reach);
  free(c.root);
  free(c.birth);
  free(c.death);
  free(c.retire);
  free(c.cons_off);
  free(c.cons);
  free(keys);
  free(items);
  free(sync_before);
  return st;
}
