/* hwt_plan_check_aliasing: an independent, brute-force proof that a plan's
 * buffer sharing is safe. It rebuilds dependencies from the graph's tensors
 * (not the plan's CSR) and reachability by a DFS from every op (not the
 * planner's bitset recurrence), so a bug in either shows up here.
 *
 * A view chain (views.c) is one buffer: its members may share their root's
 * offset, and its lifetime as seen by other tensors runs from the root's
 * producer to the last reader of any member (for ever if one is an output). */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

typedef struct {
  const hwt_graph *g;
  const hwt_plan *p;
  int *pos;             /* recomputed from order */
  int *cons_off, *cons; /* tensor -> consumer ops (duplicates harmless) */
  int *root;            /* tensor -> its view chain's root (itself without reuse) */
  int *ccons_off, *ccons; /* chain root -> consumer ops of any member */
  unsigned char *chain_out; /* chain root: some member is an output */
  uint64_t *desc;       /* n x n bits: desc[u] has v when a path u ->+ v exists */
  int64_t words;
} check_ctx;

static int reaches(const check_ctx *c, int u, int v) {
  return (int)((c->desc[(int64_t)u * c->words + (v >> 6)] >> (v & 63)) & 1u);
}

static int build_consumers(check_ctx *c) {
  const hwt_graph *g = c->g;
  int nt = g->n_tensors;
  c->cons_off = calloc((size_t)nt + 2, sizeof(int));
  if (!c->cons_off) return HWT_ENOMEM;
  int64_t total = 0;
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0; i < g->ops[v].n_in; i++) {
      c->cons_off[g->ops[v].io[i] + 2]++;
      total++;
    }
  if (total > INT_MAX) return HWT_ENOMEM; /* more reads than one array can index */
  c->cons = malloc(sizeof(int) * (size_t)(total ? total : 1));
  if (!c->cons) return HWT_ENOMEM;
  for (int t = 0; t < nt; t++) c->cons_off[t + 2] += c->cons_off[t + 1];
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0; i < g->ops[v].n_in; i++) c->cons[c->cons_off[g->ops[v].io[i] + 1]++] = v;
  /* The same lists per view chain. */
  c->root = malloc(sizeof(int) * (size_t)(nt ? nt : 1));
  c->chain_out = calloc((size_t)(nt ? nt : 1), 1);
  c->ccons_off = calloc((size_t)nt + 2, sizeof(int));
  c->ccons = malloc(sizeof(int) * (size_t)(total ? total : 1));
  if (!c->root || !c->chain_out || !c->ccons_off || !c->ccons) return HWT_ENOMEM;
  if (c->p->reuse == HWT_REUSE_NONE)
    for (int t = 0; t < nt; t++) c->root[t] = t;
  else
    pl_view_roots(g, c->root);
  for (int t = 0; t < nt; t++)
    if (g->tensors[t].kind == HWT_TENSOR_OUTPUT) c->chain_out[c->root[t]] = 1;
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0; i < g->ops[v].n_in; i++) c->ccons_off[c->root[g->ops[v].io[i]] + 2]++;
  for (int t = 0; t < nt; t++) c->ccons_off[t + 2] += c->ccons_off[t + 1];
  for (int v = 0; v < g->n_ops; v++)
    for (int i = 0; i < g->ops[v].n_in; i++)
      c->ccons[c->ccons_off[c->root[g->ops[v].io[i]] + 1]++] = v;
  return HWT_OK;
}

/* Iterative DFS from every op over op -> output tensor -> consumer op. */
static int build_descendants(check_ctx *c) {
  const hwt_graph *g = c->g;
  const int n = g->n_ops;
  /* Without the test, GCC 12 at -O3 reads a negative n into the sizes and
   * stops a -Werror build (alloc-size-larger-than). */
  if (n < 0) return HWT_EINVAL;
  c->words = (n + 63) / 64;
  c->desc = calloc((size_t)(n ? n : 1) * (size_t)(c->words ? c->words : 1), sizeof(uint64_t));
  int *stack = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!c->desc || !stack) {
    free(stack);
    return HWT_ENOMEM;
  }
  for (int s = 0; s < n; s++) {
    uint64_t *row = c->desc + (int64_t)s * c->words;
    int top = 0;
    stack[top++] = s;
    while (top > 0) {
      int u = stack[--top];
      const gr_op *op = &g->ops[u];
      for (int j = 0; j < op->n_out; j++) {
        int t = op->io[op->n_in + j];
        for (int e = c->cons_off[t]; e < c->cons_off[t + 1]; e++) {
          int v = c->cons[e];
          if ((row[v >> 6] >> (v & 63)) & 1u) continue;
          row[v >> 6] |= (uint64_t)1 << (v & 63);
          stack[top++] = v;
        }
      }
    }
  }
  free(stack);
  return HWT_OK;
}

/* Position after which tensor t is never touched again along the order;
 * INT_MAX for outputs, which must outlive the run. */
static int last_touch(const check_ctx *c, int t) {
  t = c->root[t];
  if (c->chain_out[t]) return INT_MAX;
  int last = c->pos[c->g->tensors[t].producer];
  for (int e = c->ccons_off[t]; e < c->ccons_off[t + 1]; e++)
    if (c->pos[c->ccons[e]] > last) last = c->pos[c->ccons[e]];
  return last;
}

/* t is finished before u's producer starts in every dependency-respecting
 * schedule: every op touching t last is a strict ancestor of it. */
static int happens_before(const check_ctx *c, int t, int u) {
  t = c->root[t];
  if (c->chain_out[t]) return 0;
  /* u's bytes are first written by its chain root's producer. */
  int pu = c->g->tensors[c->root[u]].producer;
  if (c->ccons_off[t] == c->ccons_off[t + 1])
    return reaches(c, c->g->tensors[t].producer, pu);
  for (int e = c->ccons_off[t]; e < c->ccons_off[t + 1]; e++)
    if (c->ccons[e] == pu || !reaches(c, c->ccons[e], pu)) return 0;
  return 1;
}

static int may_share(const check_ctx *c, int t, int u) {
  /* A view and its root: the same bytes by design, at the same offset. */
  if (c->root[t] == c->root[u]) return c->p->offset[t] == c->p->offset[u];
  switch (c->p->reuse) {
    case HWT_REUSE_SEQUENTIAL:
      return last_touch(c, t) < c->pos[c->g->tensors[c->root[u]].producer] ||
             last_touch(c, u) < c->pos[c->g->tensors[c->root[t]].producer];
    case HWT_REUSE_PARALLEL_SAFE:
      return happens_before(c, t, u) || happens_before(c, u, t);
    default:
      return 0;
  }
}

static int check_order(check_ctx *c, char *err, size_t errlen) {
  const hwt_graph *g = c->g;
  int n = g->n_ops;
  for (int v = 0; v < n; v++) c->pos[v] = -1;
  for (int i = 0; i < n; i++) {
    int v = c->p->order[i];
    if (v < 0 || v >= n || c->pos[v] >= 0) {
      gr_errorf(err, errlen, "order[%d] = %d is not a permutation of the ops", i, v);
      return HWT_EINVAL;
    }
    c->pos[v] = i;
  }
  for (int v = 0; v < n; v++)
    for (int i = 0; i < g->ops[v].n_in; i++) {
      int u = g->tensors[g->ops[v].io[i]].producer;
      if (u >= 0 && c->pos[u] >= c->pos[v]) {
        gr_errorf(err, errlen, "order runs op \"%s\" before its producer \"%s\"",
                  g->ops[v].name, g->ops[u].name);
        return HWT_EINVAL;
      }
    }
  return HWT_OK;
}

typedef struct {
  int64_t off;
  int t;
} placed;

static int by_offset(const void *a, const void *b) {
  const placed *x = a, *y = b;
  return (x->off > y->off) - (x->off < y->off);
}

static int check_pairs(check_ctx *c, char *err, size_t errlen) {
  const hwt_graph *g = c->g;
  const int64_t *off = c->p->offset;
  int nt = g->n_tensors, k = 0;
  placed *idx = malloc(sizeof(placed) * (size_t)(nt ? nt : 1));
  if (!idx) return HWT_ENOMEM;
  for (int t = 0; t < nt; t++) {
    const gr_tensor *x = &g->tensors[t];
    int inside = x->kind == HWT_TENSOR_ACTIVATION || x->kind == HWT_TENSOR_OUTPUT;
    if (!inside) {
      if (off[t] != -1) {
        gr_errorf(err, errlen, "%s tensor \"%s\" has arena offset %" PRId64,
                  x->kind == HWT_TENSOR_INPUT ? "input" : "param", x->name, off[t]);
        free(idx);
        return HWT_EINVAL;
      }
      continue;
    }
    if (off[t] < 0 || off[t] % HWT_PLAN_ALIGN || off[t] + x->bytes > c->p->arena_bytes) {
      gr_errorf(err, errlen, "tensor \"%s\" at offset %" PRId64 " (%" PRId64 " bytes) is "
                "misaligned or outside the %" PRId64 "-byte arena", x->name, off[t], x->bytes,
                c->p->arena_bytes);
      free(idx);
      return HWT_EINVAL;
    }
    idx[k++] = (placed){off[t], t};
  }
  qsort(idx, (size_t)k, sizeof(placed), by_offset);
  /* With starts sorted, every pair overlapping idx[i] from the right starts
   * before idx[i] ends. */
  for (int i = 0; i < k; i++) {
    int t = idx[i].t;
    int64_t end = off[t] + g->tensors[t].bytes;
    for (int j = i + 1; j < k && idx[j].off < end; j++) {
      int u = idx[j].t;
      if (!may_share(c, t, u)) {
        gr_errorf(err, errlen, "tensors \"%s\" and \"%s\" share bytes at offset %" PRId64
                  " but can be live together", g->tensors[t].name, g->tensors[u].name, off[u]);
        free(idx);
        return HWT_EINVAL;
      }
    }
  }
  free(idx);
  return HWT_OK;
}

int hwt_plan_check_aliasing(const hwt_plan *p, const hwt_graph *g, char *err, size_t errlen) {
  if (!p || !g || p->n_ops != g->n_ops || p->n_tensors != g->n_tensors) {
    gr_errorf(err, errlen, "the plan was not built from this graph");
    return HWT_EINVAL;
  }
  check_ctx c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.p = p;
  c.pos = malloc(sizeof(int) * (size_t)(g->n_ops ? g->n_ops : 1));
  int st = c.pos ? check_order(&c, err, errlen) : HWT_ENOMEM;
  if (st == HWT_OK) st = build_consumers(&c);
  if (st == HWT_OK && p->reuse == HWT_REUSE_PARALLEL_SAFE) st = build_descendants(&c);
  if (st == HWT_OK) st = check_pairs(&c, err, errlen);
  if (st == HWT_ENOMEM) gr_errorf(err, errlen, "out of memory checking the plan");
  free(c.pos);
  free(c.cons_off);
  free(c.cons);
  free(c.root);
  free(c.chain_out);
  free(c.ccons_off);
  free(c.ccons);
  free(c.desc);
  return st;
}
