/* The conv family: conv2d (NCHW or NCHW[x]c tensors, any stride, padding
 * -- symmetric or not -- and dilation, all run by the NCHW[x]c template with
 * its knobs from attributes or the kernel's default; group > 1 on NCHW by
 * conv_group.c) and layout_transform, as src/hwtune/graph/ops/{conv,layout}.py define
 * them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/bconv.h"
#include "hwtune/conv.h"
#include "conv_attrs.h"
#include "conv_group.h"
#include "conv3d.h"

/* ---- attributes ---- */

/* Up to two ints; a single value applies to both (model.json's int or pair). */
static void attr_pair(const hwt_graph *g, int op, const char *key, int dflt, int out[2]) {
  int64_t v[2] = {dflt, dflt};
  int n = hwt_graph_op_get_ints(g, op, key, v, 2);
  if (n == 1) v[1] = v[0];
  out[0] = (int)v[0];
  out[1] = (int)v[1];
}

/* -1 when absent. */
static int attr_int(const hwt_graph *g, int op, const char *key) {
  int64_t v = -1;
  return hwt_graph_op_get_ints(g, op, key, &v, 1) >= 1 ? (int)v : -1;
}

/* A string attribute (int array of character codes) into buf. */
static int attr_str(const hwt_graph *g, int op, const char *key, char *buf, size_t n) {
  int64_t codes[64];
  int len = hwt_graph_op_get_ints(g, op, key, codes, 64);
  if (len < 0 || (size_t)len >= n || len > 64) return HWT_EINVAL;
  for (int i = 0; i < len; i++) buf[i] = (char)codes[i];
  buf[len] = 0;
  return HWT_OK;
}

/* ---- conv2d ---- */

typedef struct {
  hwt_conv_plan plan;
  float *w_packed; /* NCHW: packed at prepare; NULL: read the input as is */
  int pack_per_run; /* NCHW weights that are not a param: packed by each share */
  hwt_conv_group *grp; /* group > 1: everything else unused */
  /* precision "bf16" (issue #43): the bf16 CONV (hwtune/bconv.h) on the
   * weights rounded and packed once here; NULL for fp32, the default. */
  void *bpacked;
  hwt_bconv_plan bplan;
} conv_state;

/* The residual (4th input), when there is one, has the output's shape. */
static int residual_ok(const hwt_op_ctx *ctx) {
  if (ctx->n_in != 4) return 1;
  const hwt_graph *g = ctx->g;
  const int *in = hwt_graph_op_inputs(g, ctx->op), *out = hwt_graph_op_outputs(g, ctx->op);
  int nd = hwt_graph_tensor_ndim(g, in[3]);
  const int64_t *rs = hwt_graph_tensor_shape(g, in[3]), *ys = hwt_graph_tensor_shape(g, out[0]);
  int same = nd == hwt_graph_tensor_ndim(g, out[0]);
  for (int i = 0; same && i < nd; i++) same = rs[i] == ys[i];
  return same;
}

static int grouped_prepare(hwt_op_ctx *ctx, const hwt_conv_desc *d, int group, int wic,
                           int bn, char *err, size_t errlen) {
  if (d->C % group || d->K % group || wic * group != d->C) {
    snprintf(err, errlen, "group %d does not fit C=%d, K=%d and weights of %d input channels",
             group, d->C, d->K, wic);
    return HWT_EINVAL;
  }
  if (!residual_ok(ctx)) {
    snprintf(err, errlen, "conv2d residual must have the output's shape");
    return HWT_EINVAL;
  }
  conv_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  size_t ws = 0;
  int st = hwt_ops_conv_group_prepare(ctx, d, group, bn, &s->grp, &ws, err, errlen);
  if (st < 0) {
    free(s);
    return st;
  }
  int OH = 0, OW = 0;
  hwt_conv_out_dims(d, &OH, &OW);
  return hwt_ops_prepared(ctx, s, ws,
                          2.0 * d->N * d->K * OH * OW * (d->C / group) * d->R * d->S);
}

/* precision "bf16": the variant the op's ISA gives (AVX512_BF16 where
 * CPUID has it, else the portable C one: hwtune/bgemm.h), the weights
 * (constant) rounded to bf16 and packed once. The fp32 template's knob
 * attributes do not apply. */
static int conv_bf16_prepare(hwt_op_ctx *ctx, const hwt_conv_desc *d, char *err, size_t errlen) {
  const int w = hwt_graph_op_inputs(ctx->g, ctx->op)[1];
  if (!(ctx->const_in >> 1 & 1) && hwt_graph_tensor_kind(ctx->g, w) != HWT_TENSOR_PARAM)
    return hwt_ops_fail(err, errlen, ctx, "precision bf16 needs w to be a weight (param)");
  if (!residual_ok(ctx))
    return hwt_ops_fail(err, errlen, ctx, "conv2d residual must have the output's shape");
  conv_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  const int isa = hwt_bgemm_variant_for(ctx->isa);
  const int st = isa < 0 ? isa : hwt_bconv_plan_make(d, (hwt_isa)isa, &s->bplan);
  if (st < 0) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "no bf16 CONV plan");
  }
  const size_t bytes = (s->bplan.packed_w_bytes + 63) / 64 * 64;
  if (!(s->bpacked = aligned_alloc(64, bytes ? bytes : 64))) {
    free(s);
    return HWT_ENOMEM;
  }
  hwt_bconv_pack_w(&s->bplan, ctx->in[1], s->bpacked);
  return hwt_ops_prepared(ctx, s, (s->bplan.ws_bytes + 63) / 64 * 16,
                          2.0 * d->N * d->K * s->bplan.OH * s->bplan.OW * d->C * d->R * d->S);
}

static int conv_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  const int op = ctx->op, *in = hwt_graph_op_inputs(g, op);
  char layout[16] = "NCHW";
  if (hwt_graph_op_attr_kind(g, op, "layout") != HWT_ATTR_NONE &&
      attr_str(g, op, "layout", layout, sizeof layout) < 0) {
    snprintf(err, errlen, "bad layout attribute");
    return HWT_EINVAL;
  }
  int blocked = strcmp(layout, "NCHWc") == 0;
  if (!blocked && strcmp(layout, "NCHW") != 0) {
    snprintf(err, errlen, "unknown layout \"%s\" (NCHW or NCHWc)", layout);
    return HWT_EINVAL;
  }
  if (ctx->n_in < 2 || ctx->n_in > 4 || ctx->n_out != 1 ||
      hwt_graph_tensor_ndim(g, in[0]) != (blocked ? 5 : 4) ||
      (hwt_graph_tensor_ndim(g, in[1]) != (blocked ? 6 : 4) &&
       !(blocked && attr_int(g, op, "group") > 1))) {
    snprintf(err, errlen, "conv2d %s takes x, w[, bias[, residual]] of ranks %d, %d", layout,
             blocked ? 5 : 4, blocked ? 6 : 4);
    return HWT_EINVAL;
  }
  const int64_t *x = hwt_graph_tensor_shape(g, in[0]), *w = hwt_graph_tensor_shape(g, in[1]);
  hwt_conv_desc d = {0};
  hwt_conv_params p = {0};
  int stride[2], pad[2], pad_end[2], dil[2];
  attr_pair(g, op, "stride", 1, stride);
  attr_pair(g, op, "padding", 0, pad);
  attr_pair(g, op, "dilation", 1, dil);
  /* padding_end: the bottom/right zeros when they differ from padding. */
  pad_end[0] = pad[0], pad_end[1] = pad[1];
  if (hwt_graph_op_attr_kind(g, op, "padding_end") != HWT_ATTR_NONE)
    attr_pair(g, op, "padding_end", 0, pad_end);
  d.N = (int)x[0];
  d.H = (int)x[2];
  d.W = (int)x[3];
  d.R = (int)w[2];
  d.S = (int)w[3];
  d.stride_h = stride[0];
  d.stride_w = stride[1];
  d.pad_h = pad[0];
  d.pad_w = pad[1];
  d.pad_h_end = pad_end[0];
  d.pad_w_end = pad_end[1];
  d.dil_h = dil[0];
  d.dil_w = dil[1];
  d.relu = attr_int(g, op, "relu") > 0;
  /* SiLU / HardSwish after bias and residual (graph/ops/conv.py's act). */
  if (hwt_graph_op_attr_kind(g, op, "act") != HWT_ATTR_NONE) {
    d.act = hwt_ops_str_is(ctx, "act", "silu", 0)         ? HWT_CONV_ACT_SILU
            : hwt_ops_str_is(ctx, "act", "hard_swish", 0) ? HWT_CONV_ACT_HARD_SWISH
                                                          : -1;
    if (d.act < 0 || d.relu)
      return hwt_ops_fail(err, errlen, ctx, "act must be silu or hard_swish, without relu");
  }
  const int group = attr_int(g, op, "group") > 1 ? attr_int(g, op, "group") : 1;
  const int bf16 = hwt_ops_str_is(ctx, "precision", "bf16", 0);
  if (!bf16 && !hwt_ops_str_is(ctx, "precision", "fp32", 1))
    return hwt_ops_fail(err, errlen, ctx, "precision must be fp32 or bf16");
  if (bf16 && (blocked || group > 1))
    return hwt_ops_fail(err, errlen, ctx, "precision bf16 needs a dense (group 1) NCHW conv2d");
  if (group > 1) {
    /* NCHWc: a depthwise conv in its input's block, weights [C][1][R][S]. */
    if (blocked && hwt_graph_tensor_ndim(g, in[1]) != 4) {
      snprintf(err, errlen, "a grouped NCHWc conv2d takes [C, 1, KH, KW] weights");
      return HWT_EINVAL;
    }
    d.C = (int)(blocked ? x[1] * x[4] : x[1]);
    d.K = (int)w[0];
    return grouped_prepare(ctx, &d, group, (int)w[1], blocked ? (int)x[4] : 0, err, errlen);
  }
  /* ReLU6 / clip(0, max) in the epilogue (graph/ops/conv.py checks relu and
   * max > 0). */
  if (hwt_graph_op_attr_kind(g, op, "relu_max") != HWT_ATTR_NONE) {
    const double hi = hwt_ops_float(ctx, "relu_max", 0.0);
    if (!d.relu || !(hi > 0.0)) {
      snprintf(err, errlen, "relu_max needs relu and must be positive");
      return HWT_EINVAL;
    }
    d.relu_max = (float)hi;
  }
  if (blocked) {
    p.ic_bn = (int)x[4];
    p.oc_bn = (int)w[5];
    d.C = (int)(x[1] * x[4]);
    d.K = (int)(w[0] * w[5]);
  } else {
    d.C = (int)x[1];
    d.K = (int)w[0];
  }
  if (bf16) return conv_bf16_prepare(ctx, &d, err, errlen);
  conv_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  /* NCHW runs the NCHW[x]c template too (staging and transposing inside
   * the kernel, so no layout ops): GoogleNet-small spent 511 of 523 ms in
   * the direct kernel. Knob attributes override the default one by one;
   * with none, plan_make may fall back to the direct kernel for shapes the
   * template refuses. */
  int wino_set = 0;
  const int given = hwt_ops_conv_knobs(ctx, &d, blocked, &p, &wino_set);
  if (given < 0) {
    free(s);
    snprintf(err, errlen, "no default template parameters (%d)", given);
    return given;
  }
  const hwt_conv_params *pp = given ? &p : NULL;
  int st = hwt_conv_plan_make(&d, blocked ? HWT_CONV_NCHWC : HWT_CONV_NCHW, pp, ctx->isa,
                              ctx->max_threads, &s->plan);
  if (st < 0) {
    free(s);
    snprintf(err, errlen,
             "the CONV kernel refuses N=%d C=%d %dx%d K=%d %dx%d stride %d,%d pad %d,%d"
             " end %d,%d dilation %d,%d ic_bn=%d oc_bn=%d reg_n=%d unroll_ker=%d reg_h=%d"
             " winograd=%d (%d)",
             d.N, d.C, d.H, d.W, d.K, d.R, d.S, d.stride_h, d.stride_w, d.pad_h, d.pad_w,
             d.pad_h_end, d.pad_w_end, d.dil_h, d.dil_w, p.ic_bn, p.oc_bn, p.reg_n,
             p.unroll_ker, p.reg_h, p.winograd, st);
    return st;
  }
  /* The residual is added in the epilogue: it must have the output's shape. */
  if (!residual_ok(ctx)) {
    free(s);
    snprintf(err, errlen, "conv2d residual must have the output's shape");
    return HWT_EINVAL;
  }
  /* NCHWc weights already arrive in the template's OIHW[i]i[o]o layout
   * (model.json's blocked weight tensor, possibly made by a layout_transform
   * op): read in place. NCHW weights are packed once, which needs them
   * constant. */
  size_t pack_ws = 0;
  const int w_const = (int)(ctx->const_in >> 1 & 1) ||
                      hwt_graph_tensor_kind(g, in[1]) == HWT_TENSOR_PARAM;
  if (s->plan.p.winograd && !w_const &&
      (blocked || (!wino_set && (long)d.N * s->plan.OH * s->plan.OW <
                                    HWT_OPS_WINO_PER_RUN_PIXELS * ctx->max_threads))) {
    /* Winograd transforms the weights once, at prepare (into memory of
     * their own); NCHWc weights that change between runs keep the direct
     * template. NCHW ones are transformed per run, below, like the direct
     * template's packing, where the CONV has the outputs to pay for it --
     * or where the winograd knob says so: a tuned value was measured with
     * per-run weights (tuners/conv_local.py, per_run_weights), which
     * decides better than the pixel count. */
    p = s->plan.p;
    p.winograd = 0;
    if ((st = hwt_conv_plan_make(&d, s->plan.layout, &p, ctx->isa, ctx->max_threads,
                                 &s->plan)) < 0) {
      free(s);
      snprintf(err, errlen, "the CONV kernel refuses the direct template (%d)", st);
      return st;
    }
  }
  if (s->plan.nhwc_gemm) {
    /* A 1x1 NCHWc CONV in one block of channels runs as a GEMM whose B is
     * the blocked weights: packed once when constant, else by each share
     * per run, as NCHW weights below. */
    if (!w_const) {
      pack_ws = (s->plan.w_floats + 15) / 16 * 16;
    } else {
      s->w_packed = aligned_alloc(64, (s->plan.w_floats * sizeof(float) + 63) / 64 * 64);
      st = s->w_packed ? hwt_conv_pack_blocked_weights(&s->plan, ctx->in[1], s->w_packed)
                       : HWT_ENOMEM;
      if (st < 0) {
        free(s->w_packed);
        free(s);
        snprintf(err, errlen, "packing the CONV weights failed (%d)", st);
        return st;
      }
    }
  } else if (!blocked && !w_const) {
    /* Weights that change between runs (a training step's): each share
     * packs its own copy into its workspace before computing, since no
     * share may wait for another's packing. That repeats the packing nth
     * times, a copy of the weights each: ResNet-18's largest (2.4M floats)
     * beside its 231M-FLOP conv. Not yet measured against a separate
     * packing op. Winograd's packing is its weight transform (16/9 the
     * floats). */
    pack_ws = (s->plan.w_floats + 15) / 16 * 16;
  } else if (!blocked || s->plan.p.winograd) {
    /* Packed once: NCHW weights, and Winograd's transformed ones (NCHWc's
     * blocked weights through a plain copy first). */
    float *plain = blocked ? malloc((size_t)d.K * d.C * 9 * sizeof(float)) : NULL;
    s->w_packed = aligned_alloc(64, (s->plan.w_floats * sizeof(float) + 63) / 64 * 64);
    if ((blocked && !plain) || !s->w_packed) {
      free(plain);
      free(s->w_packed);
      free(s);
      return HWT_ENOMEM;
    }
    if (blocked) hwt_layout_blocked_to_oihw(d.K, d.C, 3, 3, p.ic_bn, p.oc_bn, ctx->in[1], plain);
    st = hwt_conv_pack_weights(&s->plan, blocked ? plain : ctx->in[1], s->w_packed);
    free(plain);
    if (st < 0) {
      free(s->w_packed);
      free(s);
      snprintf(err, errlen, "packing the CONV weights failed (%d)", st);
      return st;
    }
  }
  s->pack_per_run = pack_ws != 0;
  return hwt_ops_prepared(ctx, s, pack_ws + s->plan.ws_floats,
                          2.0 * d.N * d.K * s->plan.OH * s->plan.OW * d.C * d.R * d.S);
}

static void conv_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const conv_state *s = ctx->state;
  if (s->grp) {
    hwt_ops_conv_group_run(ctx, s->grp, ws, tid, nth);
    return;
  }
  if (s->bpacked) {
    hwt_bconv_run_part(&s->bplan, ctx->in[0], s->bpacked, ctx->n_in >= 3 ? ctx->in[2] : NULL,
                       ctx->n_in == 4 ? ctx->in[3] : NULL, ctx->out[0], ws, tid, nth);
    return;
  }
  const float *w = s->w_packed ? s->w_packed : ctx->in[1];
  if (s->pack_per_run && s->plan.nhwc_gemm) {
    hwt_conv_pack_blocked_weights(&s->plan, ctx->in[1], ws);
    w = ws;
    ws += (s->plan.w_floats + 15) / 16 * 16;
  } else if (s->pack_per_run) {
    hwt_conv_pack_weights(&s->plan, ctx->in[1], ws);
    w = ws;
    ws += (s->plan.w_floats + 15) / 16 * 16;
  }
  hwt_conv_run_part_res(&s->plan, ctx->in[0], w, ctx->n_in >= 3 ? ctx->in[2] : NULL,
                        ctx->n_in == 4 ? ctx->in[3] : NULL, ctx->out[0], ws, tid, nth);
}

static void conv_release(hwt_op_ctx *ctx) {
  conv_state *s = ctx->state;
  if (s) free(s->w_packed);
  if (s) free(s->bpacked);
  if (s) hwt_ops_conv_group_free(s->grp);
  free(s);
  ctx->state = NULL;
}

/* ---- layout_transform ---- */

typedef struct {
  int weight;           /* 0: data NCHW[x]c; 1: weights OIHW[i]i[o]o */
  int N, C;             /* data: batch and logical channels */
  long HW;
  int src_bn, dst_bn;   /* data blocks, 0 = plain */
  int K, R, S;          /* weights: logical O, kernel (C is I) */
  int si, so, di, dO;   /* weight blocks, 0 = plain */
  size_t plain_floats;  /* weights re-blocked through a plain copy in ws */
} layout_state;

/* "NCHW" / "NCHW<b>c" -> data block; "OIHW" / "OIHW<i>i<o>o" -> weight blocks. */
static int parse_layout(const char *s, int *weight, int *b0, int *b1) {
  int n = 0;
  *b0 = *b1 = 0;
  if (strncmp(s, "NCHW", 4) == 0) {
    *weight = 0;
    if (!s[4]) return HWT_OK;
    return sscanf(s + 4, "%dc%n", b0, &n) == 1 && !s[4 + n] && *b0 > 0 ? HWT_OK : HWT_EINVAL;
  }
  if (strncmp(s, "OIHW", 4) == 0) {
    *weight = 1;
    if (!s[4]) return HWT_OK;
    return sscanf(s + 4, "%di%do%n", b0, b1, &n) == 2 && !s[4 + n] && *b0 > 0 && *b1 > 0
               ? HWT_OK
               : HWT_EINVAL;
  }
  return HWT_EINVAL;
}

static int layout_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  const int *in = hwt_graph_op_inputs(g, ctx->op);
  char src[32], dst[32];
  layout_state ls = {0};
  int w2 = 0;
  if (ctx->n_in != 1 || ctx->n_out != 1 || attr_str(g, ctx->op, "src", src, sizeof src) < 0 ||
      attr_str(g, ctx->op, "dst", dst, sizeof dst) < 0 ||
      parse_layout(src, &ls.weight, &ls.si, &ls.so) < 0 ||
      parse_layout(dst, &w2, &ls.di, &ls.dO) < 0 || w2 != ls.weight) {
    snprintf(err, errlen, "layout_transform needs one input and src/dst layouts of one family");
    return HWT_EINVAL;
  }
  const int64_t *x = hwt_graph_tensor_shape(g, in[0]);
  int nd = hwt_graph_tensor_ndim(g, in[0]);
  if (!ls.weight) {
    ls.src_bn = ls.si;
    ls.dst_bn = ls.di;
    if (nd != (ls.src_bn ? 5 : 4)) goto bad_rank;
    ls.N = (int)x[0];
    ls.C = (int)(ls.src_bn ? x[1] * x[4] : x[1]);
    ls.HW = (long)(x[2] * x[3]);
    if (hwt_layout_check(ls.N, ls.C, ls.HW, ls.src_bn, ls.dst_bn) < 0) goto bad_block;
  } else {
    if (nd != (ls.si ? 6 : 4)) goto bad_rank;
    ls.K = (int)(ls.si ? x[0] * x[5] : x[0]);
    ls.C = (int)(ls.si ? x[1] * x[4] : x[1]);
    ls.R = (int)x[2];
    ls.S = (int)x[3];
    if (ls.di && (ls.C % ls.di || ls.K % ls.dO)) goto bad_block;
    if (ls.si && ls.di) ls.plain_floats = (size_t)ls.K * ls.C * ls.R * ls.S;
  }
  layout_state *s = malloc(sizeof *s);
  if (!s) return HWT_ENOMEM;
  *s = ls;
  ctx->state = s;
  ctx->ws_floats = ls.plain_floats;
  return HWT_OK;
bad_rank:
  snprintf(err, errlen, "input rank %d does not match layout \"%s\"", nd, src);
  return HWT_EINVAL;
bad_block:
  snprintf(err, errlen, "blocks of \"%s\" -> \"%s\" do not divide the channels", src, dst);
  return HWT_EINVAL;
}

static void layout_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const layout_state *s = ctx->state;
  if (!s->weight) {
    hwt_layout_run_part(s->N, s->C, s->HW, s->src_bn, s->dst_bn, ctx->in[0], ctx->out[0], tid,
                        nth, ctx->isa);
    return;
  }
  /* Weight transforms run once per model in practice (constant folding is
   * the planner's future job): thread 0 does all of it. */
  if (tid != 0) return;
  const size_t n = (size_t)s->K * s->C * s->R * s->S;
  if (!s->si && !s->di)
    memcpy(ctx->out[0], ctx->in[0], n * sizeof(float));
  else if (!s->si)
    hwt_layout_oihw_to_blocked(s->K, s->C, s->R, s->S, s->di, s->dO, ctx->in[0], ctx->out[0]);
  else if (!s->di)
    hwt_layout_blocked_to_oihw(s->K, s->C, s->R, s->S, s->si, s->so, ctx->in[0], ctx->out[0]);
  else {
    hwt_layout_blocked_to_oihw(s->K, s->C, s->R, s->S, s->si, s->so, ctx->in[0], ws);
    hwt_layout_oihw_to_blocked(s->K, s->C, s->R, s->S, s->di, s->dO, ws, ctx->out[0]);
  }
}

static const hwt_op_impl CONV[] = {
    {"conv2d", conv_prepare, conv_run, conv_release},
    {"layout_transform", layout_prepare, layout_run, hwt_ops_free_state},
    {"conv3d", hwt_ops_conv3d_prepare, hwt_ops_conv3d_run, hwt_ops_conv3d_release},
};

HWT_OPS_FAMILY(hwt_ops_conv, CONV)
