/* Pooling op family: pool2d (max/avg window, the vector kernels of
 * kernels/pool/) and global_pool2d, NCHW or NCHW[x]c. Channels are
 * independent, so both layouts are "planes" of H x W positions holding b
 * adjacent channels (b = 1 for NCHW, x for NCHWc). Global averages
 * accumulate in double, as the reference does: a 7x7 plane of mixed-sign
 * values cancels enough to lose float digits. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/pool2d.h"
#include "ops_util.h"

typedef struct {
  int is_max;
  int64_t planes, h, w, b;
} pool_state;

static int read_geometry(hwt_op_ctx *ctx, pool_state *s, char *err, size_t errlen) {
  int x = hwt_ops_in(ctx, 0), y = hwt_ops_out(ctx, 0);
  int blocked = hwt_ops_str_is(ctx, "layout", "NCHWc", 0);
  int rank = hwt_graph_tensor_ndim(ctx->g, x);
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, x);
  if (ctx->n_in != 1 || ctx->n_out != 1 || rank != (blocked ? 5 : 4) ||
      hwt_graph_tensor_ndim(ctx->g, y) != rank)
    return hwt_ops_fail(err, errlen, ctx, "pooling takes one NCHW or NCHWc tensor");
  s->is_max = hwt_ops_str_is(ctx, "mode", "max", 0);
  if (!s->is_max && !hwt_ops_str_is(ctx, "mode", "avg", 0))
    return hwt_ops_fail(err, errlen, ctx, "mode must be max or avg");
  s->planes = xs[0] * xs[1];
  s->h = xs[2];
  s->w = xs[3];
  s->b = blocked ? xs[4] : 1;
  return HWT_OK;
}

/* pool2d: the windowed kernel (kernels/pool/) with the op's geometry. */
static int pool_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state g = {0};
  int rc = read_geometry(ctx, &g, err, errlen);
  if (rc != HWT_OK) return rc;
  hwt_pool2d_desc d = {0};
  int64_t k[2], s[2], p[2] = {0, 0};
  if (hwt_ops_pair(ctx, "kernel", k)) return hwt_ops_fail(err, errlen, ctx, "kernel is missing");
  if (hwt_ops_pair(ctx, "stride", s)) s[0] = k[0], s[1] = k[1];
  hwt_ops_pair(ctx, "padding", p);
  int64_t e[2] = {p[0], p[1]};
  hwt_ops_pair(ctx, "padding_end", e); /* absent: symmetric */
  d.is_max = g.is_max;
  d.include_pad = (int)hwt_ops_int(ctx, "count_include_pad", 0);
  d.planes = g.planes, d.h = g.h, d.w = g.w, d.b = g.b;
  d.kh = k[0], d.kw = k[1], d.sh = s[0], d.sw = s[1];
  d.ph = p[0], d.pw = p[1], d.eh = e[0], d.ew = e[1];
  d.isa = ctx->isa;
  const int ceil_mode = (int)hwt_ops_int(ctx, "ceil_mode", 0);
  const int64_t *ys = hwt_graph_tensor_shape(ctx->g, hwt_ops_out(ctx, 0));
  d.oh = ys[2], d.ow = ys[3];
  rc = hwt_pool2d_check(&d);
  if (rc == HWT_EISA) return hwt_ops_fail(err, errlen, ctx, "the ISA is not supported here");
  if (rc != HWT_OK) return hwt_ops_fail(err, errlen, ctx, "bad window, stride or padding");
  if (d.oh != hwt_pool2d_out_len(d.h, d.kh, d.sh, d.ph, d.eh, ceil_mode) ||
      d.ow != hwt_pool2d_out_len(d.w, d.kw, d.sw, d.pw, d.ew, ceil_mode))
    return hwt_ops_fail(err, errlen, ctx, "output shape does not match the window");
  return hwt_ops_keep(ctx, &d, sizeof d, hwt_pool2d_ws_floats(&d),
                      (double)(d.planes * d.b * d.oh * d.ow * d.kh * d.kw));
}

static void pool_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  hwt_pool2d_run_part(ctx->state, ctx->in[0], ctx->out[0], ws, tid, nth);
}

static int global_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state st = {0};
  int rc = read_geometry(ctx, &st, err, errlen);
  if (rc != HWT_OK) return rc;
  return hwt_ops_keep(ctx, &st, sizeof st, 0, (double)(st.planes * st.b * st.h * st.w));
}

static void global_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool_state *s = ctx->state;
  const int64_t hw = s->h * s->w;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * s->b, tid, nth, &lo, &hi);
  for (int64_t r = lo; r < hi; r++) {
    const float *x = ctx->in[0] + (r / s->b) * hw * s->b + r % s->b;
    if (s->is_max) {
      float m = -INFINITY;
      for (int64_t i = 0; i < hw; i++) {
        float v = x[i * s->b];
        m = (v > m || isnan(v)) ? v : m;
      }
      ctx->out[0][r] = m;
    } else {
      double acc = 0.0;
      for (int64_t i = 0; i < hw; i++) acc += x[i * s->b];
      ctx->out[0][r] = (float)(acc / (double)hw);
    }
  }
}

static const hwt_op_impl k_pool[] = {
    {"pool2d", pool_prepare, pool_run, hwt_ops_free_state},
    {"global_pool2d", global_prepare, global_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_pool, k_pool)
