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

/* pool2d's state: the kernel's geometry; with bytes (x_hwc and y_hwc, set
 * by lowering where a max pool lies on an int8 byte link,
 * hwtune.engine.qlayout) d.planes counts images and d.b their channels,
 * each image's u8 channels-last pixels at the start of its float32 slot. */
typedef struct {
  hwt_pool2d_desc d;
  int bytes;
  int64_t x_image, y_image; /* bytes: one image's float32 slot, in bytes */
} pool2d_state;

/* pool2d: the windowed kernel (kernels/pool/) with the op's geometry. */
static int pool_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state g = {0};
  int rc = read_geometry(ctx, &g, err, errlen);
  if (rc != HWT_OK) return rc;
  const int bytes = hwt_ops_int(ctx, "x_hwc", 0) != 0;
  if (bytes != (hwt_ops_int(ctx, "y_hwc", 0) != 0) || (bytes && (!g.is_max || g.b != 1)))
    return hwt_ops_fail(err, errlen, ctx, "pool2d takes bytes (x_hwc) only as an NCHW max "
                                          "pool with bytes out (y_hwc)");
  const int64_t *xs = hwt_graph_tensor_shape(ctx->g, hwt_ops_in(ctx, 0));
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
  pool2d_state st = {d, bytes, 0, 0};
  if (bytes) {
    st.d.planes = xs[0], st.d.b = xs[1];
    st.x_image = xs[1] * d.h * d.w * (int64_t)sizeof(float);
    st.y_image = xs[1] * d.oh * d.ow * (int64_t)sizeof(float);
  }
  return hwt_ops_keep(ctx, &st, sizeof st, bytes ? 0 : hwt_pool2d_ws_floats(&d),
                      (double)(d.planes * d.b * d.oh * d.ow * d.kh * d.kw));
}

static void pool_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool2d_state *s = ctx->state;
  if (s->bytes)
    hwt_pool2d_u8_hwc_max_part(&s->d, (const uint8_t *)ctx->in[0], s->x_image,
                               (uint8_t *)ctx->out[0], s->y_image, tid, nth);
  else
    hwt_pool2d_run_part(&s->d, ctx->in[0], ctx->out[0], ws, tid, nth);
}

static int global_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  pool_state st = {0};
  int rc = read_geometry(ctx, &st, err, errlen);
  if (rc != HWT_OK) return rc;
  return hwt_ops_keep(ctx, &st, sizeof st, 0, (double)(st.planes * st.b * st.h * st.w));
}

/* The max rule: NaN wins (as the reference's np.max), else the larger. */
static inline float gp_max(float m, float v) { return (v > m || isnan(v)) ? v : m; }

/* Independent accumulator chains. One chain per channel (a dependent
 * double add per element, NCHWc lanes b floats apart) ran at ~1.5 G
 * floats/s: EfficientNet-B0's 17 global pools (its squeeze-excitations)
 * took 6.0 ms of a ~25 ms image, 2 threads, under load (load 7). NCHW
 * means run the kernel library's vector sums (hwt_global_avg_planes); NCHW
 * maxes take GP_CHAINS interleaved chains; NCHWc lanes are chains of their
 * own, up to GP_LANES at a time, read contiguously. */
#define GP_CHAINS 8
#define GP_LANES 16

/* The max of one NCHW plane x of n floats. */
static float gp_plane_max(const float *x, int64_t n) {
  int64_t i = 0;
  float m[GP_CHAINS];
  for (int c = 0; c < GP_CHAINS; c++) m[c] = -INFINITY;
  for (; i + GP_CHAINS <= n; i += GP_CHAINS)
    for (int c = 0; c < GP_CHAINS; c++) m[c] = gp_max(m[c], x[i + c]);
  for (; i < n; i++) m[0] = gp_max(m[0], x[i]);
  for (int c = 1; c < GP_CHAINS; c++) m[0] = gp_max(m[0], m[c]);
  return m[0];
}

/* Lanes [0, nl) (nl <= GP_LANES) of an NCHWc plane x of n positions, b
 * floats apart, into y. */
static void gp_lanes(const float *x, int64_t n, int64_t b, int nl, int is_max, float *y) {
  if (is_max) {
    float m[GP_LANES];
    for (int l = 0; l < nl; l++) m[l] = -INFINITY;
    for (int64_t i = 0; i < n; i++)
      for (int l = 0; l < nl; l++) m[l] = gp_max(m[l], x[i * b + l]);
    for (int l = 0; l < nl; l++) y[l] = m[l];
    return;
  }
  double a[GP_LANES] = {0};
  if (nl == GP_LANES) {
    /* A constant trip count, so the compiler keeps the 16 sums in vector
     * registers (the variable count left them a scalar add each):
     * EfficientNet-B0's squeeze-excitation pools held channels-last (one
     * block of up to 1152 channels) took 275.8 against 188.3 us NCHW, 1
     * thread (per-op least of 3 traced runs, Zen 4), before this. */
    for (int64_t i = 0; i < n; i++)
      for (int l = 0; l < GP_LANES; l++) a[l] += x[i * b + l];
  } else {
    for (int64_t i = 0; i < n; i++)
      for (int l = 0; l < nl; l++) a[l] += x[i * b + l];
  }
  for (int l = 0; l < nl; l++) y[l] = (float)(a[l] / (double)n);
}

static void global_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const pool_state *s = ctx->state;
  const int64_t hw = s->h * s->w, b = s->b;
  int64_t lo, hi;
  hwt_ops_rows(s->planes * b, tid, nth, &lo, &hi);
  if (b == 1 && !s->is_max) {
    if (hi > lo)
      hwt_global_avg_planes(ctx->in[0] + lo * hw, hw, hi - lo, ctx->isa, ctx->out[0] + lo);
    return;
  }
  if (b == 1) {
    for (int64_t r = lo; r < hi; r++) ctx->out[0][r] = gp_plane_max(ctx->in[0] + r * hw, hw);
    return;
  }
  /* Output r is lane r % b of block r / b. */
  for (int64_t r = lo; r < hi;) {
    const int64_t p = r / b, l = r % b;
    int64_t nl = b - l < hi - r ? b - l : hi - r;
    if (nl > GP_LANES) nl = GP_LANES;
    gp_lanes(ctx->in[0] + p * hw * b + l, hw, b, (int)nl, s->is_max, ctx->out[0] + r);
    r += nl;
  }
}

static const hwt_op_impl k_pool[] = {
    {"pool2d", pool_prepare, pool_run, hwt_ops_free_state},
    {"global_pool2d", global_prepare, global_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_pool, k_pool)
