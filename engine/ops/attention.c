/* attention op family: y = softmax(q . kt * scale + mask) . v over the last
 * axis (src/hwtune/graph/ops/attention.py). q [L, S, D], kt [L, D, T], v
 * [L, T, E] (L the leading dims flattened; they match), the mask
 * broadcasting to [..., S, T].
 *
 * Work is blocks of up to ATT_ROWS query rows of one head, shared among
 * the threads: per block, scores [rows, T] = q . kt with the GEMM kernels
 * (one thread's share, ws), then scale, mask and softmax row by row in
 * place (the kernel library's SIMD exp, 1.2e-7 relative, the sum in
 * double), then y [rows, E] = p . v with the GEMM kernels again. The scores
 * stay in the thread's workspace instead of passing four times through
 * the arena. */
#include <math.h>
#include <stdlib.h>
#include "hwtune/eltwise.h"
#include "hwtune/gemm.h"
#include "ops_util.h"

/* Query rows per block: 64 rows of T scores are 64 KB at T = 256 and stay
 * in a Zen 4 core's 1 MB L2 up to T = 4096 between the two products; BERT
 * at seq 128 gives 2 blocks per head, 24 for 12 heads, enough to share
 * among the threads. */
#define ATT_ROWS 64

/* Independent partial maxima and sums per softmax row: attention's own
 * code (scale, mask, max, sum, normalise) took 3.2% of the int8 BERT-base's
 * samples against 35% in the VNNI micro-kernel (perf, 1 thread, under
 * load), most of it in the two reductions' dependency chains. */
#define ATT_LANES 8

typedef struct {
  int64_t lead, s, d, t, e, blocks_per_head;
  float scale;
  int has_mask, rank;                    /* rank of the scores [..., S, T] */
  int64_t shape[HWT_GRAPH_MAX_DIMS];     /* the scores' shape */
  int64_t mstride[HWT_GRAPH_MAX_DIMS];   /* mask strides over it; 0 = broadcast */
  hwt_eltwise_desc exp;                  /* exp over one row of T scores */
  hwt_gemm_plan qk[2], pv[2];            /* full blocks, then the last (shorter) one */
  size_t gemm_ws;                        /* floats after the scores in ws */
} att_state;

static int plans(att_state *st, hwt_isa isa, int rows, int k, char *err, size_t errlen,
                 const hwt_op_ctx *ctx) {
  const hwt_gemm_desc qk = {.M = rows, .N = (int)st->t, .K = (int)st->d, .lda = (int)st->d,
                            .ldb = (int)st->t, .ldc = (int)st->t};
  const hwt_gemm_desc pv = {.M = rows, .N = (int)st->e, .K = (int)st->t, .lda = (int)st->t,
                            .ldb = (int)st->e, .ldc = (int)st->e};
  if (hwt_gemm_plan_make(&qk, isa, 1, &st->qk[k]) != HWT_OK ||
      hwt_gemm_plan_make(&pv, isa, 1, &st->pv[k]) != HWT_OK)
    return hwt_ops_fail(err, errlen, ctx, "no GEMM plan for the attention products");
  if (st->qk[k].ws_floats > st->gemm_ws) st->gemm_ws = st->qk[k].ws_floats;
  if (st->pv[k].ws_floats > st->gemm_ws) st->gemm_ws = st->pv[k].ws_floats;
  return HWT_OK;
}

static int att_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in < 3 || ctx->n_in > 4 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "attention takes q, kt, v and an optional mask");
  int rq, rk, rv;
  const int64_t *q = hwt_ops_in_shape(ctx, 0, &rq), *k = hwt_ops_in_shape(ctx, 1, &rk),
                *v = hwt_ops_in_shape(ctx, 2, &rv);
  if (rq < 2 || rk != rq || rv != rq)
    return hwt_ops_fail(err, errlen, ctx, "q, kt and v must have one rank of at least 2");
  att_state st = {0};
  st.rank = rq;
  st.lead = hwt_ops_prod(q, 0, rq - 2);
  st.s = q[rq - 2];
  st.d = q[rq - 1];
  st.t = k[rq - 1];
  st.e = v[rq - 1];
  for (int i = 0; i < rq - 2; i++)
    if (k[i] != q[i] || v[i] != q[i])
      return hwt_ops_fail(err, errlen, ctx, "leading dims of q, kt and v differ");
  if (k[rq - 2] != st.d || v[rq - 2] != st.t)
    return hwt_ops_fail(err, errlen, ctx, "inner dimensions differ");
  if (st.s > INT32_MAX || st.t > INT32_MAX || st.d > INT32_MAX || st.e > INT32_MAX)
    return hwt_ops_fail(err, errlen, ctx, "dimensions beyond the GEMM's int range");
  for (int i = 0; i < rq; i++) st.shape[i] = i == rq - 1 ? st.t : q[i];
  st.has_mask = ctx->n_in == 4;
  if (st.has_mask) {
    int rm;
    const int64_t *m = hwt_ops_in_shape(ctx, 3, &rm);
    if (rm > rq) return hwt_ops_fail(err, errlen, ctx, "mask rank above the scores'");
    int64_t step = 1;
    for (int i = rq - 1; i >= 0; i--) {
      const int mi = i - (rq - rm);
      const int64_t dim = mi >= 0 ? m[mi] : 1;
      if (dim != st.shape[i] && dim != 1)
        return hwt_ops_fail(err, errlen, ctx, "mask does not broadcast to the scores");
      st.mstride[i] = dim == 1 ? 0 : step;
      step *= dim;
    }
  }
  st.scale = (float)hwt_ops_float(ctx, "scale", 1.0);
  hwt_eltwise_desc_init(&st.exp, HWT_EW_EXP, ctx->isa, (size_t)st.t);
  if (hwt_eltwise_check(&st.exp) != HWT_OK) st.exp.isa = HWT_ISA_GENERIC;
  const int full = (int)(st.s < ATT_ROWS ? st.s : ATT_ROWS);
  const int last = (int)(st.s % full ? st.s % full : full);
  st.blocks_per_head = (st.s + full - 1) / full;
  int rc = plans(&st, ctx->isa, full, 0, err, errlen, ctx);
  if (rc == HWT_OK) rc = plans(&st, ctx->isa, last, 1, err, errlen, ctx);
  if (rc != HWT_OK) return rc;
  /* the scores block, rounded up to whole 64-byte lines for the GEMM's ws */
  const size_t scores = ((size_t)full * (size_t)st.t + 15) / 16 * 16;
  const double rows = (double)(st.lead * st.s);
  return hwt_ops_keep(ctx, &st, sizeof st, scores + st.gemm_ws,
                      rows * (double)st.t * (double)(2 * st.d + 2 * st.e + 4));
}

/* scale, mask and softmax of one row of scores, in place. */
static void softmax_row(const att_state *s, const float *m, int64_t ms, float *sc) {
  const int64_t T = s->t;
  for (int64_t t = 0; t < T; t++) sc[t] *= s->scale;
  if (m)
    for (int64_t t = 0; t < T; t++) sc[t] += m[t * ms];
  /* the max and the sum over ATT_LANES independent lanes: one running
     value is a dependent compare or double add per score, which GCC
     keeps in order (neither loop vectorised) */
  float mx = sc[0], ml[ATT_LANES];
  int64_t t = 0;
  if (T >= ATT_LANES) {
    for (int u = 0; u < ATT_LANES; u++) ml[u] = sc[u];
    for (t = ATT_LANES; t + ATT_LANES <= T; t += ATT_LANES)
      for (int u = 0; u < ATT_LANES; u++) ml[u] = sc[t + u] > ml[u] ? sc[t + u] : ml[u];
    for (int u = 0; u < ATT_LANES; u++) mx = ml[u] > mx ? ml[u] : mx;
  }
  for (; t < T; t++) mx = sc[t] > mx ? sc[t] : mx;
  for (t = 0; t < T; t++) sc[t] -= mx;
  hwt_eltwise_run_part(&s->exp, sc, NULL, NULL, sc, 0, 1);
  double sum = 0.0, sl[ATT_LANES] = {0};
  for (t = 0; t + ATT_LANES <= T; t += ATT_LANES)
    for (int u = 0; u < ATT_LANES; u++) sl[u] += sc[t + u];
  for (; t < T; t++) sum += sc[t];
  for (int u = 0; u < ATT_LANES; u++) sum += sl[u];
  const float inv = (float)(1.0 / sum);
  for (t = 0; t < T; t++) sc[t] *= inv;
}

static void att_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const att_state *s = ctx->state;
  const int64_t T = s->t, D = s->d, E = s->e, full = s->qk[0].d.M;
  int64_t lo, hi;
  hwt_ops_rows(s->lead * s->blocks_per_head, tid, nth, &lo, &hi);
  float *sc = ws, *gws = ws + ((size_t)full * (size_t)T + 15) / 16 * 16;
  for (int64_t b = lo; b < hi; b++) {
    const int64_t l = b / s->blocks_per_head, row0 = (b % s->blocks_per_head) * full;
    const int k = row0 + full > s->s; /* the shorter last block */
    const int64_t rows = k ? s->qk[1].d.M : full;
    const float *q = ctx->in[0] + (l * s->s + row0) * D, *kt = ctx->in[1] + l * D * T,
                *v = ctx->in[2] + l * T * E;
    hwt_gemm_run_part(&s->qk[k], q, kt, sc, NULL, gws, 0, 1);
    for (int64_t r = 0; r < rows; r++) {
      const float *m = NULL;
      if (s->has_mask) {
        int64_t off = 0, x = l * s->s + row0 + r; /* over the scores' [..., S] */
        for (int i = s->rank - 2; i >= 0; i--) {
          off += (x % s->shape[i]) * s->mstride[i];
          x /= s->shape[i];
        }
        m = ctx->in[3] + off;
      }
      softmax_row(s, m, s->has_mask ? s->mstride[s->rank - 1] : 0, sc + r * T);
    }
    hwt_gemm_run_part(&s->pv[k], sc, v, ctx->out[0] + (l * s->s + row0) * E, NULL, gws, 0, 1);
  }
}

static const hwt_op_impl k_attention[] = {
    {"attention", att_prepare, att_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_attention, k_attention)
