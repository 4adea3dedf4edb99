/* hwt_plan_build: order, costs, levels, dependency arrays, then the arena. */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "hwtune/free_all.h"

/* Roofline rates for ops that carry work (flops, bytes) but no measured
 * cost. Measured on the reference machine (Xeon, Cascade Lake, 2.5 GHz), one
 * thread: hwt_bench_gemm 256x256x256 AVX-512 reaches 72.8 GFLOPS (FMA peak
 * probe 136), hwt_probe_triad 10.2 GB/s. Only ratios between ops matter to
 * the critical-path priority, so one core's figures serve any team size. */
#define DEFAULT_FLOPS_PER_S 70e9
#define DEFAULT_BYTES_PER_S 10e9

void hwt_plan_options_init(hwt_plan_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->reuse = HWT_REUSE_PARALLEL_SAFE;
  o->flops_per_s = DEFAULT_FLOPS_PER_S;
  o->bytes_per_s = DEFAULT_BYTES_PER_S;
  o->default_cost = 1.0;
}

void hwt_plan_destroy(hwt_plan *p) {
  if (!p) return;
  HWT_FREE_ALL(p->order, p->position, p->pred_count, p->succ_off, p->succ, p->roots, p->cost,
               p->level, p->offset);
  free(p);
}

static double op_cost(const gr_op *op, const hwt_plan_options *o) {
  if (op->has_cost) return op->cost;
  if (op->has_work) {
    double f = op->flops / o->flops_per_s, b = op->bytes / o->bytes_per_s;
    return f > b ? f : b;
  }
  return o->default_cost;
}

static int check_options(hwt_plan_options *o, char *err, size_t errlen) {
  if (o->reuse < HWT_REUSE_NONE || o->reuse > HWT_REUSE_PARALLEL_SAFE) {
    gr_errorf(err, errlen, "unknown reuse policy %d", o->reuse);
    return HWT_EINVAL;
  }
  if (o->reach_max_ops < 0) {
    gr_errorf(err, errlen, "reach_max_ops %d (must be >= 0)", o->reach_max_ops);
    return HWT_EINVAL;
  }
  if (o->flops_per_s == 0) o->flops_per_s = DEFAULT_FLOPS_PER_S;
  if (o->bytes_per_s == 0) o->bytes_per_s = DEFAULT_BYTES_PER_S;
  if (o->default_cost == 0) o->default_cost = 1.0;
  if (!(o->flops_per_s > 0) || !(o->bytes_per_s > 0) || !(o->default_cost > 0) ||
      o->flops_per_s > 1e30 || o->bytes_per_s > 1e30 || o->default_cost > 1e30) {
    gr_errorf(err, errlen, "rates and default cost must be finite and > 0 (got %g flop/s, "
              "%g B/s, %g)", o->flops_per_s, o->bytes_per_s, o->default_cost);
    return HWT_EINVAL;
  }
  return HWT_OK;
}

hwt_plan *hwt_plan_build(const hwt_graph *g, const hwt_plan_options *opts, char *err,
                         size_t errlen) {
  hwt_plan_options o;
  if (opts) o = *opts;
  else hwt_plan_options_init(&o);
  if (check_options(&o, err, errlen) != HWT_OK) return NULL;
  gr_dag d;
  if (gr_validate(g, &d, err, errlen) != HWT_OK) return NULL;
  hwt_plan *p = calloc(1, sizeof *p);
  int n = g->n_ops, nt = g->n_tensors;
  size_t n0 = n ? (size_t)n : 1;
  if (!p) goto nomem;
  p->n_ops = n;
  p->n_tensors = nt;
  p->reuse = o.reuse;
  /* The plan takes over the DAG's order and successor arrays (d keeps views
   * of them); only the predecessor lists are freed after planning. */
  p->order = d.order;
  p->succ_off = d.succ_off;
  p->succ = d.succ;
  p->position = malloc(sizeof(int) * n0);
  p->pred_count = malloc(sizeof(int) * n0);
  p->roots = malloc(sizeof(int) * n0);
  p->cost = malloc(sizeof(double) * n0);
  p->level = malloc(sizeof(double) * n0);
  p->offset = malloc(sizeof(int64_t) * (nt ? (size_t)nt : 1));
  if (!p->position || !p->pred_count || !p->roots || !p->cost || !p->level || !p->offset)
    goto nomem;
  for (int i = 0; i < n; i++) p->position[p->order[i]] = i;
  for (int v = 0; v < n; v++) {
    p->pred_count[v] = d.pred_off[v + 1] - d.pred_off[v];
    if (p->pred_count[v] == 0) p->roots[p->n_roots++] = v;
    p->cost[v] = op_cost(&g->ops[v], &o);
  }
  /* Longest remaining path to the sink, in reverse topological order. */
  for (int i = n - 1; i >= 0; i--) {
    int v = p->order[i];
    double best = 0.0;
    for (int e = p->succ_off[v]; e < p->succ_off[v + 1]; e++)
      if (p->level[p->succ[e]] > best) best = p->level[p->succ[e]];
    p->level[v] = p->cost[v] + best;
  }
  if (pl_arena_assign(g, &d, p, o.reach_max_ops, err, errlen) != HWT_OK) {
    free(d.pred_off);
    free(d.pred);
    hwt_plan_destroy(p);
    return NULL;
  }
  free(d.pred_off);
  free(d.pred);
  return p;
nomem:
  gr_errorf(err, errlen, "out of memory planning %d ops", n);
  if (p) {
    free(d.pred_off);
    free(d.pred);
    hwt_plan_destroy(p);
  } else {
    gr_dag_free(&d);
  }
  return NULL;
}

int hwt_plan_n_ops(const hwt_plan *p) { return p ? p->n_ops : HWT_EINVAL; }
int hwt_plan_n_tensors(const hwt_plan *p) { return p ? p->n_tensors : HWT_EINVAL; }
int hwt_plan_reuse(const hwt_plan *p) { return p ? p->reuse : HWT_EINVAL; }
int hwt_plan_reach_exact(const hwt_plan *p) { return p ? p->reach_exact : HWT_EINVAL; }
const int *hwt_plan_order(const hwt_plan *p) { return p ? p->order : NULL; }
const int *hwt_plan_position(const hwt_plan *p) { return p ? p->position : NULL; }
const double *hwt_plan_cost(const hwt_plan *p) { return p ? p->cost : NULL; }
const double *hwt_plan_level(const hwt_plan *p) { return p ? p->level : NULL; }
const int *hwt_plan_pred_count(const hwt_plan *p) { return p ? p->pred_count : NULL; }
const int *hwt_plan_succ_offsets(const hwt_plan *p) { return p ? p->succ_off : NULL; }
const int *hwt_plan_succ(const hwt_plan *p) { return p ? p->succ : NULL; }
int hwt_plan_n_roots(const hwt_plan *p) { return p ? p->n_roots : HWT_EINVAL; }
const int *hwt_plan_roots(const hwt_plan *p) { return p ? p->roots : NULL; }
const int64_t *hwt_plan_offsets(const hwt_plan *p) { return p ? p->offset : NULL; }
int64_t hwt_plan_arena_bytes(const hwt_plan *p) { return p ? p->arena_bytes : HWT_EINVAL; }
int64_t hwt_plan_arena_bytes_no_reuse(const hwt_plan *p) {
  return p ? p->arena_no_reuse : HWT_EINVAL;
}
int64_t hwt_plan_peak_live_bytes(const hwt_plan *p) { return p ? p->peak_live : HWT_EINVAL; }

int64_t hwt_plan_tensor_offset(const hwt_plan *p, int t) {
  if (!p || t < 0 || t >= p->n_tensors) return HWT_EINVAL;
  return p->offset[t];
}
