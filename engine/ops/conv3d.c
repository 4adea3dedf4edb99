/* conv3d on NCDHW tensors (torchvision's video classifiers) through the
 * 2-D CONV template (hwtune/conv.h):
 *
 *   y[n, :, t] = conv2d(xs(n, t), W2),  xs(n, t) = the KD input frames
 *   t*sd + a*dd - pd (a < KD) stacked along the channels, a frame outside
 *   the input all zeros; W2[k][a*C + c] = W[k][c][a].
 *
 * A 2-D plan of N = 1, KD*C input channels and K/ksplit output channels
 * serves every (image, output frame, slice of ksplit output channels) unit;
 * W2 is packed once per slice at prepare. A thread stages its unit's
 * stacked frames in its workspace (an NCDHW frame's channels are D*H*W
 * apart, the plan reads them H*W apart), runs the plan on one thread into
 * its workspace and copies the K/ksplit planes to their frame of y. Units
 * are shared out as contiguous ranges, with no barrier: the output slices
 * exist so that a clip of fewer frames than threads (r3d_18's last stages
 * have OD = 1) still keeps every thread busy. A thread whose next unit is
 * the same frame's next slice reuses the staged frames. A residual input
 * (the output's shape) is added, and the ReLU taken, in that copy (the
 * plan's own ReLU when there is none).
 *
 * Taps that read frames in the padding are left out: an output frame's
 * taps inside the input are a contiguous range, and each distinct range
 * (at most KD(KD+1)/2; 3 for a 3-tap kernel with padding 1) has a plan of
 * its own over just those frames, its weights packed at prepare. r3d_18
 * at 16 frames runs its last stage on 2 frames, where the zero frames
 * were a third of the products (on the small 4-frame clips, two thirds of
 * layer3 and layer4's).
 *
 * A time-only kernel (R(2+1)D's 3x1x1) could instead run as one 2-D conv
 * with a [KD, 1] kernel over x[n] read as [C][D][H*W], with no staging and
 * no copy; measured slower than these stacked frames (interleaved, 2
 * threads, avx512, min of 15, under load 3): 144->64 channels over
 * 16x56x56 36.3 vs 30.5 ms, 576->256 over 4x14x14 3.7 vs 3.2 ms,
 * 1152->512 over 2x7x7 1.7 vs 1.4 ms. */
#include <string.h>
#include "conv3d.h"
#include "hwtune/conv.h"

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

/* The frames whose time taps a0..a1-1 fall inside the input. */
typedef struct {
  int a0, a1;
  hwt_conv_plan plan;   /* one slice of one output frame, (a1 - a0) * C channels */
  float *w_packed;      /* ksplit x w_slice */
  size_t w_slice;       /* packed floats per slice (plan.w_floats, aligned) */
} conv3d_variant;

typedef struct {
  conv3d_variant *var;  /* nvar distinct tap ranges */
  int nvar;
  int *tvar;            /* output frame -> its variant, -1: every tap in the padding */
  int relu;
  int N, C, D, H, W, K, KD, OD, OH, OW;
  int sd, pd, dd;       /* stride, front padding, dilation in time */
  int ksplit, kslice;   /* output-channel slices and their width */
  int relu_copy;        /* 1: ReLU after the residual, in the copy to y */
  size_t stage_floats, y_floats; /* workspace pieces (aligned) */
} conv3d_state;

/* A 3-int attribute ([depth, height, width]), def when unset; 1 if malformed. */
static int attr3(const hwt_op_ctx *c, const char *key, int def, int v[3]) {
  v[0] = v[1] = v[2] = def;
  if (hwt_graph_op_attr_kind(c->g, c->op, key) == HWT_ATTR_NONE) return 0;
  int64_t b[4];
  if (hwt_graph_op_get_ints(c->g, c->op, key, b, 4) != 3) return 1;
  for (int i = 0; i < 3; i++) {
    if (b[i] < 0 || b[i] > (1 << 30)) return 1;
    v[i] = (int)b[i];
  }
  return 0;
}

/* The slice count: units (N x OD x ksplit) a multiple of the threads when a
 * divisor of K that keeps slices of at least 16 channels (an AVX-512
 * output block) gets there, else at least one unit per thread. */
static int pick_ksplit(int frames, int K, int nth) {
  if (nth <= 1 || frames % nth == 0) return 1;
  int enough = 0;
  for (int ks = 2; ks <= K / 16; ks++) {
    if (K % ks) continue;
    if ((long)frames * ks % nth == 0) return ks;
    if (!enough && (long)frames * ks >= nth) enough = ks;
  }
  return frames >= nth || !enough ? 1 : enough;
}

int hwt_ops_conv3d_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  const hwt_graph *g = ctx->g;
  const int *in = hwt_graph_op_inputs(g, ctx->op), *outs = hwt_graph_op_outputs(g, ctx->op);
  if (ctx->n_in < 2 || ctx->n_in > 4 || ctx->n_out != 1 || hwt_graph_tensor_ndim(g, in[0]) != 5 ||
      hwt_graph_tensor_ndim(g, in[1]) != 5 || hwt_graph_tensor_ndim(g, outs[0]) != 5)
    return hwt_ops_fail(err, errlen, ctx, "conv3d takes x [N,C,D,H,W], w [K,C,KD,KH,KW][, bias[, residual]]");
  int stride[3], pad[3], pad_end[3], dil[3];
  if (attr3(ctx, "stride", 1, stride) || attr3(ctx, "padding", 0, pad) ||
      attr3(ctx, "dilation", 1, dil))
    return hwt_ops_fail(err, errlen, ctx, "stride, padding and dilation take 3 values");
  memcpy(pad_end, pad, sizeof pad);
  if (attr3(ctx, "padding_end", 0, pad_end) ||
      hwt_graph_op_attr_kind(g, ctx->op, "padding_end") == HWT_ATTR_NONE)
    memcpy(pad_end, pad, sizeof pad);
  if (!(ctx->const_in >> 1 & 1) && hwt_graph_tensor_kind(g, in[1]) != HWT_TENSOR_PARAM)
    return hwt_ops_fail(err, errlen, ctx, "conv3d weights must be a constant (param)");
  const int64_t *x = hwt_graph_tensor_shape(g, in[0]), *w = hwt_graph_tensor_shape(g, in[1]);
  const int64_t *y = hwt_graph_tensor_shape(g, outs[0]);
  if (ctx->n_in == 4) {
    const int64_t *r = hwt_graph_tensor_shape(g, in[3]);
    if (hwt_graph_tensor_ndim(g, in[3]) != 5 || memcmp(r, hwt_graph_tensor_shape(g, outs[0]),
                                                       5 * sizeof *r))
      return hwt_ops_fail(err, errlen, ctx, "the conv3d residual must have the output's shape");
  }
  conv3d_state st = {0};
  st.N = (int)x[0], st.C = (int)x[1], st.D = (int)x[2], st.H = (int)x[3], st.W = (int)x[4];
  st.K = (int)w[0], st.KD = (int)w[2];
  st.sd = stride[0], st.pd = pad[0], st.dd = dil[0];
  st.OD = (int)y[2], st.OH = (int)y[3], st.OW = (int)y[4];
  if (w[1] != x[1] || y[0] != x[0] || y[1] != w[0] || st.sd < 1 || st.dd < 1 || st.OD < 1 ||
      (st.D + pad[0] + pad_end[0] - (st.KD - 1) * st.dd - 1) / st.sd + 1 != st.OD)
    return hwt_ops_fail(err, errlen, ctx, "conv3d shapes do not agree");
  st.ksplit = pick_ksplit(st.N * st.OD, st.K, ctx->max_threads);
  st.kslice = st.K / st.ksplit;
  hwt_conv_desc d = {0};
  d.N = 1, d.H = st.H, d.W = st.W;
  d.K = st.kslice, d.R = (int)w[3], d.S = (int)w[4];
  d.stride_h = stride[1], d.stride_w = stride[2];
  d.pad_h = pad[1], d.pad_w = pad[2], d.pad_h_end = pad_end[1], d.pad_w_end = pad_end[2];
  d.dil_h = dil[1], d.dil_w = dil[2];
  const int relu = hwt_ops_int(ctx, "relu", 0) != 0;
  st.relu = relu;
  st.relu_copy = relu && ctx->n_in == 4;
  d.relu = relu && !st.relu_copy;
  conv3d_state *s = calloc(1, sizeof *s);
  int *tvar = malloc(sizeof(int) * st.OD);
  conv3d_variant *var = calloc((size_t)st.KD * (st.KD + 1) / 2, sizeof *var);
  if (!s || !tvar || !var) {
    free(s);
    free(tvar);
    free(var);
    return HWT_ENOMEM;
  }
  *s = st;
  s->tvar = tvar;
  s->var = var;
  /* Each output frame's taps inside the input: a contiguous range a0..a1
   * (the frame index grows with the tap); one plan per distinct range. */
  for (int t = 0; t < st.OD; t++) {
    int a0 = st.KD, a1 = 0;
    for (int a = 0; a < st.KD; a++) {
      const long dz = (long)t * st.sd + (long)a * st.dd - st.pd;
      if (dz >= 0 && dz < st.D) {
        a0 = a < a0 ? a : a0;
        a1 = a + 1;
      }
    }
    tvar[t] = -1;
    if (a0 >= a1) continue; /* every tap in the padding: the bias alone */
    for (int v = 0; v < s->nvar; v++)
      if (var[v].a0 == a0 && var[v].a1 == a1) tvar[t] = v;
    if (tvar[t] < 0) {
      var[s->nvar].a0 = a0;
      var[s->nvar].a1 = a1;
      tvar[t] = s->nvar++;
    }
  }
  const size_t rs = (size_t)d.R * d.S;
  size_t stage = 0, plan_ws = 0;
  int rc = HWT_OK;
  for (int v = 0; v < s->nvar && rc >= 0; v++) {
    conv3d_variant *cv = &var[v];
    d.C = (cv->a1 - cv->a0) * st.C;
    rc = hwt_conv_plan_make(&d, HWT_CONV_NCHW, NULL, ctx->isa, 1, &cv->plan);
    if (rc < 0 || cv->plan.OH != st.OH || cv->plan.OW != st.OW) {
      snprintf(err, errlen, "op \"%s\": the CONV kernel refuses a frame of C=%d %dx%d K=%d "
               "%dx%d stride %d,%d pad %d,%d end %d,%d dilation %d,%d (%d)",
               hwt_graph_op_name(g, ctx->op), d.C, d.H, d.W, d.K, d.R, d.S, d.stride_h,
               d.stride_w, d.pad_h, d.pad_w, d.pad_h_end, d.pad_w_end, d.dil_h, d.dil_w, rc);
      rc = rc < 0 ? rc : HWT_EINVAL;
      break;
    }
    cv->w_slice = ALIGN16(cv->plan.w_floats);
    const size_t taps = (size_t)d.C * rs; /* one output channel's W2 */
    float *w2 = malloc(sizeof(float) * taps * st.K);
    cv->w_packed = aligned_alloc(64, sizeof(float) * cv->w_slice * st.ksplit);
    if (!w2 || !cv->w_packed) {
      free(w2);
      rc = HWT_ENOMEM;
      break;
    }
    /* W2[k][(a - a0)*C + c] = W[k][c][a] for the range's taps. */
    for (int k = 0; k < st.K; k++)
      for (int c = 0; c < st.C; c++)
        for (int a = cv->a0; a < cv->a1; a++)
          memcpy(w2 + k * taps + ((size_t)(a - cv->a0) * st.C + c) * rs,
                 ctx->in[1] + (((size_t)k * st.C + c) * st.KD + a) * rs, rs * sizeof(float));
    for (int ks = 0; ks < st.ksplit && rc >= 0; ks++)
      rc = hwt_conv_pack_weights(&cv->plan, w2 + ks * st.kslice * taps,
                                 cv->w_packed + ks * cv->w_slice);
    free(w2);
    if (rc < 0) {
      snprintf(err, errlen, "op \"%s\": packing the conv3d weights failed (%d)",
               hwt_graph_op_name(g, ctx->op), rc);
      break;
    }
    stage = stage > (size_t)d.C ? stage : (size_t)d.C;
    plan_ws = plan_ws > cv->plan.ws_floats ? plan_ws : cv->plan.ws_floats;
  }
  if (rc < 0) {
    ctx->state = s;
    hwt_ops_conv3d_release(ctx);
    return rc;
  }
  s->stage_floats = ALIGN16(stage * st.H * st.W);
  s->y_floats = ALIGN16((size_t)st.kslice * st.OH * st.OW);
  const double flops =
      2.0 * st.N * st.K * st.OD * st.OH * st.OW * (double)st.C * st.KD * (double)rs;
  return hwt_ops_prepared(ctx, s, s->stage_floats + s->y_floats + plan_ws, flops);
}

void hwt_ops_conv3d_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const conv3d_state *s = ctx->state;
  float *stage = ws, *ys = ws + s->stage_floats, *pws = ys + s->y_floats;
  const size_t hw = (size_t)s->H * s->W, ohw = (size_t)s->OH * s->OW;
  const float *x = ctx->in[0], *bias = ctx->n_in >= 3 ? ctx->in[2] : NULL;
  const float *res = ctx->n_in == 4 ? ctx->in[3] : NULL;
  float *y = ctx->out[0];
  int64_t lo, hi;
  hwt_ops_rows((int64_t)s->N * s->OD * s->ksplit, tid, nth, &lo, &hi);
  int64_t staged = -1; /* n * OD + t of the frames in stage */
  for (int64_t u = lo; u < hi; u++) {
    const int64_t frame = u / s->ksplit;
    const int ks = (int)(u % s->ksplit), n = (int)(frame / s->OD), t = (int)(frame % s->OD);
    const int v = s->tvar[t];
    const float *b = bias ? bias + ks * s->kslice : NULL;
    if (v >= 0) {
      const conv3d_variant *cv = &s->var[v];
      if (frame != staged) {
        for (int a = cv->a0; a < cv->a1; a++) {
          const int dz = t * s->sd + a * s->dd - s->pd;
          float *dst = stage + (size_t)(a - cv->a0) * s->C * hw;
          if (dz < 0 || dz >= s->D) { /* a tap between two inside the input (dilation) */
            memset(dst, 0, sizeof(float) * s->C * hw);
            continue;
          }
          for (int c = 0; c < s->C; c++)
            memcpy(dst + c * hw, x + (((size_t)n * s->C + c) * s->D + dz) * hw,
                   sizeof(float) * hw);
        }
        staged = frame;
      }
      hwt_conv_run_part(&cv->plan, stage, cv->w_packed + ks * cv->w_slice, b, ys, pws, 0, 1);
    } else { /* no tap inside the input: the bias, then the epilogue */
      for (int k = 0; k < s->kslice; k++) {
        const float bk = b ? b[k] : 0.0f;
        for (size_t i = 0; i < ohw; i++)
          ys[k * ohw + i] = s->relu && !s->relu_copy && bk < 0.0f ? 0.0f : bk;
      }
    }
    for (int k = 0; k < s->kslice; k++) {
      const size_t at = (((size_t)n * s->K + ks * s->kslice + k) * s->OD + t) * ohw;
      const float *src = ys + k * ohw;
      float *dst = y + at;
      if (!res) {
        memcpy(dst, src, sizeof(float) * ohw);
      } else if (s->relu_copy) {
        for (size_t i = 0; i < ohw; i++) {
          const float val = src[i] + res[at + i];
          dst[i] = val < 0.0f ? 0.0f : val; /* NaN kept, as ONNX Runtime's Relu */
        }
      } else {
        for (size_t i = 0; i < ohw; i++) dst[i] = src[i] + res[at + i];
      }
    }
  }
}

void hwt_ops_conv3d_release(hwt_op_ctx *ctx) {
  conv3d_state *s = ctx->state;
  if (s) {
    for (int v = 0; v < s->nvar; v++) free(s->var[v].w_packed);
    free(s->var);
    free(s->tvar);
  }
  free(s);
  ctx->state = NULL;
}
