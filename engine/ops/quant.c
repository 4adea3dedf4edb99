/* The quantized family (issue #43): qmatmul, qconv2d, qadd and
 * dynamic_quantize as src/hwtune/graph/ops/quant.py defines them, on the
 * int8 GEMM (hwtune/qgemm.h). Activations arrive as integer values in
 * float32 buffers; weights are params holding s8 values, converted to bytes
 * and packed once at prepare with their column sums. qconv2d gathers each
 * thread's chunk of output pixels (im2col, the zero point in the padding)
 * into its workspace as u8 and runs the GEMM on it, writing NCHW directly
 * (the epilogue's column stride is H*W); a 1x1 stride-1 unpadded conv
 * hands the GEMM x's channel planes instead (k stride H*W, no copy).
 * Ungrouped convs with symmetric weights (ORT's quantize_static: every
 * conv of ResNet-50) run the direct int8 conv (hwtune/qconv.h) instead:
 * each work unit converts the input rows its pixels read into u8
 * channels-last once, and the micro-kernel reads the windows there (no
 * im2col, no A packing). Where lowering linked int8 ops by bytes
 * (attributes x_hwc / y_hwc, hwtune.engine.qlayout), qconv2d and qadd read
 * and write u8 channels-last pixels at the start of each image's float32
 * slot instead, and the conversion disappears. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "hwtune/qadd.h"
#include "hwtune/qconv.h"
#include "hwtune/qdw.h"
#include "hwtune/qgemm.h"
#include "ops_util.h"

/* im2col rows per chunk: this many bytes of gathered patches per thread,
 * which the GEMM then reads once per column block: half of Zen 4's 1 MiB
 * L2, the other half for the packed weights' block (qgemm.c). */
#define QCONV_CHUNK_BYTES (256 * 1024)

typedef struct {
  hwt_qgemm_plan plan;
  void *packed;      /* per group: plan.packed_b_bytes */
  int32_t *colsum;   /* [N total] */
  int32_t *zb;       /* [N total] or NULL (all zero) */
  int32_t *bias_i;   /* [N total] or NULL: bias_int's integers */
  float *scale;      /* [N total] */
  float *bias;       /* [N total] or NULL */
  hwt_qgemm_epi epi; /* everything but C and za (run time) */
  int dyn_za;        /* activation zero point from input 5 at run time */
  int64_t dyn_scale; /* scale_t (input 6) values: 1 or N; 0 without it */
  /* qconv2d */
  int64_t n_img, ic, h, w, oc, kh, kw, oh, ow, groups;
  int64_t sh, sw, pt, pl, dh, dw, chunk, chunks;
  int64_t cparts;    /* column (output channel) parts per chunk */
  int direct;        /* 1x1, stride 1, no padding: the GEMM reads x itself (no im2col) */
  int32_t pad_u8;    /* the padding value: the zero point as u8 */
  float a_shift;     /* 128 for s8 activations (into u8), else 0 */
  int ind;           /* the direct int8 conv (cplan) instead of the GEMM */
  hwt_qconv_plan cplan;
  size_t ind_slab;   /* bytes of the channels-last u8 rows one work unit reads */
  /* qconv2d links that carry bytes (hwtune.engine.qlayout): x_hwc, image n
     of x is u8 channels-last (ic bytes per pixel) at the start of its float
     slot x + n * ic * h * w; y_hwc, this op writes its output so */
  int x_hwc, y_hwc;
  /* depthwise (groups = ic = oc, u8 activations, u8 or float output): the
     depthwise int8 kernel (hwtune/qdw.h) on u8 channels-last rows */
  int qdw;
  hwt_qdw_desc qd;
  float *qw;         /* [taps][cp] weights minus their zero points */
  size_t qdw_slab;   /* bytes of the channels-last rows a thread converts (0 with x_hwc) */
  int qdw_hwc;       /* those rows converted by cplan's (a 1x1 conv's) converter */
} q_state;

static void q_release(hwt_op_ctx *ctx) {
  q_state *s = ctx->state;
  if (s) {
    free(s->packed);
    free(s->colsum);
    free(s->zb);
    free(s->scale);
    free(s->bias);
    free(s->bias_i);
    free(s->qw);
  }
  free(s);
  ctx->state = NULL;
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* The epilogue's per-column arrays and output type from the attributes
 * and the const inputs w_scale (2), w_zero (3), bias (4); N columns. */
static int q_common(hwt_op_ctx *ctx, q_state *s, int64_t N, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  for (int i = 1; i < 5 && i < ctx->n_in; i++)
    if (!(ctx->const_in >> i & 1) && hwt_graph_tensor_kind(g, hwt_ops_in(ctx, i)) != HWT_TENSOR_PARAM)
      return hwt_ops_fail(err, errlen, ctx, "weights, scales, zero points and bias must be "
                                            "constants");
  const int64_t ns = hwt_ops_numel(g, hwt_ops_in(ctx, 2)), nz = hwt_ops_numel(g, hwt_ops_in(ctx, 3));
  if ((ns != 1 && ns != N) || (nz != 1 && nz != N))
    return hwt_ops_fail(err, errlen, ctx, "w_scale and w_zero must be [1] or one per column");
  if (ctx->n_in > 4 && hwt_ops_numel(g, hwt_ops_in(ctx, 4)) != N)
    return hwt_ops_fail(err, errlen, ctx, "bias must hold one value per column");
  const float a_scale = (float)hwt_ops_float(ctx, "a_scale", 1.0);
  const float y_scale = (float)hwt_ops_float(ctx, "y_scale", 1.0);
  hwt_qgemm_epi *e = &s->epi;
  e->out = hwt_ops_str_is(ctx, "out", "acc", 0)  ? HWT_QOUT_ACC
           : hwt_ops_str_is(ctx, "out", "u8", 0) ? HWT_QOUT_QF32
           : hwt_ops_str_is(ctx, "out", "s8", 0) ? HWT_QOUT_QF32
                                                  : HWT_QOUT_F32;
  const int s8_out = hwt_ops_str_is(ctx, "out", "s8", 0);
  e->qmin = s8_out ? -128 : 0;
  e->qmax = s8_out ? 127 : 255;
  e->zy = (int32_t)hwt_ops_int(ctx, "y_zero", 0);
  e->relu = hwt_ops_int(ctx, "relu", 0) != 0;
  e->za = (int32_t)hwt_ops_int(ctx, "a_zero", 0);
  const int requant = e->out == HWT_QOUT_QF32;
  if (requant && !(y_scale > 0.0f)) return hwt_ops_fail(err, errlen, ctx, "y_scale must be > 0");
  s->scale = malloc((size_t)N * sizeof(float));
  s->colsum = malloc((size_t)N * sizeof(int32_t));
  if (!s->scale || !s->colsum) return HWT_ENOMEM;
  const float *ws = ctx->in[2], *wz = ctx->in[3];
  int any_zb = 0;
  for (int64_t j = 0; j < N; j++) {
    float m = a_scale * ws[ns == 1 ? 0 : j];
    s->scale[j] = requant ? m / y_scale : m;
    if (wz[nz == 1 ? 0 : j] != 0.0f) any_zb = 1;
  }
  if (any_zb) {
    if (!(s->zb = malloc((size_t)N * sizeof(int32_t)))) return HWT_ENOMEM;
    for (int64_t j = 0; j < N; j++) s->zb[j] = (int32_t)wz[nz == 1 ? 0 : j];
  }
  if (ctx->n_in > 4 && hwt_ops_int(ctx, "bias_int", 0)) {
    if (!(s->bias_i = malloc((size_t)N * sizeof(int32_t)))) return HWT_ENOMEM;
    for (int64_t j = 0; j < N; j++) {
      const float b = ctx->in[4][j];
      if (!(fabsf(b) < 16777216.0f) || b != floorf(b))
        return hwt_ops_fail(err, errlen, ctx, "bias_int needs integers below 2^24 in bias");
      s->bias_i[j] = (int32_t)b;
    }
  } else if (ctx->n_in > 4) {
    if (!(s->bias = malloc((size_t)N * sizeof(float)))) return HWT_ENOMEM;
    for (int64_t j = 0; j < N; j++) s->bias[j] = requant ? ctx->in[4][j] / y_scale : ctx->in[4][j];
  }
  e->zb = s->zb;
  e->scale = s->scale;
  e->bias = s->bias;
  e->bias_i = s->bias_i;
  return HWT_OK;
}

/* s8 weights from float values: [rows, cols] -> bytes; 1 if a value is not
 * an integer in -128..127. */
static int to_s8(const float *src, size_t n, int8_t *dst) {
  for (size_t i = 0; i < n; i++) {
    const float v = src[i];
    if (!(v >= -128.0f && v <= 127.0f) || v != floorf(v)) return 1;
    dst[i] = (int8_t)v;
  }
  return 0;
}

/* Packs `groups` weight blocks (block gi: B rows [K] x cols [N] at
 * src + gi * block, row stride ldb, transposed when trans) with the plan. */
static int q_pack(hwt_op_ctx *ctx, q_state *s, int groups, int64_t K, int64_t Ng, int trans,
                  char *err, size_t errlen) {
  const size_t n = (size_t)(K * Ng * groups);
  int8_t *w8 = malloc(n ? n : 1);
  if (!w8) return HWT_ENOMEM;
  if (to_s8(ctx->in[1], n, w8)) {
    free(w8);
    return hwt_ops_fail(err, errlen, ctx, "weights must hold s8 integers (-128..127)");
  }
  const size_t pb = s->plan.packed_b_bytes;
  s->packed = aligned_alloc(64, round64(pb * (size_t)groups + 64));
  if (!s->packed) {
    free(w8);
    return HWT_ENOMEM;
  }
  for (int gi = 0; gi < groups; gi++)
    hwt_qgemm_pack_b(&s->plan, w8 + (size_t)gi * (size_t)(K * Ng), trans ? (int)K : (int)Ng,
                     trans, (char *)s->packed + (size_t)gi * pb, s->colsum + gi * Ng);
  free(w8);
  return HWT_OK;
}

static int plan_for(hwt_op_ctx *ctx, q_state *s, int64_t M, int64_t N, int64_t K, int lda,
                    int64_t ks, hwt_qa_type at, char *err, size_t errlen) {
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || ks > INT32_MAX)
    return hwt_ops_fail(err, errlen, ctx, "too large");
  hwt_qgemm_desc d = {(int)M, (int)N, (int)K, lda, at, (int)ks};
  const int isa = hwt_qgemm_variant_for(ctx->isa);
  int st = isa < 0 ? isa : hwt_qgemm_plan_make(&d, (hwt_isa)isa, &s->plan);
  if (st < 0) return hwt_ops_fail(err, errlen, ctx, "no int8 GEMM plan");
  return HWT_OK;
}

/* -- qmatmul ------------------------------------------------------------- */

static int qmatmul_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  if (ctx->n_in < 4 || ctx->n_in > 7 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx,
                        "qmatmul takes a, b, w_scale, w_zero[, bias[, a_zero_t[, scale_t]]]");
  int ra, rb;
  const int64_t *a = hwt_ops_in_shape(ctx, 0, &ra), *b = hwt_ops_in_shape(ctx, 1, &rb);
  if (ra < 2 || rb != 2 || a[ra - 1] != b[0])
    return hwt_ops_fail(err, errlen, ctx, "qmatmul needs a[..., K] and b[K, N]");
  const int64_t K = b[0], N = b[1], M = hwt_ops_prod(a, 0, ra - 1);
  q_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  ctx->state = s;
  int st = q_common(ctx, s, N, err, errlen);
  if (st < 0) return st;
  s->dyn_za = ctx->n_in >= 6;
  if (ctx->n_in == 7) {
    s->dyn_scale = hwt_ops_numel(g, hwt_ops_in(ctx, 6));
    if (s->dyn_scale != 1 && s->dyn_scale != N)
      return hwt_ops_fail(err, errlen, ctx, "scale_t must be [1] or one per column");
    if (s->epi.out != HWT_QOUT_F32)
      return hwt_ops_fail(err, errlen, ctx, "scale_t needs out f32");
  }
  const hwt_qa_type at = hwt_ops_int(ctx, "a_signed", 0) ? HWT_QA_F32S8 : HWT_QA_F32U8;
  if ((st = plan_for(ctx, s, M, N, K, (int)K, 0, at, err, errlen)) < 0) return st;
  if ((st = q_pack(ctx, s, 1, K, N, 0, err, errlen)) < 0) return st;
  s->epi.rs_c = (ptrdiff_t)N;
  s->epi.cs_c = 1;
  /* scale_t: each thread's copy of the per-column scales after the GEMM's
     workspace (run() may not allocate) */
  const size_t ws = round64(s->plan.ws_bytes) + (s->dyn_scale ? round64((size_t)N * 4) : 0);
  return hwt_ops_prepared(ctx, s, ws / 4, 2.0 * (double)(M * N * K));
}

static void qmatmul_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const q_state *s = ctx->state;
  hwt_qgemm_epi e = s->epi;
  e.C = ctx->out[0];
  if (s->dyn_za) e.za = (int32_t)ctx->in[5][0];
  if (s->dyn_scale) {
    float *sc = (float *)((char *)ws + round64(s->plan.ws_bytes));
    const float *st = ctx->in[6];
    for (int j = 0; j < s->plan.d.N; j++) sc[j] = st[s->dyn_scale == 1 ? 0 : j];
    e.scale = sc;
  }
  hwt_qgemm_run_part(&s->plan, ctx->in[0], s->packed, s->colsum, &e, ws, tid, nth);
}

/* -- qconv2d ------------------------------------------------------------- */

/* im2col's u8 copy of the input rows a chunk reads: at most the whole
 * image's channels of one group (none for 1x1 convs without padding). */
static size_t slab_bytes(const q_state *s) {
  if (s->direct || (s->kh == 1 && s->kw == 1 && s->pt == 0 && s->pl == 0)) return 0;
  return (size_t)((s->ic / s->groups) * s->h * s->w);
}

/* The epilogue's output form: float32 NCHW (a channel's pixels adjacent),
 * or with y_hwc u8 pixels of oc channels (hwtune.engine.qlayout). */
static void qconv_out_form(q_state *s, int64_t P) {
  if (s->y_hwc) {
    s->epi.out = HWT_QOUT_U8;
    s->epi.rs_c = (ptrdiff_t)s->oc;
    s->epi.cs_c = 1;
  } else {
    s->epi.rs_c = 1;
    s->epi.cs_c = (ptrdiff_t)P;
  }
}

/* Where image n's output starts: its float32 slot, or the same address as
 * bytes (y_hwc). */
static void *qconv_out_image(const hwt_op_ctx *ctx, const q_state *s, int64_t n) {
  float *slot = ctx->out[0] + n * s->oc * s->oh * s->ow;
  return slot;
}

/* The most work any of nth threads gets (in micro-kernel tiles x column
 * panels) when the direct conv's units (image, pixel chunk of `chunk`,
 * channel part of `cparts`) are handed out as qconv_run_direct does. */
static int64_t direct_split_cost(const q_state *s, int64_t P, int64_t chunk, int64_t cparts,
                                 int64_t panels, int64_t mr, int64_t nth) {
  const int64_t chunks = (P + chunk - 1) / chunk, units = s->n_img * chunks * cparts;
  int64_t worst = 0;
  for (int64_t t = 0; t < nth; t++) {
    int64_t lo, hi, w = 0;
    hwt_ops_rows(units, (int)t, (int)nth, &lo, &hi);
    for (int64_t v = lo; v < hi; v++) {
      const int64_t cp = v % cparts, c = (v / cparts) % chunks;
      const int64_t rows = P - c * chunk < chunk ? P - c * chunk : chunk;
      w += (rows + mr - 1) / mr * (panels * (cp + 1) / cparts - panels * cp / cparts);
    }
    worst = w > worst ? w : worst;
  }
  return worst;
}

/* The direct conv's half of qconv_prepare: work units (image, pixel chunk,
 * channel part) as the GEMM path's, the weights packed by the conv's plan,
 * and the workspace: the channels-last slab of the most input rows a chunk
 * reads, then the kernel's own. */
static int qconv_prepare_direct(hwt_op_ctx *ctx, q_state *s, int64_t P, int64_t K, int64_t nth,
                                char *err, size_t errlen) {
  const hwt_qconv_plan *cp = &s->cplan;
  const int64_t panels = (s->oc + cp->g.nr - 1) / cp->g.nr, units = s->n_img * s->chunks;
  s->cparts = units >= nth ? 1 : (nth + units - 1) / units;
  if (s->cparts > panels) s->cparts = panels;
  if (s->x_hwc && s->n_img < nth) {
    /* Small images on several threads: whole images split by output
       channels where that balances better than pixel chunks of 32. With
       bytes for input no thread converts anything, so channel parts cost
       nothing extra. The int8 ResNet-50's 14x14 layers split 128 + 68
       pixels (16 and 9 tiles of 8) at 2 threads, its 7x7 ones 32 + 17 (4
       and 3); by channels each thread takes half the panels of all tiles. */
    const int64_t cparts = (nth + s->n_img - 1) / s->n_img < panels
                               ? (nth + s->n_img - 1) / s->n_img
                               : panels;
    if (direct_split_cost(s, P, P, cparts, panels, cp->g.mr, nth) <
        direct_split_cost(s, P, s->chunk, s->cparts, panels, cp->g.mr, nth)) {
      s->chunk = P;
      s->chunks = 1;
      s->cparts = cparts;
    }
  }
  const size_t n = (size_t)(s->oc * K);
  int8_t *w8 = malloc(n ? n : 1);
  if (!w8) return HWT_ENOMEM;
  if (to_s8(ctx->in[1], n, w8)) {
    free(w8);
    return hwt_ops_fail(err, errlen, ctx, "weights must hold s8 integers (-128..127)");
  }
  s->packed = aligned_alloc(64, round64(cp->packed_w_bytes + 64));
  int st = s->packed ? hwt_qconv_pack_w(cp, w8, s->packed, s->colsum) : HWT_ENOMEM;
  free(w8);
  if (st < 0) return st;
  int64_t out_rows = (s->chunk + s->ow - 1) / s->ow + 1;
  out_rows = out_rows < s->oh ? out_rows : s->oh;
  int64_t in_rows = (out_rows - 1) * s->sh + (s->kh - 1) * s->dh + 1;
  in_rows = in_rows < s->h ? in_rows : s->h;
  s->ind_slab = s->x_hwc ? 0 : (size_t)(in_rows * s->w) * (size_t)cp->icp;
  qconv_out_form(s, P);
  const size_t ws = round64(s->ind_slab) + round64(cp->ws_bytes);
  return hwt_ops_prepared(ctx, s, ws / 4, 2.0 * (double)(s->n_img * s->oc * P * K));
}

/* A depthwise conv (one channel per group, multiplier 1) with u8
 * activations and a u8 or float output runs the depthwise int8 kernel
 * (hwtune/qdw.h): channels-last bytes in (the producer's, x_hwc, or each
 * thread's rows converted), vectors along the channels. im2col and a GEMM
 * of one output column per group took int8 MobileNetV2 54.3 ms where ORT's
 * QLinearConvs took 3.2 (onnx/quant.py then ran such convs in float between
 * a dequantize and a quantize). HWT_EINVAL: not such a conv. */
static int qdw_prepare(hwt_op_ctx *ctx, q_state *s, int a_signed) {
  const hwt_qgemm_epi *e = &s->epi;
  const int u8_out = e->out == HWT_QOUT_QF32 && e->qmin == 0 && e->qmax == 255;
  if (s->groups < 2 || s->groups != s->ic || s->oc != s->ic || a_signed ||
      !(u8_out || e->out == HWT_QOUT_F32) || s->kh * s->kw > 64 || s->ic > INT32_MAX / 64 ||
      s->h > INT32_MAX / 2 || s->w > INT32_MAX / 2 || (s->y_hwc && !u8_out))
    return HWT_EINVAL;
  const int64_t taps = s->kh * s->kw, cp = hwt_qdw_cp((int)s->ic);
  if (!(s->qw = calloc((size_t)(taps * cp), sizeof(float)))) return HWT_ENOMEM;
  const float *w = ctx->in[1];
  for (int64_t c = 0; c < s->ic; c++)
    for (int64_t t = 0; t < taps; t++) {
      const float v = w[c * taps + t] - (float)(s->zb ? s->zb[c] : 0);
      s->qw[t * cp + c] = v;
    }
  hwt_qdw_desc *d = &s->qd;
  *d = (hwt_qdw_desc){(int)s->ic, (int)s->h, (int)s->w, (int)s->oh, (int)s->ow, (int)s->kh,
                      (int)s->kw, (int)s->sh, (int)s->sw, (int)s->pt, (int)s->pl, (int)s->dh,
                      (int)s->dw, e->za, s->qw, s->bias_i, s->scale, s->bias, e->relu, u8_out,
                      e->zy, s->y_hwc};
  s->qdw = 1;
  /* float input rows become bytes through the direct int8 conv's
     converter (per ISA, a transpose) when its pixels are exactly C bytes:
     a plan of a 1x1 conv over the same image, for that only */
  if (!s->x_hwc && s->ic % 4 == 0) {
    const hwt_qconv_desc cd = {(int)s->ic, (int)s->ic, (int)s->h, (int)s->w, (int)s->h,
                               (int)s->w, 1, 1, 1, 1, 0, 0, 1, 1};
    const int isa = hwt_qgemm_variant_for(ctx->isa);
    s->qdw_hwc = isa >= 0 && hwt_qconv_plan_make(&cd, (hwt_isa)isa, &s->cplan) == HWT_OK &&
                 s->cplan.icp == s->ic;
  }
  /* a thread converts at most a whole image's rows */
  s->qdw_slab = s->x_hwc ? 0 : (size_t)(s->h * s->w * s->ic);
  return HWT_OK;
}

static void to_hwc_u8(const q_state *s, const float *x, int64_t lo, int64_t hi, uint8_t *dst);

/* Output rows [oa, ob) of image n by the depthwise int8 kernel. */
static void qdw_part(const hwt_op_ctx *ctx, const q_state *s, int64_t n, int64_t oa, int64_t ob,
                     float *ws) {
  const hwt_qdw_desc *d = &s->qd;
  uint8_t *slab = (uint8_t *)ws;
  float *rows = (float *)(slab + round64(s->qdw_slab));
  const float *xn = ctx->in[0] + n * s->ic * s->h * s->w;
  const uint8_t *x8 = (const uint8_t *)xn;
  int64_t r0 = 0;
  if (!s->x_hwc) {
    /* the input rows these output rows read, as channels-last bytes */
    r0 = oa * s->sh - s->pt;
    int64_t r1 = (ob - 1) * s->sh - s->pt + (s->kh - 1) * s->dh;
    r0 = r0 < 0 ? 0 : r0;
    r1 = r1 >= s->h ? s->h - 1 : r1;
    const int64_t hw = s->h * s->w, C = s->ic;
    if (s->qdw_hwc) {
      to_hwc_u8(s, xn, r0, r1, slab);
    } else {
      for (int64_t c = 0; c < C; c++) {
        const float *xc = xn + c * hw;
        for (int64_t q = r0 * s->w; q <= r1 * s->w + s->w - 1; q++) {
          float v = xc[q];
          v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
          slab[(q - r0 * s->w) * C + c] = (uint8_t)(int)v;
        }
      }
    }
    x8 = slab;
  }
  void *y = s->y_hwc ? qconv_out_image(ctx, s, n)
                     : (void *)(ctx->out[0] + n * s->oc * s->oh * s->ow);
  hwt_qdw_rows(d, ctx->isa, x8, (int)r0, y, (int)oa, (int)ob, rows);
}

static void qdw_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const q_state *s = ctx->state;
  int64_t lo, hi;
  hwt_ops_rows(s->n_img * s->oh, tid, nth, &lo, &hi);
  while (lo < hi) {
    const int64_t n = lo / s->oh, oa = lo % s->oh;
    const int64_t ob = oa + (hi - lo) < s->oh ? oa + (hi - lo) : s->oh;
    qdw_part(ctx, s, n, oa, ob, ws);
    lo += ob - oa;
  }
}

static int qconv_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in < 4 || ctx->n_in > 5 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "qconv2d takes x, w, w_scale, w_zero[, bias]");
  int rx, rw;
  const int64_t *x = hwt_ops_in_shape(ctx, 0, &rx), *w = hwt_ops_in_shape(ctx, 1, &rw);
  if (rx != 4 || rw != 4) return hwt_ops_fail(err, errlen, ctx, "qconv2d needs NCHW x and OIHW w");
  q_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  ctx->state = s;
  int64_t st2[2] = {1, 1}, pad[2] = {0, 0}, pend[2], dil[2] = {1, 1};
  hwt_ops_pair(ctx, "stride", st2);
  hwt_ops_pair(ctx, "padding", pad);
  hwt_ops_pair(ctx, "dilation", dil);
  if (hwt_ops_pair(ctx, "padding_end", pend)) pend[0] = pad[0], pend[1] = pad[1];
  s->groups = hwt_ops_int(ctx, "groups", 1);
  s->n_img = x[0], s->ic = x[1], s->h = x[2], s->w = x[3];
  s->oc = w[0], s->kh = w[2], s->kw = w[3];
  s->sh = st2[0], s->sw = st2[1], s->pt = pad[0], s->pl = pad[1], s->dh = dil[0], s->dw = dil[1];
  if (s->groups < 1 || s->ic % s->groups || s->oc % s->groups || w[1] * s->groups != s->ic)
    return hwt_ops_fail(err, errlen, ctx, "weights do not fit the input channels and groups");
  s->oh = (s->h + pad[0] + pend[0] - (s->kh - 1) * s->dh - 1) / s->sh + 1;
  s->ow = (s->w + pad[1] + pend[1] - (s->kw - 1) * s->dw - 1) / s->sw + 1;
  if (s->oh < 1 || s->ow < 1) return hwt_ops_fail(err, errlen, ctx, "kernel larger than the input");
  const int64_t K = w[1] * s->kh * s->kw, Ng = s->oc / s->groups, P = s->oh * s->ow;
  int st = q_common(ctx, s, s->oc, err, errlen);
  if (st < 0) return st;
  const int a_signed = hwt_ops_int(ctx, "a_signed", 0) != 0;
  s->x_hwc = hwt_ops_int(ctx, "x_hwc", 0) != 0;
  s->y_hwc = hwt_ops_int(ctx, "y_hwc", 0) != 0;
  if ((st = qdw_prepare(ctx, s, a_signed)) == HWT_OK) {
    const size_t ws = round64(s->qdw_slab) + round64((size_t)hwt_qdw_ws_floats(&s->qd) * 4);
    return hwt_ops_prepared(ctx, s, ws / 4,
                            2.0 * (double)(s->n_img * s->oc * s->oh * s->ow * s->kh * s->kw));
  }
  if (st != HWT_EINVAL) return st; /* out of memory */
  if (s->x_hwc && (a_signed || s->groups != 1 || s->ic % 4))
    return hwt_ops_fail(err, errlen, ctx, "x_hwc needs u8 activations, one group and whole "
                                          "4-channel groups");
  if (s->y_hwc && (s->epi.out != HWT_QOUT_QF32 || s->epi.qmin != 0 || s->epi.qmax != 255 ||
                   s->groups != 1 || s->oc % 4))
    return hwt_ops_fail(err, errlen, ctx, "y_hwc needs out u8, one group and whole 4-channel "
                                          "groups");
  /* im2col holds u8: s8 activations move by +128, and their zero point */
  s->a_shift = a_signed ? 128.0f : 0.0f;
  s->pad_u8 = s->epi.za + (a_signed ? 128 : 0);
  s->epi.za = s->pad_u8;
  int64_t chunk = QCONV_CHUNK_BYTES / (K ? K : 1);
  chunk = chunk < 32 ? 32 : chunk / 32 * 32;  /* whole tiles of every variant (mr 4, 6, 8) */
  /* Work units are (image, group, pixel chunk, column part): enough for
     every thread. A small image in one chunk left all but one thread idle
     (the small ResNet-50 ran slower on 2 threads than on 1). Pixel chunks
     first (each unit gathers its own rows), then output-channel parts. */
  const int64_t outer = s->n_img * s->groups, nth = ctx->max_threads > 0 ? ctx->max_threads : 1;
  if (outer < nth) {
    const int64_t want = (P + (nth + outer - 1) / outer - 1) / ((nth + outer - 1) / outer);
    const int64_t even = (want + 31) / 32 * 32;
    if (even < chunk) chunk = even;
  }
  s->chunk = chunk < P ? chunk : P;
  s->chunks = (P + s->chunk - 1) / s->chunk;
  if (s->groups == 1 && !s->zb && s->ic <= INT32_MAX / 2 && s->oc <= INT32_MAX / 2 &&
      s->h <= INT32_MAX / 2 && s->w <= INT32_MAX / 2 && P <= INT32_MAX / 2) {
    const hwt_qconv_desc cd = {(int)s->ic, (int)s->oc, (int)s->h, (int)s->w, (int)s->oh,
                               (int)s->ow, (int)s->kh, (int)s->kw, (int)s->sh, (int)s->sw,
                               (int)s->pt, (int)s->pl, (int)s->dh, (int)s->dw};
    const int isa = hwt_qgemm_variant_for(ctx->isa);
    s->ind = isa >= 0 && hwt_qconv_plan_make(&cd, (hwt_isa)isa, &s->cplan) == HWT_OK;
  }
  if (s->ind) return qconv_prepare_direct(ctx, s, P, K, nth, err, errlen);
  /* 1x1, stride 1, no padding (ResNet-50: 33 of 53 convs, 44% of the FLOPs):
     the pixels of x's channel planes are the GEMM's A rows read with k
     stride H*W, quantized values converted to bytes where they are packed;
     im2col's u8 copy cost as much as the micro-kernel there */
  s->direct = s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 &&
              s->pl == 0 && pend[0] == 0 && pend[1] == 0 && s->h * s->w <= INT32_MAX;
  if (s->direct) {
    s->epi.za = s->pad_u8 - (int32_t)s->a_shift; /* the GEMM shifts s8 itself */
    st = plan_for(ctx, s, s->chunk, Ng, K, 1, s->h * s->w,
                  a_signed ? HWT_QA_F32S8 : HWT_QA_F32U8, err, errlen);
  } else {
    st = plan_for(ctx, s, s->chunk, Ng, K, (int)K, 0, HWT_QA_U8, err, errlen);
  }
  if (st < 0) return st;
  const int64_t panels = (Ng + s->plan.nr - 1) / s->plan.nr, units = outer * s->chunks;
  s->cparts = units >= nth ? 1 : (nth + units - 1) / units;
  if (s->cparts > panels) s->cparts = panels;
  if ((st = q_pack(ctx, s, (int)s->groups, K, Ng, 1, err, errlen)) < 0) return st;
  qconv_out_form(s, P);
  /* x_hwc on this path (asymmetric weights: the direct conv takes none):
     each thread expands the image's bytes back into float32 NCHW first */
  const size_t ws = (s->direct ? 0 : round64((size_t)(s->chunk * K))) +
                    round64(slab_bytes(s)) + round64(s->plan.ws_bytes) +
                    (s->x_hwc ? round64((size_t)(s->ic * s->h * s->w) * sizeof(float)) : 0);
  return hwt_ops_prepared(ctx, s, ws / 4, 2.0 * (double)(s->n_img * s->oc * P * K));
}

/* The input rows [lo, hi] that output pixels [p0, p0 + rows) read. */
static void window_rows(const q_state *s, int64_t p0, int64_t rows, int64_t *lo, int64_t *hi) {
  const int64_t oh_lo = p0 / s->ow, oh_hi = (p0 + rows - 1) / s->ow;
  const int64_t a = oh_lo * s->sh - s->pt, b = oh_hi * s->sh - s->pt + (s->kh - 1) * s->dh;
  *lo = a < 0 ? 0 : a;
  *hi = b >= s->h ? s->h - 1 : b;
}

/* Rows [p0, p0 + rows) of image n, group gi's channels, as u8 patches. */
static void im2col(const q_state *s, const float *x, int64_t p0, int64_t rows, int64_t gi,
                   uint8_t *dst, uint8_t *slab) {
  const int64_t icg = s->ic / s->groups, K = icg * s->kh * s->kw;
  const float add = s->a_shift;
  if (s->kh == 1 && s->kw == 1 && s->pt == 0 && s->pl == 0) {
    /* 1x1 without padding (two thirds of ResNet-50's convs): channel by
       channel, reading each channel's pixels in order (row by row read one
       value per channel, H*W floats apart: a cache line per value) */
    for (int64_t c = 0; c < icg; c++) {
      const float *xc = x + (gi * icg + c) * s->h * s->w;
      int64_t oh = p0 / s->ow, ow = p0 % s->ow;
      for (int64_t r = 0; r < rows; r++) {
        float v = xc[oh * s->sh * s->w + ow * s->sw] + add;
        v = v < 0.0f ? 0.0f : v;
        v = v > 255.0f ? 255.0f : v;
        dst[r * K + c] = (uint8_t)(int)v;
        if (++ow == s->ow) ow = 0, oh++;
      }
    }
    return;
  }
  /* Other kernels: the input rows the chunk's windows read, converted to u8
     once (each value is read by up to KH x KW windows; converting it per
     read was the largest share of qconv2d's time in perf, above the VNNI
     micro-kernel, on the small ResNet-50), then gathered as bytes. */
  const int64_t oh_lo = p0 / s->ow, oh_hi = (p0 + rows - 1) / s->ow;
  int64_t ih_lo = oh_lo * s->sh - s->pt, ih_hi = oh_hi * s->sh - s->pt + (s->kh - 1) * s->dh;
  ih_lo = ih_lo < 0 ? 0 : ih_lo;
  ih_hi = ih_hi >= s->h ? s->h - 1 : ih_hi;
  const int64_t span = ih_hi >= ih_lo ? (ih_hi - ih_lo + 1) * s->w : 0;
  for (int64_t c = 0; c < icg; c++) {
    const float *xc = x + (gi * icg + c) * s->h * s->w + ih_lo * s->w;
    uint8_t *sc = slab + c * span;
    for (int64_t e = 0; e < span; e++) {
      float v = xc[e] + add;
      v = v < 0.0f ? 0.0f : v;
      v = v > 255.0f ? 255.0f : v;
      sc[e] = (uint8_t)(int)v;
    }
  }
  /* The geometry in locals: the byte stores below may alias *s as far as
     the compiler knows, and it reloaded s->kw and s->dw after every byte
     (28% of qconv_run's samples on one store, perf, int8 ResNet-50) */
  const int64_t KH = s->kh, KW = s->kw, DH = s->dh, DW = s->dw, W = s->w;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t p = p0 + r, oh = p / s->ow, ow = p % s->ow;
    uint8_t *row = dst + r * K;
    int64_t k = 0;
    const int64_t ih0 = oh * s->sh - s->pt, iw0 = ow * s->sw - s->pl;
    if (ih0 >= 0 && iw0 >= 0 && ih0 + (KH - 1) * DH < s->h && iw0 + (KW - 1) * DW < W) {
      /* the window lies inside the input: no bounds checks */
      const uint8_t *sc = slab + (ih0 - ih_lo) * W + iw0;
      if (KH == 3 && KW == 3 && DW == 1) { /* 3x3 (ResNet-50's 16 and most CNNs') */
        const int64_t r1 = DH * W, r2 = 2 * DH * W;
        for (int64_t c = 0; c < icg; c++, sc += span, row += 9) {
          row[0] = sc[0], row[1] = sc[1], row[2] = sc[2];
          row[3] = sc[r1], row[4] = sc[r1 + 1], row[5] = sc[r1 + 2];
          row[6] = sc[r2], row[7] = sc[r2 + 1], row[8] = sc[r2 + 2];
        }
        continue;
      }
      for (int64_t c = 0; c < icg; c++, sc += span) {
        for (int64_t i = 0; i < KH; i++) {
          const uint8_t *sr = sc + i * DH * W;
          for (int64_t j = 0; j < KW; j++, k++) row[k] = sr[j * DW];
        }
      }
      continue;
    }
    const int64_t H = s->h;
    const uint8_t pad = (uint8_t)s->pad_u8;
    for (int64_t c = 0; c < icg; c++) {
      const uint8_t *sc = slab + c * span;
      for (int64_t i = 0; i < KH; i++) {
        const int64_t ih = ih0 + i * DH;
        for (int64_t j = 0; j < KW; j++, k++) {
          const int64_t iw = iw0 + j * DW;
          row[k] = (ih < 0 || ih >= H || iw < 0 || iw >= W) ? pad : sc[(ih - ih_lo) * W + iw];
        }
      }
    }
  }
}

/* Input rows [lo, hi] of image x (NCHW float holding quantized values) as
 * u8 channels-last pixels of icp bytes; channels past ic are 0 (they meet
 * zero weights). */
static void to_hwc_u8(const q_state *s, const float *x, int64_t lo, int64_t hi, uint8_t *dst) {
  const int64_t span = hi >= lo ? (hi - lo + 1) * s->w : 0;
  hwt_qconv_to_hwc(&s->cplan, x + lo * s->w, (ptrdiff_t)(s->h * s->w), (int)span, s->a_shift,
                   dst);
}

static void qconv_run_direct(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const q_state *s = ctx->state;
  const int64_t P = s->oh * s->ow;
  uint8_t *slab = (uint8_t *)ws;
  void *cws = slab + round64(s->ind_slab);
  const int nr = s->cplan.g.nr;
  const int64_t panels = (s->oc + nr - 1) / nr;
  int64_t lo, hi;
  hwt_ops_rows(s->n_img * s->chunks * s->cparts, tid, nth, &lo, &hi);
  int64_t have = -1; /* the unit whose rows the slab holds (channel parts share them) */
  for (int64_t v = lo; v < hi; v++) {
    const int64_t cp = v % s->cparts, u = v / s->cparts;
    const int64_t c = u % s->chunks, n = u / s->chunks;
    const int64_t n0 = panels * cp / s->cparts * nr;
    const int64_t n1e = panels * (cp + 1) / s->cparts * nr, n1 = n1e < s->oc ? n1e : s->oc;
    if (n0 >= n1) continue;
    const int64_t p0 = c * s->chunk, rows = P - p0 < s->chunk ? P - p0 : s->chunk;
    int64_t r0, r1;
    window_rows(s, p0, rows, &r0, &r1);
    const float *xn = ctx->in[0] + n * s->ic * s->h * s->w;
    const uint8_t *x8 = slab;
    if (s->x_hwc) {
      x8 = (const uint8_t *)xn; /* the producer's bytes, all rows */
      r0 = 0;
    } else if (have != u) {
      to_hwc_u8(s, xn, r0, r1, slab);
    }
    have = u;
    hwt_qgemm_epi e = s->epi;
    e.C = qconv_out_image(ctx, s, n);
    hwt_qconv_compute(&s->cplan, x8, (int)r0, s->packed, s->colsum, &e, (int)p0,
                      (int)(p0 + rows), (int)n0, (int)n1, cws);
  }
}

static void qconv_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const q_state *s = ctx->state;
  if (s->qdw) {
    qdw_run(ctx, ws, tid, nth);
    return;
  }
  if (s->ind) {
    qconv_run_direct(ctx, ws, tid, nth);
    return;
  }
  const int64_t P = s->oh * s->ow, Ng = s->oc / s->groups;
  const int64_t K = (s->ic / s->groups) * s->kh * s->kw;
  uint8_t *cols = (uint8_t *)ws;
  uint8_t *slab = cols + (s->direct ? 0 : round64((size_t)(s->chunk * K)));
  void *gws = slab + round64(slab_bytes(s));
  float *xf = (float *)((char *)gws + round64(s->plan.ws_bytes)); /* x_hwc's expansion */
  int64_t have = -1;
  const size_t pb = s->plan.packed_b_bytes;
  int64_t lo, hi;
  hwt_ops_rows(s->n_img * s->groups * s->chunks * s->cparts, tid, nth, &lo, &hi);
  const int64_t panels = (Ng + s->plan.nr - 1) / s->plan.nr;
  for (int64_t v = lo; v < hi; v++) {
    const int64_t cp = v % s->cparts, u = v / s->cparts;
    const int64_t c = u % s->chunks, gi = (u / s->chunks) % s->groups;
    const int64_t n = u / (s->chunks * s->groups);
    const int64_t n0 = panels * cp / s->cparts * s->plan.nr;
    const int64_t n1e = panels * (cp + 1) / s->cparts * s->plan.nr, n1 = n1e < Ng ? n1e : Ng;
    if (n0 >= n1) continue;
    const int64_t p0 = c * s->chunk, rows = P - p0 < s->chunk ? P - p0 : s->chunk;
    const float *xn = ctx->in[0] + n * s->ic * s->h * s->w;
    if (s->x_hwc) {
      if (have != n) {
        const uint8_t *b = (const uint8_t *)xn;
        const int64_t hw = s->h * s->w, ic = s->ic;
        for (int64_t q = 0; q < hw; q++)
          for (int64_t ch = 0; ch < ic; ch++) xf[ch * hw + q] = (float)b[q * ic + ch];
      }
      have = n;
      xn = xf;
    }
    const void *A = cols;
    if (s->direct) A = xn + gi * (s->ic / s->groups) * P + p0;
    else im2col(s, xn, p0, rows, gi, cols, slab);
    hwt_qgemm_epi e = s->epi;
    const int64_t o0 = gi * Ng;
    e.C = s->y_hwc ? (void *)((uint8_t *)qconv_out_image(ctx, s, n) + (p0 * s->oc + o0))
                   : (void *)(ctx->out[0] + (n * s->oc + o0) * P + p0);
    e.scale = s->scale + o0;
    e.bias = s->bias ? s->bias + o0 : NULL;
    e.bias_i = s->bias_i ? s->bias_i + o0 : NULL;
    e.zb = s->zb ? s->zb + o0 : NULL;
    hwt_qgemm_compute(&s->plan, A, (const char *)s->packed + (size_t)gi * pb, s->colsum + o0,
                      &e, 0, (int)rows, (int)n0, (int)n1, gws);
  }
}

/* -- qadd ---------------------------------------------------------------- */

/* dequantize a and b, add, quantize: the element-wise rows' float32
 * operations (kernels/eltwise/ops.h) in one pass instead of four, so the
 * results are the same bit for bit (hwtune/qadd.h, vectorised per ISA).
 * The four passes were 7% of the int8 ResNet-50's time (16 residual adds:
 * 17.4 ms per inference, 1 thread, under load); the one pass took 14.6 ms
 * in the next profile, also under load: it moves 12 bytes per element
 * where the four moved 40. */
typedef struct {
  hwt_qadd_params p;
  hwt_isa isa;
  int64_t n;
  int64_t image; /* elements per image: with bytes (hwtune.engine.qlayout), image i's
                    are at the start of its float32 slot */
  int bytes;
} qadd_state;

static int qadd_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "qadd takes a and b");
  const int64_t n = hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 0));
  if (hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 1)) != n)
    return hwt_ops_fail(err, errlen, ctx, "qadd adds tensors of one shape");
  const int s8 = hwt_ops_str_is(ctx, "out", "s8", 0);
  qadd_state s = {{(float)hwt_ops_float(ctx, "a_scale", 1.0), (float)hwt_ops_int(ctx, "a_zero", 0),
                   (float)hwt_ops_float(ctx, "b_scale", 1.0), (float)hwt_ops_int(ctx, "b_zero", 0),
                   (float)hwt_ops_float(ctx, "y_scale", 1.0), (float)hwt_ops_int(ctx, "y_zero", 0),
                   0.0f, 0.0f},
                  ctx->isa, n, n, 0};
  if (!(s.p.sa > 0.0f && s.p.sb > 0.0f && s.p.sy > 0.0f))
    return hwt_ops_fail(err, errlen, ctx, "qadd's scales must be > 0");
  s.bytes = hwt_ops_int(ctx, "x_hwc", 0) != 0;
  if (s.bytes != (hwt_ops_int(ctx, "y_hwc", 0) != 0) || (s.bytes && s8))
    return hwt_ops_fail(err, errlen, ctx, "qadd takes bytes (x_hwc) only with a u8 output of "
                                          "bytes (y_hwc)");
  if (s.bytes) {
    int r;
    const int64_t *shape = hwt_ops_in_shape(ctx, 0, &r);
    if (r < 1 || shape[0] < 1) return hwt_ops_fail(err, errlen, ctx, "qadd of bytes needs NCHW");
    s.image = n / shape[0];
  }
  s.p.lo = (s8 ? -128.0f : 0.0f) - s.p.zy;
  s.p.hi = (s8 ? 127.0f : 255.0f) - s.p.zy;
  return hwt_ops_keep(ctx, &s, sizeof s, 0, 6.0 * (double)n);
}

static void qadd_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const qadd_state *s = ctx->state;
  int64_t a0, a1;
  hwt_ops_range(s->n, tid, nth, &a0, &a1);
  if (!s->bytes) {
    if (a1 > a0)
      hwt_qadd(s->isa, &s->p, ctx->in[0] + a0, ctx->in[1] + a0, ctx->out[0] + a0, a1 - a0);
    return;
  }
  /* element e of image i: byte e - i * image of that image's float32 slot */
  for (int64_t e = a0; e < a1;) {
    const int64_t i = e / s->image, off = e - i * s->image, slot = i * s->image;
    const int64_t m = (a1 - e < s->image - off ? a1 - e : s->image - off);
    hwt_qadd_u8(s->isa, &s->p, (const uint8_t *)(ctx->in[0] + slot) + off,
                (const uint8_t *)(ctx->in[1] + slot) + off, (uint8_t *)(ctx->out[0] + slot) + off,
                m);
    e += m;
  }
}

/* -- dynamic_quantize ---------------------------------------------------- */

/* ONNX DynamicQuantizeLinear: every thread scans all of x for its range
 * (the op has no barrier; x is an activation of a few hundred KiB, e.g.
 * BERT-base's [128, 768], read twice per thread), then quantizes its share;
 * thread 0 writes scale and zero point. All threads compute the same
 * float operations, so they agree. */
static int dq_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in != 1 || ctx->n_out != 3)
    return hwt_ops_fail(err, errlen, ctx, "dynamic_quantize takes x and gives y, scale, zero_point");
  const int64_t n = hwt_ops_numel(ctx->g, hwt_ops_in(ctx, 0));
  return hwt_ops_keep(ctx, &n, sizeof n, 0, 3.0 * (double)n);
}

static void dq_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const int64_t n = *(const int64_t *)ctx->state;
  const float *x = ctx->in[0];
  /* DQ_LANES independent minima and maxima: GCC does not vectorise the
     one-accumulator form (a conditional reduction: "unsupported use in
     stmt", -fopt-info-vec), and the scan ran at one element per compare
     chain. Each lane's `x < lo ? x : lo` is minps exactly (NaN skipped, a
     -0 never replaces 0), and every lane starts at 0, so the result is the
     single loop's. */
  enum { DQ_LANES = 16 };
  float lo8[DQ_LANES], hi8[DQ_LANES];
  for (int l = 0; l < DQ_LANES; l++) lo8[l] = hi8[l] = 0.0f;
  int64_t i0 = 0;
#if defined(__SSE2__)
  /* GCC unrolled the lanes below into scalar minss / maxss with spills:
     the baseline x86-64 form by hand (minps(v, lo) is v < lo ? v : lo) */
  __m128 l4[4], h4[4];
  for (int l = 0; l < 4; l++) l4[l] = h4[l] = _mm_setzero_ps();
  for (; i0 + DQ_LANES <= n; i0 += DQ_LANES)
    for (int l = 0; l < 4; l++) {
      const __m128 v = _mm_loadu_ps(x + i0 + 4 * l);
      l4[l] = _mm_min_ps(v, l4[l]);
      h4[l] = _mm_max_ps(v, h4[l]);
    }
  for (int l = 0; l < 4; l++) {
    _mm_storeu_ps(lo8 + 4 * l, l4[l]);
    _mm_storeu_ps(hi8 + 4 * l, h4[l]);
  }
#else
  for (; i0 + DQ_LANES <= n; i0 += DQ_LANES)
    for (int l = 0; l < DQ_LANES; l++) {
      const float v = x[i0 + l];
      lo8[l] = v < lo8[l] ? v : lo8[l];
      hi8[l] = v > hi8[l] ? v : hi8[l];
    }
#endif
  float lo = 0.0f, hi = 0.0f;
  for (int l = 0; l < DQ_LANES; l++) {
    lo = lo8[l] < lo ? lo8[l] : lo;
    hi = hi8[l] > hi ? hi8[l] : hi;
  }
  for (int64_t i = i0; i < n; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  float scale = (hi - lo) / 255.0f, zp = 0.0f;
  if (scale == 0.0f) {
    scale = 1.0f; /* all zeros: any scale gives q = 0 */
  } else {
    zp = 0.0f - lo / scale;
    zp = zp < 0.0f ? 0.0f : zp > 255.0f ? 255.0f : zp;
    zp = nearbyintf(zp);
  }
  int64_t a, b;
  hwt_ops_range(n, tid, nth, &a, &b);
  float *y = ctx->out[0];
  const float vlo = -zp, vhi = 255.0f - zp;
  for (int64_t i = a; i < b; i++) {
    float v = x[i] / scale;
    v = v > vlo ? v : vlo;
    v = v < vhi ? v : vhi;
    y[i] = ((v + 12582912.0f) - 12582912.0f) + zp; /* RNE, |v| <= 255 */
  }
  if (tid == 0) {
    ctx->out[1][0] = scale;
    ctx->out[2][0] = zp;
  }
}

static const hwt_op_impl QUANT[] = {
    {"qmatmul", qmatmul_prepare, qmatmul_run, q_release},
    {"qconv2d", qconv_prepare, qconv_run, q_release},
    {"dynamic_quantize", dq_prepare, dq_run, hwt_ops_free_state},
    {"qadd", qadd_prepare, qadd_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_quant, QUANT)
