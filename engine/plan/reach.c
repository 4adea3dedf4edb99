/* Happens-before facts for PARALLEL_SAFE buffer reuse. */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

void pl_reach_free(pl_reach *r) {
  free(r->bits);
  r->bits = NULL;
}

static int64_t row_base(int p, int64_t stride) {
  int64_t base = (int64_t)(p >> 6) - stride + 1;
  return base > 0 ? base : 0;
}

int pl_reach_build(const gr_dag *d, const int *position, int64_t stride, pl_reach *r) {
  int n = d->n;
  r->stride = stride;
  r->bits = calloc((size_t)(n ? n : 1) * (size_t)stride, sizeof(uint64_t));
  if (!r->bits) return HWT_ENOMEM;
  /* In topological order every predecessor's row is final before it is
   * merged: anc(v) = union over preds u of (anc(u) + u), clipped to v's
   * window (which starts at or after u's, as u comes earlier). */
  for (int p = 0; p < n; p++) {
    int v = d->order[p];
    int64_t base = row_base(p, stride);
    uint64_t *row = r->bits + (int64_t)p * stride;
    for (int e = d->pred_off[v]; e < d->pred_off[v + 1]; e++) {
      int q = position[d->pred[e]];
      int64_t qbase = row_base(q, stride), wq = q >> 6;
      if (wq < base) continue; /* the whole of u's row is outside v's window */
      const uint64_t *src = r->bits + (int64_t)q * stride;
      for (int64_t w = base; w <= wq; w++) row[w - base] |= src[w - qbase];
      row[wq - base] |= (uint64_t)1 << (q & 63);
    }
  }
  return HWT_OK;
}

int pl_reach_all_desc(const pl_reach *r, int n, int *first_all_desc) {
  int64_t words = ((int64_t)n + 63) / 64;
  uint64_t *unset = malloc(sizeof(uint64_t) * (size_t)(words ? words : 1));
  if (!unset) return HWT_ENOMEM;
  for (int64_t w = 0; w < words; w++) unset[w] = ~(uint64_t)0;
  for (int p = 0; p < n; p++) first_all_desc[p] = p + 1;
  /* Walking q downward, the first q that is not (known to be) a descendant
   * of d is the last such position: first_all_desc[d] = q + 1. Positions
   * left of q's window are unknown, hence "not a descendant" (safe); they
   * are all settled at the first q, as windows only move left. */
  int64_t settled = 0;
  for (int q = n - 1; q >= 0; q--) {
    int64_t base = row_base(q, r->stride), wq = q >> 6;
    for (int64_t w = settled; w < base; w++) {
      for (uint64_t m = unset[w]; m; m &= m - 1) first_all_desc[w * 64 + __builtin_ctzll(m)] = q + 1;
      unset[w] = 0;
    }
    if (base > settled) settled = base;
    const uint64_t *row = r->bits + (int64_t)q * r->stride;
    for (int64_t w = base; w <= wq; w++) {
      uint64_t cand = unset[w] & ~row[w - base];
      if (w == wq) cand &= ((uint64_t)1 << (q & 63)) - 1; /* only d < q */
      for (uint64_t m = cand; m; m &= m - 1) first_all_desc[w * 64 + __builtin_ctzll(m)] = q + 1;
      unset[w] &= ~cand;
    }
  }
  free(unset);
  return HWT_OK;
}

/* One step of pl_sync_points' sweep: v's neighbours (adj_off/adj: its
 * predecessors going forward, its successors going backward) stop being
 * open ends, v becomes one; returns the new count of open ends. */
static int sweep_step(const int *adj_off, const int *adj, int v, char *open, int n_open) {
  for (int e = adj_off[v]; e < adj_off[v + 1]; e++)
    if (open[adj[e]]) {
      open[adj[e]] = 0;
      n_open--;
    }
  open[v] = 1;
  return n_open + 1;
}

int pl_sync_points(const gr_dag *d, int *sync_before) {
  int n = d->n;
  /* An op is the only sink of the ops before it (plus itself) exactly when
   * all of them are its ancestors: a path from an earlier op can only pass
   * through earlier ops. Count the prefix's sinks going forward, and the
   * suffix's sources going backward. */
  size_t nz = n > 0 ? (size_t)n : 1;
  char *open = calloc(nz, 1);
  char *in = calloc(nz, 1);
  if (!open || !in) {
    free(open);
    free(in);
    return HWT_ENOMEM;
  }
  int sinks = 0;
  for (int p = 0; p < n; p++) {
    sinks = sweep_step(d->pred_off, d->pred, d->order[p], open, sinks);
    in[p] = sinks == 1;
  }
  memset(open, 0, nz);
  int sources = 0;
  for (int p = n - 1; p >= 0; p--) {
    sources = sweep_step(d->succ_off, d->succ, d->order[p], open, sources);
    in[p] = in[p] && sources == 1;
  }
  int last = -1;
  for (int p = 0; p < n; p++) {
    if (in[p]) last = p;
    sync_before[p] = last;
  }
  free(open);
  free(in);
  return HWT_OK;
}
