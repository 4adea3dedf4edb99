/* The linear family: matmul y[M,N] = op(a) @ op(b) (+ bias[N]) and
 * batch_matmul y[..., M, N] = a[..., M, K] @ b[..., K, N] (batch dimensions
 * broadcast), as src/hwtune/graph/ops/linear.py defines them, on the GEMM
 * kernel's plan. */
#include <stdio.h>
#include <stdlib.h>
#include "hwtune/bgemm.h"
#include "hwtune/gemm.h"
#include "ops_util.h"

/* With M <= 6 (HWT_GEMV_MAX_M) plain run_part takes the GEMV path, which
 * beats the packed micro-kernel path that run_part_packed always takes: the
 * GEMM kernel's sweep on [M,512]x[512,2048], AVX-512, 1 thread measured
 * 12.3 vs 8.8 GFLOPS at M=6 and 17.4 vs 17.9 at M=8 (gemm_internal.h). A
 * constant B is therefore prepacked only from M = 7 on. */
#define PACK_MIN_M 7

typedef struct {
  hwt_gemm_plan plan;
  float *packed_b; /* NULL: B is read (and packed per run) by run_part */
  /* precision "bf16" (issue #43): the bf16 GEMM on B rounded and packed
   * once here (bpacked); NULL for fp32, the default. */
  void *bpacked;
  hwt_bgemm_plan bplan;
} matmul_state;

/* A zeroed state of `bytes` whose first member is the GEMM plan for d at
 * the op's ISA and threads; NULL with *st (and err) saying why not. */
static void *planned_state(const hwt_op_ctx *ctx, const hwt_gemm_desc *d, size_t bytes, int *st,
                           char *err, size_t errlen) {
  hwt_gemm_plan *plan = calloc(1, bytes);
  if (!plan) {
    *st = HWT_ENOMEM;
    return NULL;
  }
  *st = hwt_gemm_plan_make(d, ctx->isa, ctx->max_threads, plan);
  if (*st < 0) {
    free(plan);
    snprintf(err, errlen, "no GEMM plan for M=%d N=%d K=%d (%d)", d->M, d->N, d->K, *st);
    return NULL;
  }
  return plan;
}

static int attr_flag(const hwt_graph *g, int op, const char *key) {
  int64_t v = 0;
  return hwt_graph_op_get_ints(g, op, key, &v, 1) >= 1 && v != 0;
}

/* precision "bf16": the variant the op's ISA gives (AVX512_BF16 where
 * CPUID has it, else the portable C one: hwtune/bgemm.h), B (a param)
 * rounded to bf16 and packed once. */
static int matmul_bf16_prepare(hwt_op_ctx *ctx, matmul_state *s, char *err, size_t errlen) {
  const hwt_gemm_desc *d = &s->plan.d;
  if (hwt_graph_tensor_kind(ctx->g, hwt_graph_op_inputs(ctx->g, ctx->op)[1]) != HWT_TENSOR_PARAM) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "precision bf16 needs b to be a weight (param)");
  }
  hwt_bgemm_desc bd = {d->M, d->N, d->K, d->lda, d->trans_a};
  const int isa = hwt_bgemm_variant_for(ctx->isa);
  int st = isa < 0 ? isa : hwt_bgemm_plan_make(&bd, (hwt_isa)isa, &s->bplan);
  if (st < 0) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "no bf16 GEMM plan");
  }
  const size_t bytes = (s->bplan.packed_b_bytes + 63) / 64 * 64;
  if (!(s->bpacked = aligned_alloc(64, bytes ? bytes : 64))) {
    free(s);
    return HWT_ENOMEM;
  }
  hwt_bgemm_pack_b(&s->bplan, ctx->in[1], d->ldb, d->trans_b, s->bpacked);
  return hwt_ops_prepared(ctx, s, (s->bplan.ws_bytes + 63) / 64 * 16,
                          2.0 * d->M * d->N * d->K);
}

static int matmul_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  const int *in = hwt_graph_op_inputs(g, ctx->op);
  if (ctx->n_in < 2 || ctx->n_in > 3 || ctx->n_out != 1) {
    snprintf(err, errlen, "matmul takes a, b[, bias] and one output");
    return HWT_EINVAL;
  }
  if (hwt_graph_tensor_ndim(g, in[0]) != 2 || hwt_graph_tensor_ndim(g, in[1]) != 2) {
    snprintf(err, errlen, "matmul needs 2-D a and b");
    return HWT_EINVAL;
  }
  const int64_t *a = hwt_graph_tensor_shape(g, in[0]), *b = hwt_graph_tensor_shape(g, in[1]);
  int ta = attr_flag(g, ctx->op, "transpose_a"), tb = attr_flag(g, ctx->op, "transpose_b");
  hwt_gemm_desc d = {0};
  d.M = (int)(ta ? a[1] : a[0]);
  d.K = (int)(ta ? a[0] : a[1]);
  d.N = (int)(tb ? b[0] : b[1]);
  int kb = (int)(tb ? b[1] : b[0]);
  if (kb != d.K) {
    snprintf(err, errlen, "inner dimensions differ: K=%d from a, %d from b", d.K, kb);
    return HWT_EINVAL;
  }
  if (ctx->n_in == 3 && hwt_graph_tensor_bytes(g, in[2]) != (int64_t)d.N * 4) {
    snprintf(err, errlen, "bias must hold N=%d floats", d.N);
    return HWT_EINVAL;
  }
  d.trans_a = ta;
  d.trans_b = tb;
  d.lda = (int)a[1];
  d.ldb = (int)b[1];
  d.ldc = d.N;
  int st;
  matmul_state *s = planned_state(ctx, &d, sizeof *s, &st, err, errlen);
  if (!s) return st;
  if (hwt_ops_str_is(ctx, "precision", "bf16", 0)) return matmul_bf16_prepare(ctx, s, err, errlen);
  if (!hwt_ops_str_is(ctx, "precision", "fp32", 1)) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "precision must be fp32 or bf16");
  }
  if (hwt_graph_tensor_kind(g, in[1]) == HWT_TENSOR_PARAM && d.M >= PACK_MIN_M) {
    /* The packed layout depends on these only (hwtune/gemm.h): matmuls
     * on the same param with them equal share one packed copy. */
    const hwt_gemm_plan *p = &s->plan;
    int key[] = {p->d.trans_b, p->d.ldb, p->d.K, p->d.N, p->kc, p->nc, p->nr, (int)p->isa};
    uint64_t form = hwt_op_form_hash(0, key, sizeof key);
    int fill = 0;
    s->packed_b = hwt_op_shared_acquire(ctx, ctx->in[1], form, p->packed_b_floats, &fill);
    if (!s->packed_b) {
      free(s);
      return HWT_ENOMEM;
    }
    if (fill && (st = hwt_gemm_pack_b(&s->plan, ctx->in[1], s->packed_b)) < 0) {
      hwt_op_shared_release(ctx, s->packed_b);
      free(s);
      snprintf(err, errlen, "packing B failed (%d)", st);
      return st;
    }
  }
  return hwt_ops_prepared(ctx, s, s->plan.ws_floats, 2.0 * d.M * d.N * d.K);
}

static void matmul_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const matmul_state *s = ctx->state;
  const float *bias = ctx->n_in == 3 ? ctx->in[2] : NULL;
  if (s->bpacked) {
    const hwt_bgemm_epi e = {ctx->out[0], s->plan.d.N, bias, 0};
    hwt_bgemm_run_part(&s->bplan, ctx->in[0], s->bpacked, &e, ws, tid, nth);
  } else if (s->packed_b)
    hwt_gemm_run_part_packed(&s->plan, ctx->in[0], s->packed_b, ctx->out[0], bias, ws, tid, nth);
  else
    hwt_gemm_run_part(&s->plan, ctx->in[0], ctx->in[1], ctx->out[0], bias, ws, tid, nth);
}

static void matmul_release(hwt_op_ctx *ctx) {
  matmul_state *s = ctx->state;
  if (s) {
    hwt_op_shared_release(ctx, s->packed_b);
    free(s->bpacked);
  }
  free(s);
  ctx->state = NULL;
}

/* batch_matmul: one GEMM plan for the [M,K] x [K,N] product, run once per
 * batch at per-input offsets (0 stride along a broadcast batch dimension,
 * listed once at prepare). With at least as many batches as threads, each
 * thread runs whole batches (attention: heads x batch small products);
 * otherwise every thread takes its tile share of every batch. */
typedef struct {
  hwt_gemm_plan plan;
  int64_t batches;
  int64_t *off; /* per batch: offset into a, then into b (2 * batches) */
} bmm_state;

static int bmm_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  if (ctx->n_in != 2 || ctx->n_out != 1)
    return snprintf(err, errlen, "batch_matmul takes a, b and one output"), HWT_EINVAL;
  const int *in = hwt_graph_op_inputs(g, ctx->op);
  const int ra = hwt_graph_tensor_ndim(g, in[0]), rb = hwt_graph_tensor_ndim(g, in[1]);
  const int y = hwt_graph_op_outputs(g, ctx->op)[0], ry = hwt_graph_tensor_ndim(g, y);
  const int64_t *a = hwt_graph_tensor_shape(g, in[0]), *b = hwt_graph_tensor_shape(g, in[1]);
  const int64_t *ys = hwt_graph_tensor_shape(g, y);
  if (ra < 2 || rb < 2 || ry != (ra > rb ? ra : rb) || a[ra - 1] != b[rb - 2] ||
      ys[ry - 2] != a[ra - 2] || ys[ry - 1] != b[rb - 1])
    return snprintf(err, errlen, "batch_matmul shapes do not match"), HWT_EINVAL;
  hwt_gemm_desc d = {0};
  d.M = (int)a[ra - 2];
  d.K = (int)a[ra - 1];
  d.N = (int)b[rb - 1];
  d.lda = d.K;
  d.ldb = d.N;
  d.ldc = d.N;
  int st;
  bmm_state *s = planned_state(ctx, &d, sizeof *s, &st, err, errlen);
  if (!s) return st;
  s->batches = 1;
  for (int i = 0; i < ry - 2; i++) s->batches *= ys[i];
  s->off = malloc((size_t)(2 * s->batches) * sizeof *s->off);
  if (!s->off) {
    free(s);
    return HWT_ENOMEM;
  }
  for (int64_t bi = 0; bi < s->batches; bi++) {
    /* batch index -> offsets, from the last batch axis back; an input
     * shorter than the output, or of extent 1 there, does not move */
    int64_t r = bi, oa = 0, ob = 0, sa = (int64_t)d.M * d.K, sb = (int64_t)d.K * d.N;
    for (int k = 1; k <= ry - 2; k++) {
      const int64_t ext = ys[ry - 2 - k], i = r % ext;
      r /= ext;
      const int64_t da = k <= ra - 2 ? a[ra - 2 - k] : 1, db = k <= rb - 2 ? b[rb - 2 - k] : 1;
      if ((da != ext && da != 1) || (db != ext && db != 1)) {
        free(s->off);
        free(s);
        return snprintf(err, errlen, "batch dimensions do not broadcast"), HWT_EINVAL;
      }
      oa += da == 1 ? 0 : i * sa;
      ob += db == 1 ? 0 : i * sb;
      sa *= da;
      sb *= db;
    }
    s->off[2 * bi] = oa;
    s->off[2 * bi + 1] = ob;
  }
  return hwt_ops_prepared(ctx, s, s->plan.ws_floats, 2.0 * (double)s->batches * d.M * d.N * d.K);
}

static void bmm_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const bmm_state *s = ctx->state;
  const int64_t mn = (int64_t)s->plan.d.M * s->plan.d.N;
  int64_t lo = 0, hi = s->batches;
  int part = tid, parts = nth;
  if (s->batches >= nth) {
    lo = s->batches * tid / nth;
    hi = s->batches * (tid + 1) / nth;
    part = 0;
    parts = 1;
  }
  for (int64_t bi = lo; bi < hi; bi++)
    hwt_gemm_run_part(&s->plan, ctx->in[0] + s->off[2 * bi], ctx->in[1] + s->off[2 * bi + 1],
                      ctx->out[0] + bi * mn, NULL, ws, part, parts);
}

static void bmm_release(hwt_op_ctx *ctx) {
  bmm_state *s = ctx->state;
  if (s) free(s->off);
  free(s);
  ctx->state = NULL;
}

static const hwt_op_impl LINEAR[] = {
    {"matmul", matmul_prepare, matmul_run, matmul_release},
    {"batch_matmul", bmm_prepare, bmm_run, bmm_release},
};

HWT_OPS_FAMILY(hwt_ops_linear, LINEAR)
