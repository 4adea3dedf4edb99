/* Grouped conv2d (group > 1, NCHW), two ways:
 *
 * - depthwise (group == C, K = C * multiplier), and groups of 2, 4 or 8
 *   channels in and out on vector ISAs (but not a group as wide as the
 *   vector at stride 1: hwt_gconv_plan_make): the depthwise kernel family
 *   (hwtune/dwconv.h), which reads the weights as given;
 * - any other group count (ResNeXt's 32 groups of 4..32 channels, RegNet's
 *   groups of 8, ShuffleNet): the dense CONV template once per (image,
 *   group), on the group's channel slices in place (an image's group of
 *   channels is contiguous in NCHW), with one plan of N = 1 for every
 *   group and each group's weights packed once at prepare. The N x group
 *   items are each cut into `sub` parts, enough that every thread has one
 *   (items >= threads: whole items), and the parts are shared out like the
 *   template's own units: a contiguous range per thread, no barrier.
 *
 * Weights that change between runs (not a param or constant) are read in
 * place by the depthwise kernel; the per-group path packs the group's
 * weights into the thread's workspace whenever its share enters a new
 * group (as conv.c's per-run packing does for the whole tensor). */
#include <math.h>
#include "conv_group.h"
#include "hwtune/dwconv.h"

/* Workspace pieces start on 64-byte lines. */
#define ALIGN_FLOATS(n) (((n) + 15) & ~(size_t)15)

struct hwt_conv_group {
  int dw;                /* 1: the depthwise kernel */
  hwt_dwconv_plan dwp;
  hwt_conv_plan plan;    /* one group of one image */
  int group, items, sub; /* items = N x group, each in sub parts */
  size_t gw_floats;      /* packed weight floats per group (plan.w_floats, aligned) */
  float *w_packed;       /* group x gw_floats, or NULL: packed per run */
  int N, C, K;
  size_t x_group, y_group; /* floats of one group's input / output channels */
};

void hwt_ops_conv_group_free(hwt_conv_group *s) {
  if (s) free(s->w_packed);
  free(s);
}

int hwt_ops_conv_group_prepare(const hwt_op_ctx *ctx, const hwt_conv_desc *d, int group,
                               int bn, hwt_conv_group **out, size_t *ws_floats, char *err,
                               size_t errlen) {
  hwt_conv_group *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->group = group;
  s->N = d->N;
  s->C = d->C;
  s->K = d->K;
  int st;
  /* ReLU6's clamp (depthwise convs only: graph/ops/conv.py). */
  const double relu_max = hwt_graph_op_attr_kind(ctx->g, ctx->op, "relu_max") != HWT_ATTR_NONE
                              ? hwt_ops_float(ctx, "relu_max", INFINITY)
                              : INFINITY;
  if (bn > 0) {
    if (group != d->C || (st = hwt_dwconv_plan_nchwc(d, bn, ctx->isa, &s->dwp)) < 0) {
      free(s);
      snprintf(err, errlen, "a grouped NCHW%dc conv2d must be depthwise with one filter per "
               "channel (kernel width up to 64): group %d, C=%d, K=%d", bn, group, d->C, d->K);
      return HWT_EINVAL;
    }
    s->dw = 1;
    s->dwp.relu_max = (float)relu_max;
    *out = s;
    *ws_floats = s->dwp.ws_floats;
    return HWT_OK;
  }
  if ((group == d->C && hwt_dwconv_plan_make(d, ctx->isa, &s->dwp) == HWT_OK) ||
      hwt_gconv_plan_make(d, group, ctx->isa, &s->dwp) == HWT_OK) {
    s->dw = 1;
    s->dwp.relu_max = (float)relu_max;
    *out = s;
    *ws_floats = s->dwp.ws_floats;
    return HWT_OK;
  }
  if (relu_max < INFINITY) {
    free(s);
    snprintf(err, errlen, "relu_max needs the depthwise kernel, which refuses this conv "
             "(kernel width %d > 64)", d->S);
    return HWT_EINVAL;
  }
  hwt_conv_desc gd = *d;
  gd.N = 1;
  gd.C = d->C / group;
  gd.K = d->K / group;
  s->items = d->N * group;
  s->sub = (ctx->max_threads + s->items - 1) / s->items;
  if ((st = hwt_conv_plan_make(&gd, HWT_CONV_NCHW, NULL, ctx->isa, s->sub, &s->plan)) < 0) {
    free(s);
    snprintf(err, errlen,
             "the CONV kernel refuses a group of C=%d %dx%d K=%d %dx%d stride %d,%d (%d)", gd.C,
             gd.H, gd.W, gd.K, gd.R, gd.S, gd.stride_h, gd.stride_w, st);
    return st;
  }
  s->x_group = (size_t)gd.C * d->H * d->W;
  s->y_group = (size_t)gd.K * s->plan.OH * s->plan.OW;
  s->gw_floats = ALIGN_FLOATS(s->plan.w_floats);
  const int *in = hwt_graph_op_inputs(ctx->g, ctx->op);
  const int w_const = (int)(ctx->const_in >> 1 & 1) ||
                      hwt_graph_tensor_kind(ctx->g, in[1]) == HWT_TENSOR_PARAM;
  if (w_const) {
    s->w_packed = aligned_alloc(64, s->gw_floats * group * sizeof(float));
    if (!s->w_packed) {
      free(s);
      return HWT_ENOMEM;
    }
    const size_t wg = (size_t)gd.K * gd.C * gd.R * gd.S;
    for (int gi = 0; gi < group; gi++)
      if ((st = hwt_conv_pack_weights(&s->plan, ctx->in[1] + gi * wg,
                                      s->w_packed + gi * s->gw_floats)) < 0) {
        hwt_ops_conv_group_free(s);
        snprintf(err, errlen, "packing the CONV weights failed (%d)", st);
        return st;
      }
  }
  *out = s;
  *ws_floats = (s->w_packed ? 0 : s->gw_floats) + s->plan.ws_floats;
  return HWT_OK;
}

void hwt_ops_conv_group_run(const hwt_op_ctx *ctx, const hwt_conv_group *s, float *ws, int tid,
                            int nth) {
  const float *x = ctx->in[0], *w = ctx->in[1];
  const float *bias = ctx->n_in >= 3 ? ctx->in[2] : NULL;
  const float *res = ctx->n_in == 4 ? ctx->in[3] : NULL;
  float *y = ctx->out[0];
  if (s->dw) {
    hwt_dwconv_run_part(&s->dwp, x, w, bias, res, y, ws, tid, nth);
    return;
  }
  const long units = (long)s->items * s->sub;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  const int kg = s->K / s->group;
  const size_t wg = (size_t)kg * (s->C / s->group) * s->plan.d.R * s->plan.d.S;
  float *pack = s->w_packed ? NULL : ws;
  float *tws = s->w_packed ? ws : ws + s->gw_floats;
  int packed = -1; /* the group whose weights `pack` holds */
  for (long u = lo; u < hi; u++) {
    const long item = u / s->sub;
    const int part = (int)(u % s->sub), gi = (int)(item % s->group);
    const long n = item / s->group;
    const float *wp = s->w_packed ? s->w_packed + gi * s->gw_floats : pack;
    if (!s->w_packed && packed != gi) {
      hwt_conv_pack_weights(&s->plan, w + gi * wg, pack);
      packed = gi;
    }
    const size_t xo = ((size_t)n * s->group + gi) * s->x_group;
    const size_t yo = ((size_t)n * s->group + gi) * s->y_group;
    hwt_conv_run_part_res(&s->plan, x + xo, wp, bias ? bias + (size_t)gi * kg : NULL,
                          res ? res + yo : NULL, y + yo, tws, part, s->sub);
  }
}
