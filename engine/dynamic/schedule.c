/* One batch's evaluation order: the policies of hwtune/dynamic.h.
 *
 * Output, in the team's scratch: order[slot] = batch vertex, slot[vertex],
 * and step_off[0..G] bounding the G groups (slots step_off[g] ..
 * step_off[g+1]-1 are evaluated together). Slots are the rows of the state
 * tables, so a group's new states are contiguous rows and the ops of F
 * write them in place. Every policy walks O(vertices + links) integers. */
#include "dyn_internal.h"

void hwt_dyn_batch_range(const hwt_dyn *d, int64_t batch, int64_t *s0, int64_t *s1,
                         int64_t *v0, int64_t *v1) {
  int64_t n = hwt_samples_count(d->s), b = d->cfg.batch;
  *s0 = batch * b;
  *s1 = *s0 + b < n ? *s0 + b : n;
  const int64_t *vo = hwt_samples_vertex_offsets(d->s);
  *v0 = vo[*s0];
  *v1 = vo[*s1];
}

/* tm->child: each link's child as a batch vertex; returns the first link. */
static int64_t batch_children(const hwt_dyn *d, dyn_team *tm, int64_t s0, int64_t s1,
                              int64_t v0) {
  const int64_t *vo = hwt_samples_vertex_offsets(d->s);
  const int64_t *co = hwt_samples_child_offsets(d->s);
  const int32_t *ch = hwt_samples_children(d->s);
  const int64_t e0 = co[v0];
  for (int64_t s = s0; s < s1; s++) {
    int32_t base = (int32_t)(vo[s] - v0);
    for (int64_t k = co[vo[s]]; k < co[vo[s + 1]]; k++) tm->child[k - e0] = base + ch[k];
  }
  return e0;
}

/* Cavs: the frontier of vertices whose children are all evaluated. */
static int64_t frontier(dyn_team *tm, const int64_t *co, int64_t e0, int64_t nv) {
  int64_t *pend = tm->pending, *poff = tm->poff, *order = tm->order;
  const int64_t n_links = co[nv] - e0;
  for (int64_t v = 0; v <= nv; v++) poff[v] = 0;
  for (int64_t k = 0; k < n_links; k++) poff[tm->child[k] + 1]++;
  for (int64_t v = 0; v < nv; v++) poff[v + 1] += poff[v];
  for (int64_t v = 0; v < nv; v++) {
    pend[v] = co[v + 1] - co[v];
    for (int64_t k = co[v] - e0; k < co[v + 1] - e0; k++) tm->parents[poff[tm->child[k]]++] = (int32_t)v;
  }
  for (int64_t v = nv; v > 0; v--) poff[v] = poff[v - 1];
  poff[0] = 0;
  int64_t tail = 0, start = 0, groups = 0;
  for (int64_t v = 0; v < nv; v++)
    if (pend[v] == 0) order[tail++] = v;
  tm->step_off[0] = 0;
  while (start < tail) {
    int64_t end = tail;
    for (int64_t i = start; i < end; i++) {
      int64_t v = order[i];
      for (int64_t k = poff[v]; k < poff[v + 1]; k++)
        if (--pend[tm->parents[k]] == 0) order[tail++] = tm->parents[k];
    }
    tm->step_off[++groups] = end;
    start = end;
  }
  return groups;
}

/* Depth of every vertex (0 for a leaf, 1 + the deepest child otherwise) by
 * an iterative post-order walk, as TensorFlow Fold computes it; with
 * post_order the walk's order is kept (children before parents). The
 * explicit stack lives in step_off, which is rebuilt afterwards. */
static void depths(dyn_team *tm, const int64_t *co, int64_t e0, int64_t nv, int64_t *post) {
  int64_t *depth = tm->pending, *cur = tm->cursor, *stack = tm->step_off;
  int64_t n_post = 0;
  for (int64_t v = 0; v < nv; v++) depth[v] = -1;
  for (int64_t r = 0; r < nv; r++) {
    if (depth[r] != -1) continue;
    int64_t sp = 0;
    stack[sp++] = r;
    depth[r] = -2;
    cur[r] = co[r] - e0;
    while (sp > 0) {
      int64_t t = stack[sp - 1];
      if (cur[t] < co[t + 1] - e0) {
        int64_t c = tm->child[cur[t]++];
        if (depth[c] == -1) { /* acyclic (validated): never -2 here */
          depth[c] = -2;
          cur[c] = co[c] - e0;
          stack[sp++] = c;
        }
        continue;
      }
      int64_t dd = 0;
      for (int64_t k = co[t] - e0; k < co[t + 1] - e0; k++)
        if (depth[tm->child[k]] + 1 > dd) dd = depth[tm->child[k]] + 1;
      depth[t] = dd;
      if (post) post[n_post++] = t;
      sp--;
    }
  }
}

/* Fold: groups by depth, a counting sort (vertex order within a depth). */
static int64_t by_depth(dyn_team *tm, const int64_t *co, int64_t e0, int64_t nv) {
  depths(tm, co, e0, nv, NULL);
  int64_t *depth = tm->pending, *pos = tm->cursor, *off = tm->step_off;
  int64_t maxd = 0;
  for (int64_t v = 0; v < nv; v++)
    if (depth[v] > maxd) maxd = depth[v];
  for (int64_t g = 0; g <= maxd + 1; g++) off[g] = 0;
  for (int64_t v = 0; v < nv; v++) off[depth[v] + 1]++;
  for (int64_t g = 0; g <= maxd; g++) off[g + 1] += off[g];
  for (int64_t g = 0; g <= maxd; g++) pos[g] = off[g];
  for (int64_t v = 0; v < nv; v++) tm->order[pos[depth[v]]++] = v;
  return maxd + 1;
}

/* One vertex at a time: the post-order of the walk, sample after sample. */
static int64_t serial(dyn_team *tm, const int64_t *co, int64_t e0, int64_t nv) {
  depths(tm, co, e0, nv, tm->order);
  for (int64_t i = 0; i <= nv; i++) tm->step_off[i] = i;
  return nv;
}

int64_t hwt_dyn_schedule(hwt_dyn *d, dyn_team *tm, int64_t batch) {
  int64_t s0, s1, v0, v1;
  hwt_dyn_batch_range(d, batch, &s0, &s1, &v0, &v1);
  const int64_t nv = v1 - v0;
  const int64_t *co = hwt_samples_child_offsets(d->s) + v0;
  int64_t e0 = batch_children(d, tm, s0, s1, v0);
  int64_t groups;
  switch (d->cfg.policy) {
    case HWT_DYN_BY_DEPTH: groups = by_depth(tm, co, e0, nv); break;
    case HWT_DYN_SERIAL: groups = serial(tm, co, e0, nv); break;
    default: groups = frontier(tm, co, e0, nv); break;
  }
  for (int64_t i = 0; i < nv; i++) tm->slot[tm->order[i]] = i;
  return groups;
}
