/* The col2im/im2col CONV ops (NCHW) on the GEMM kernel: the backward ops
 * conv2d_grad_weight and conv2d_grad_data, as src/hwtune/graph/ops/train.py
 * defines them, and conv_transpose2d (ONNX ConvTranspose,
 * src/hwtune/graph/ops/conv_transpose.py), which is conv2d_grad_data of the
 * conv it transposes plus a bias, with dilation and output padding.
 *
 * Both are im2col GEMMs over tiles of whole output rows:
 *   weight: dW^T[(ic,kh,kw), oc] += col_n[(ic,kh,kw), tile] * dy_n[oc, tile]^T
 *   data:   col[(ic,kh,kw), tile] = W[oc, (ic,kh,kw)]^T * dy_n[oc, tile],
 *           scattered back (col2im) into dx_n[ic].
 * Work is split in units that own disjoint outputs, so no share needs
 * another's result: weight units are input-channel blocks (a unit's im2col
 * covers its channels only, so nothing is gathered twice), or output-channel
 * blocks when there are few input channels; data units are (image,
 * input-channel block) pairs. Every GEMM runs single-threaded inside its
 * unit on a plan made at prepare time; a unit's shape takes one of at most
 * two block sizes (even split) per blocked dimension x two betas, so eight
 * plans cover all.
 */
#include <stdlib.h>
#include <string.h>
#include "conv_attrs.h"
#include "hwtune/gemm.h"
#include "hwtune/grad_conv.h"

/* Output columns per im2col tile: at most this many (whole rows, at least
 * one), so a tile of IC*KH*KW gathered rows stays in L2 for the GEMM that
 * reads it (ResNet-18's 3x3x64 layer: 576 x 256 floats = 576 KiB). The
 * default of the tile_cols knob, kept: on ResNet-18's 13 im2col gradients
 * at batch 16 (7 weight, 6 stride-2 data; 2 threads, EPYC Zen 1, AVX2,
 * load 4.5-10) tune-graph --train (optuna, 16 trials, the best re-measured
 * 7 rounds interleaved with the default) kept 256 on 10 and took 512 or
 * 1024 on 3, and re-measured per op (benchmarks/bench_backward_convs.py,
 * load 10-12) those 3 ran 0.83-1.16x, within the 0.79-1.20x that identical
 * plans showed there. */
#define TILE_COLS 256
/* Channel blocks per thread (units = this x max_threads, or IC if fewer):
 * enough units that the even split of a unit count over threads loses
 * little. The default of the units knob, kept: the same search kept 2 on 8
 * of the 13, took 1 on 4 and 4 on 1 (re-measured 0.67-1.16x: noise). */
#define UNITS_PER_THREAD 2

/* Weight units: (input-channel block, output-channel block) pairs, at
 * least this many output channels per block: the N of the unit's GEMM,
 * one 16-wide AVX2 register tile (wider tiles waste less; see gw_prepare). */
#define GW_MIN_OC_BLOCK 16

#define MAX_PLANS 8

typedef struct {
  int64_t n, ic, h, w, oc, kh, kw, oh, ow, sh, sw, ph, pw;
  int64_t dh, dw; /* dilation (conv_transpose2d; 1 for the gradients) */
  int64_t rows;   /* output rows per tile (divides oh) */
  int64_t blocks; /* input-channel blocks */
  int64_t oblocks; /* output-channel blocks (weight gradient; 1 otherwise) */
  int nplans;
  hwt_gemm_plan plans[MAX_PLANS];
  size_t gemm_ws; /* largest plan workspace */
  int fwd;        /* data gradient run as the forward CONV of dy (fwd_prepare) */
  int wino;       /* weight gradient by Winograd (wg_prepare) */
  int64_t th, tw, ipc; /* its 2x2 tiles per column and row, images per chunk */
  hwt_conv_plan conv; /* that CONV's plan */
} cg_state;

static int64_t tile_rows(int64_t oh, int64_t ow, int64_t cap) {
  int64_t best = 1;
  for (int64_t r = 1; r <= oh; r++)
    if (oh % r == 0 && r * ow <= (ow > cap ? ow : cap)) best = r;
  return best;
}

static int add_plan(cg_state *s, const hwt_gemm_desc *d, hwt_isa isa) {
  for (int i = 0; i < s->nplans; i++) {
    const hwt_gemm_desc *e = &s->plans[i].d;
    if (e->M == d->M && e->N == d->N && e->K == d->K && e->beta == d->beta) return HWT_OK;
  }
  if (s->nplans == MAX_PLANS) return HWT_EINVAL;
  int st = hwt_gemm_plan_make(d, isa, 1, &s->plans[s->nplans]);
  if (st < 0) return st;
  if (s->plans[s->nplans].ws_floats > s->gemm_ws) s->gemm_ws = s->plans[s->nplans].ws_floats;
  s->nplans++;
  return HWT_OK;
}

static const hwt_gemm_plan *find_plan(const cg_state *s, int M, int N, int K, float beta) {
  for (int i = 0; i < s->nplans; i++) {
    const hwt_gemm_desc *e = &s->plans[i].d;
    if (e->M == M && e->N == N && e->K == K && e->beta == beta) return &s->plans[i];
  }
  return NULL; /* unreachable: prepare made every shape run() asks for */
}

/* Geometry from x [N,IC,H,W], w [OC,IC,KH,KW] and the stride/padding attrs. */
static int geometry(hwt_op_ctx *ctx, cg_state *s, const int64_t *x, const int64_t *w,
                    char *err, size_t errlen) {
  int64_t st[2] = {1, 1}, pd[2] = {0, 0};
  hwt_ops_pair(ctx, "stride", st);
  hwt_ops_pair(ctx, "padding", pd);
  s->n = x[0], s->ic = x[1], s->h = x[2], s->w = x[3];
  s->oc = w[0], s->kh = w[2], s->kw = w[3];
  s->sh = st[0], s->sw = st[1], s->ph = pd[0], s->pw = pd[1];
  s->dh = s->dw = 1;
  if (st[0] < 1 || st[1] < 1 || pd[0] < 0 || pd[1] < 0 || w[1] != x[1])
    return hwt_ops_fail(err, errlen, ctx, "bad stride, padding or channel count");
  s->oh = (s->h + 2 * s->ph - s->kh) / s->sh + 1;
  s->ow = (s->w + 2 * s->pw - s->kw) / s->sw + 1;
  if (s->oh < 1 || s->ow < 1) return hwt_ops_fail(err, errlen, ctx, "empty output");
  s->rows = tile_rows(s->oh, s->ow, TILE_COLS);
  int64_t want = (int64_t)UNITS_PER_THREAD * ctx->max_threads;
  s->blocks = s->ic < want ? s->ic : want;
  s->oblocks = 1;
  return HWT_OK;
}

/* Output-channel block b of s->oblocks: channels [lo, hi). */
static void oblock(const cg_state *s, int64_t b, int64_t *lo, int64_t *hi) {
  *lo = s->oc * b / s->oblocks;
  *hi = s->oc * (b + 1) / s->oblocks;
}

/* Channel block b of s->blocks: channels [lo, hi). */
static void block(const cg_state *s, int64_t b, int64_t *lo, int64_t *hi) {
  *lo = s->ic * b / s->blocks;
  *hi = s->ic * (b + 1) / s->blocks;
}

/* col[(c - c0, i, j), t] for channels [c0, c1) and output rows [r0, r0 + rows). */
static void im2col(const cg_state *s, const float *xn, int64_t c0, int64_t c1, int64_t r0,
                   float *col) {
  const int64_t cols = s->rows * s->ow;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t i = 0; i < s->kh; i++)
      for (int64_t j = 0; j < s->kw; j++) {
        float *dst = col + (((c - c0) * s->kh + i) * s->kw + j) * cols;
        for (int64_t r = 0; r < s->rows; r++) {
          const int64_t y = (r0 + r) * s->sh + i * s->dh - s->ph;
          float *d = dst + r * s->ow;
          if (y < 0 || y >= s->h) {
            memset(d, 0, (size_t)s->ow * sizeof *d);
            continue;
          }
          /* column q reads src[q * sw + off]: zeros outside [qa, qb), no
           * test per element (the per-element bounds test was a scalar
           * loop, 11% of PathNet-medium's training step in perf, avx2) */
          const float *src = xn + (c * s->h + y) * s->w;
          const int64_t off = j * s->dw - s->pw, sw = s->sw;
          const int64_t qa0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
          const int64_t qb0 = s->w > off ? (s->w - off + sw - 1) / sw : 0;
          const int64_t qa = qa0 < s->ow ? qa0 : s->ow;
          const int64_t qb = qb0 < qa ? qa : qb0 < s->ow ? qb0 : s->ow;
          memset(d, 0, (size_t)qa * sizeof *d);
          if (sw == 1)
            memcpy(d + qa, src + qa + off, (size_t)(qb - qa) * sizeof *d);
          else
            for (int64_t q = qa; q < qb; q++) d[q] = src[q * sw + off];
          memset(d + qb, 0, (size_t)(s->ow - qb) * sizeof *d);
        }
      }
}

/* Floats of col2im's phase rows when stride_w > 1: sw rows of ceil(w / sw). */
static size_t phase_floats(const cg_state *s) {
  if (s->sw == 1) return 0;
  size_t n = (size_t)(s->sw * ((s->w + s->sw - 1) / s->sw));
  return (n + 15) / 16 * 16;
}

/* dxn[c] += each gathered row back at its window position: a memory-bound
 * scatter-add after the GEMM, which carries the FLOPs and their SIMD.
 * Stride 1: every tap's row is one contiguous run of adds (vectorised by
 * the compiler). Stride sw > 1: a tap lands on every sw-th column, one
 * phase of the row; the taps of a phase are first summed into that
 * phase's row of `phase` with contiguous adds, then each phase is added to
 * the output once -- sw strided passes per row instead of kw (DCGAN's 4x4
 * stride-2 layers: col2im was 35% of the op with a strided pass per tap,
 * perf, AVX2). */
static void col2im(const cg_state *s, const float *col, int64_t c0, int64_t c1, int64_t r0,
                   float *dxn, float *phase) {
  const int64_t cols = s->rows * s->ow, sw = s->sw, pl = (s->w + sw - 1) / sw;
  /* Rows are short (DCGAN's: 4 to 32 columns): no division per tap and row.
   * Tap j's offset j*dw - pw is phase p0 + j*dw (mod sw) at position b; a
   * phase p < rem holds pl columns, the others pl - 1. */
  const int64_t dq = s->dw / sw, dr = s->dw % sw, rem = s->w - (pl - 1) * sw;
  const int64_t p0 = ((-s->pw % sw) + sw) % sw, b0 = (-s->pw - p0) / sw;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t i = 0; i < s->kh; i++) {
      const float *taps = col + ((c - c0) * s->kh + i) * s->kw * cols;
      for (int64_t r = 0; r < s->rows; r++) {
        const int64_t y = (r0 + r) * s->sh + i * s->dh - s->ph;
        if (y < 0 || y >= s->h) continue;
        float *d = dxn + (c * s->h + y) * s->w;
        if (sw == 1) {
          for (int64_t j = 0; j < s->kw; j++) {
            const float *v = taps + j * cols + r * s->ow;
            /* output column off + q for q in [0, ow) */
            const int64_t off = j * s->dw - s->pw;
            const int64_t qa = off >= 0 ? 0 : -off;
            const int64_t qb = s->w - off < s->ow ? s->w - off : s->ow;
            for (int64_t q = qa; q < qb; q++) d[off + q] += v[q];
          }
          continue;
        }
        memset(phase, 0, (size_t)(sw * pl) * sizeof *phase);
        for (int64_t j = 0, p = p0, b = b0; j < s->kw; j++) {
          /* output column (q + b)*sw + p for q in [0, ow): phase p, position q + b */
          const float *v = taps + j * cols + r * s->ow;
          const int64_t mh = p < rem ? pl : pl - 1;
          const int64_t ma = b > 0 ? b : 0, mb = b + s->ow < mh ? b + s->ow : mh;
          float *t = phase + p * pl;
          for (int64_t m = ma; m < mb; m++) t[m] += v[m - b];
          p += dr, b += dq;
          if (p >= sw) p -= sw, b++;
        }
        int64_t p = 0;
        if (sw == 2) {
          /* both phases in one contiguous pass (vectorised as an interleave) */
          const float *restrict t0 = phase, *restrict t1 = phase + pl;
          float *restrict dd = d;
          const int64_t both = rem == 2 ? pl : pl - 1;
          for (int64_t m = 0; m < both; m++) {
            dd[2 * m] += t0[m];
            dd[2 * m + 1] += t1[m];
          }
          if (both < pl) dd[2 * both] += t0[both];
          p = 2;
        }
        for (; p < sw; p++) {
          const float *t = phase + p * pl;
          const int64_t mh = p < rem ? pl : pl - 1;
          for (int64_t m = 0; m < mh; m++) d[m * sw + p] += t[m];
        }
      }
    }
}

static size_t col_floats(const cg_state *s) {
  int64_t cmax = (s->ic + s->blocks - 1) / s->blocks;
  size_t n = (size_t)(cmax * s->kh * s->kw * s->rows * s->ow);
  return (n + 15) / 16 * 16; /* keep the GEMM workspace after it 64-byte aligned */
}

/* A weight unit's block of dW^T: the largest channel blocks' product. */
static size_t gw_acc_floats(const cg_state *s) {
  const int64_t cmax = (s->ic + s->blocks - 1) / s->blocks;
  const int64_t omax = (s->oc + s->oblocks - 1) / s->oblocks;
  size_t n = (size_t)(cmax * s->kh * s->kw * omax);
  return (n + 15) / 16 * 16;
}

/* The state of either op from its x, w and dy tensors (x or w may be the
 * output): arity, ranks, geometry and dy's shape checked. */
/* The end of both prepares: the state and its workspace on success; on a
 * failed add_plan (the GEMM refused a shape, or a fifth plan) the state is
 * freed and the error reported. */
static int finish_prepare(hwt_op_ctx *ctx, cg_state *s, int st, double flops, char *err,
                          size_t errlen) {
  if (st != HWT_OK) {
    free(s);
    hwt_ops_fail(err, errlen, ctx, "no GEMM plan for this shape");
    return st;
  }
  return hwt_ops_prepared(ctx, s, col_floats(s) + s->gemm_ws + phase_floats(s), flops);
}

static int open_state(hwt_op_ctx *ctx, int x, int w, int dy, const char *arity, cg_state **out,
                      char *err, size_t errlen) {
  if (ctx->n_in != 2 || ctx->n_out != 1) return hwt_ops_fail(err, errlen, ctx, arity);
  const hwt_graph *g = ctx->g;
  if (hwt_graph_tensor_ndim(g, x) != 4 || hwt_graph_tensor_ndim(g, dy) != 4 ||
      hwt_graph_tensor_ndim(g, w) != 4)
    return hwt_ops_fail(err, errlen, ctx, "x, w and dy must be 4-D (NCHW)");
  cg_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  int st = geometry(ctx, s, hwt_graph_tensor_shape(g, x), hwt_graph_tensor_shape(g, w), err,
                    errlen);
  const int64_t *ys = hwt_graph_tensor_shape(g, dy);
  if (st == HWT_OK && (ys[0] != s->n || ys[1] != s->oc || ys[2] != s->oh || ys[3] != s->ow))
    st = hwt_ops_fail(err, errlen, ctx, "dy is not this conv's output shape");
  if (st != HWT_OK) {
    free(s);
    return st;
  }
  *out = s;
  return HWT_OK;
}

/* ---- weight gradient: x [N,IC,H,W], dy [N,OC,OH,OW] -> dw [OC,IC,KH,KW] ---- */

static int wg_prepare(hwt_op_ctx *ctx, cg_state *s, int units, int chunk_tiles, char *err,
                      size_t errlen);

/* ---- the weight gradient's knobs (hwtune/grad_conv.h) ----
 * winograd: 0 the im2col GEMM, 2 Winograd F(2x2, 3x3) (3x3, stride 1);
 * units: channel blocks per thread (both algorithms: more units split the
 * work more evenly, fewer repeat less of the per-unit work -- each
 * Winograd unit transforms all of dy);
 * tile_cols: at most this many output columns per im2col tile (whole rows);
 * chunk_tiles: at least this many 2x2 tiles per Winograd GEMM chunk (whole
 * images; the GEMMs' K). */
static const char *const GW_KNOB_NAMES[HWT_GW_KNOBS] = {"winograd", "units", "tile_cols",
                                                          "chunk_tiles"};
enum { GW_WINO, GW_UNITS, GW_TILE_COLS, GW_CHUNK_TILES };
static const int GW_UNITS_V[] = {1, 2, 4};
static const int GW_TILE_COLS_V[] = {64, 128, 256, 512, 1024};
static const int GW_CHUNK_TILES_V[] = {32, 64, 128, 256, 512};

/* Winograd only with at least this many input and output channels by
 * default: the forward template's rule (kernels/conv/conv.c WINO_MIN_CH).
 * The search above kept Winograd on all four 3x3 stride-1 weight gradients
 * of ResNet-18 (64-512 channels); below 32 channels it is not measured
 * (the winograd knob is tuned there instead). */
#define WG_MIN_CH 32
/* Tiles per Winograd GEMM chunk by default: images are added to a chunk
 * until it holds at least this many (ResNet-18's 7x7 layers have 16 tiles
 * an image). Kept: the search kept 128 (and one unit per thread) on the
 * four; a first search at load 4.5-6 took 512 with 2 units on 512x7x7
 * (1.22x in its confirmation), which re-measured per op at 0.88-0.95x. */
#define WG_CHUNK_TILES 128

const char *hwt_grad_weight_knob_name(int i) {
  return i >= 0 && i < HWT_GW_KNOBS ? GW_KNOB_NAMES[i] : NULL;
}

static int gw_desc_ok(const hwt_conv_desc *d) {
  return d && d->N >= 1 && d->C >= 1 && d->H >= 1 && d->W >= 1 && d->K >= 1 && d->R >= 1 &&
         d->S >= 1 && d->stride_h >= 1 && d->stride_w >= 1 && d->pad_h >= 0 && d->pad_w >= 0;
}

static int gw_wino_legal(const hwt_conv_desc *d) {
  return d->R == 3 && d->S == 3 && d->stride_h == 1 && d->stride_w == 1;
}

static void knob_set(hwt_conv_knob *k, const int *v, int n) {
  k->n = n;
  for (int i = 0; i < n; i++) k->v[i] = v[i];
}

int hwt_grad_weight_knobs(const hwt_conv_desc *d, hwt_conv_knob *out) {
  if (!out || !gw_desc_ok(d)) return HWT_EINVAL;
  static const int wino[] = {0, 2};
  knob_set(&out[GW_WINO], wino, gw_wino_legal(d) ? 2 : 1);
  knob_set(&out[GW_UNITS], GW_UNITS_V, 3);
  knob_set(&out[GW_TILE_COLS], GW_TILE_COLS_V, 5);
  knob_set(&out[GW_CHUNK_TILES], GW_CHUNK_TILES_V, 5);
  return HWT_OK;
}

int hwt_grad_weight_default(const hwt_conv_desc *d, int *v) {
  if (!v || !gw_desc_ok(d)) return HWT_EINVAL;
  v[GW_WINO] = gw_wino_legal(d) && d->C >= WG_MIN_CH && d->K >= WG_MIN_CH ? 2 : 0;
  /* Winograd: one unit per thread (each transforms all of dy) */
  v[GW_UNITS] = v[GW_WINO] ? 1 : UNITS_PER_THREAD;
  v[GW_TILE_COLS] = TILE_COLS;
  v[GW_CHUNK_TILES] = WG_CHUNK_TILES;
  return HWT_OK;
}

/* The forward conv's output extent (symmetric padding, no dilation). */
static void out_hw(const hwt_conv_desc *d, int64_t *oh, int64_t *ow) {
  *oh = ((int64_t)d->H + 2 * d->pad_h - d->R) / d->stride_h + 1;
  *ow = ((int64_t)d->W + 2 * d->pad_w - d->S) / d->stride_w + 1;
}

/* What a tile_cols value decides: output rows per im2col tile. */
static int64_t tile_rows_of(const hwt_conv_desc *d, int cap) {
  int64_t oh, ow;
  out_hw(d, &oh, &ow);
  return tile_rows(oh, ow, cap);
}

/* What a chunk_tiles value decides: images per Winograd chunk. */
static int64_t chunk_images(const hwt_conv_desc *d, int chunk) {
  int64_t oh, ow;
  out_hw(d, &oh, &ow);
  const int64_t T = ((oh + 1) / 2) * ((ow + 1) / 2), ipc = (chunk + T - 1) / T;
  return ipc < d->N ? ipc : d->N;
}

/* v's representative among the legal values that give the same plan
 * (effect): the default when it is one of them, else the smallest; so a
 * search never measures one plan twice under two names, nor keeps a
 * "tuned" value that runs exactly as the default. */
static int canon_value(const hwt_conv_desc *d, const int *legal, int n, int v, int def,
                       int64_t (*effect)(const hwt_conv_desc *, int)) {
  const int64_t e = effect(d, v);
  if (effect(d, def) == e) return def;
  for (int i = 0; i < n; i++)
    if (effect(d, legal[i]) == e) return legal[i];
  return v;
}

int hwt_grad_weight_canonical(const hwt_conv_desc *d, int *v) {
  hwt_conv_knob k[HWT_GW_KNOBS];
  int def[HWT_GW_KNOBS];
  if (!v || hwt_grad_weight_knobs(d, k) != HWT_OK) return HWT_EINVAL;
  hwt_grad_weight_default(d, def);
  for (int i = 0; i < HWT_GW_KNOBS; i++) {
    int ok = 0;
    for (int j = 0; j < k[i].n; j++) ok |= k[i].v[j] == v[i];
    if (!ok) return HWT_EINVAL;
  }
  if (v[GW_WINO]) {
    v[GW_TILE_COLS] = def[GW_TILE_COLS];
    v[GW_CHUNK_TILES] = canon_value(d, GW_CHUNK_TILES_V, 5, v[GW_CHUNK_TILES],
                                    def[GW_CHUNK_TILES], chunk_images);
  } else {
    v[GW_CHUNK_TILES] = def[GW_CHUNK_TILES];
    v[GW_TILE_COLS] = canon_value(d, GW_TILE_COLS_V, 5, v[GW_TILE_COLS], def[GW_TILE_COLS],
                                  tile_rows_of);
  }
  return HWT_OK;
}

/* The op's knob attributes over the default into v; a value not declared
 * legal is a failure naming it. */
static int gw_knob_attrs(hwt_op_ctx *ctx, const cg_state *s, int *v, char *err,
                         size_t errlen) {
  hwt_conv_desc d = {0};
  d.N = (int)s->n, d.C = (int)s->ic, d.H = (int)s->h, d.W = (int)s->w;
  d.K = (int)s->oc, d.R = (int)s->kh, d.S = (int)s->kw;
  d.stride_h = (int)s->sh, d.stride_w = (int)s->sw, d.pad_h = (int)s->ph, d.pad_w = (int)s->pw;
  hwt_conv_knob k[HWT_GW_KNOBS];
  if (hwt_grad_weight_knobs(&d, k) != HWT_OK || hwt_grad_weight_default(&d, v) != HWT_OK)
    return hwt_ops_fail(err, errlen, ctx, "bad weight gradient shape");
  for (int i = 0; i < HWT_GW_KNOBS; i++) {
    const int a = hwt_ops_knob(ctx, GW_KNOB_NAMES[i]);
    if (a < 0) continue;
    int ok = 0;
    for (int j = 0; j < k[i].n; j++) ok |= k[i].v[j] == a;
    if (!ok) {
      char why[160];
      snprintf(why, sizeof why, "weight gradient knob %s=%d is not legal for this conv",
               GW_KNOB_NAMES[i], a);
      return hwt_ops_fail(err, errlen, ctx, why);
    }
    v[i] = a;
  }
  return HWT_OK;
}

/* The weight gradient computes dW^T, [IC*kk, OC] = sum over images and tiles
 * of col [IC*kk, cols] x dy tile^T [cols, OC], per unit into a block of its
 * workspace, transposed into dW at the unit's end: M = a channel block's
 * IC*kk rows, N = output channels. As dW = dy x col^T instead (M = OC, N =
 * IC*kk), PathNet-medium's first layer (IC 3, OC 32) had N = 9 of a 16-wide
 * tile and 3 units on 2 threads. With fewer input channels than units,
 * units split the output channels instead (each im2cols every channel of
 * its image: IC is small there). */
static int gw_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  cg_state *s = NULL;
  int st = open_state(ctx, hwt_ops_in(ctx, 0), hwt_ops_out(ctx, 0), hwt_ops_in(ctx, 1),
                      "conv2d_grad_weight takes x and dy", &s, err, errlen);
  if (st != HWT_OK) return st;
  int kv[HWT_GW_KNOBS];
  if ((st = gw_knob_attrs(ctx, s, kv, err, errlen)) != HWT_OK) {
    free(s);
    return st;
  }
  if (kv[GW_WINO]) return wg_prepare(ctx, s, kv[GW_UNITS], kv[GW_CHUNK_TILES], err, errlen);
  s->rows = tile_rows(s->oh, s->ow, kv[GW_TILE_COLS]);
  const int64_t want = (int64_t)kv[GW_UNITS] * ctx->max_threads;
  s->blocks = s->ic < want ? s->ic : want;
  const int64_t kk = s->kh * s->kw, cols = s->rows * s->ow, k2 = s->ic * kk;
  if (s->ic < want) {
    /* one output-channel block per thread, not `units`: each
     * repeats the image's whole im2col (ResNet-18's 7x7 stride-2 first
     * layer: 147 gathered rows for 16 output channels a unit at 4 units) */
    const int64_t ob = s->oc / GW_MIN_OC_BLOCK;
    s->blocks = 1;
    s->oblocks = ob < 1 ? 1 : ob < ctx->max_threads ? ob : ctx->max_threads;
  }
  for (int64_t b = 0; st == HWT_OK && b < s->blocks; b++)
    for (int64_t c = 0; st == HWT_OK && c < s->oblocks; c++) {
      int64_t lo, hi, o0, o1;
      block(s, b, &lo, &hi);
      oblock(s, c, &o0, &o1);
      for (int beta = 0; beta < 2 && st == HWT_OK; beta++) {
        /* A = col [(hi-lo)*kk, cols], B = dy rows [o0, o1) of the tile
         * ([N, cols], ldb P) transposed, C = the unit's block of dW^T. */
        hwt_gemm_desc d = {(int)((hi - lo) * kk), (int)(o1 - o0), (int)cols, 0, 1,
                           (int)cols, (int)(s->oh * s->ow), (int)(o1 - o0), (float)beta};
        st = add_plan(s, &d, ctx->isa);
      }
    }
  if (st == HWT_OK) s->gemm_ws += gw_acc_floats(s); /* the unit's dW^T block */
  return finish_prepare(ctx, s, st, 2.0 * (double)(s->n * s->oc * s->oh * s->ow * k2), err,
                        errlen);
}

/* ---- weight gradient by Winograd F(2x2, 3x3) (3x3, stride 1) ----
 * The forward F(2x2, 3x3) is Y = A^T [(G g G^T) . (B^T d B)] A per 2x2
 * output tile; Y is linear in g, so
 *   dW[k][c] = G^T [ sum over tiles (A dY_k A^T) . (B^T d_c B) ] G,
 * the sum for each of the 16 transform elements xi one GEMM:
 *   M[xi] (OC x C) += Q[xi] (OC x tiles) x V[xi]^T (tiles x C),
 * Q the transformed dy tiles, V the transformed input tiles. 16 x tiles
 * products per (k, c) instead of 9 x 4 x tiles (2.25x fewer). Units are
 * input-channel blocks, `units` per thread (each transforms all of dy, its
 * blocks of x); the tiles go in chunks of whole images, accumulated into
 * the unit's M (beta 1 after the first chunk), transformed into dW at the
 * unit's end. */

static int64_t wg_cmax(const cg_state *s) { return (s->ic + s->blocks - 1) / s->blocks; }
static int64_t wg_tiles(const cg_state *s) { return s->th * s->tw; }
/* Floats between the 16 transform elements' slabs of Q, V and M: whole
 * lines plus one, so the 16 streams a transform writes fall in different
 * cache sets (ResNet-18's slabs are multiples of 4 KiB: all 16 in one set
 * of the 8-way L1, and the 56x56 layers' weight gradient took 3x its
 * forward CONV's time instead of 1-1.3x). */
static size_t wg_slab(int64_t floats) { return (size_t)((floats + 15) / 16 * 16 + 16); }
static size_t wg_qs(const cg_state *s) { return wg_slab(s->oc * s->ipc * wg_tiles(s)); }
static size_t wg_vs(const cg_state *s) { return wg_slab(wg_cmax(s) * s->ipc * wg_tiles(s)); }
static size_t wg_ms(const cg_state *s) { return wg_slab(s->oc * wg_cmax(s)); }
static size_t wg_q_floats(const cg_state *s) { return 16 * wg_qs(s); }
static size_t wg_v_floats(const cg_state *s) { return 16 * wg_vs(s); }
static size_t wg_m_floats(const cg_state *s) { return 16 * wg_ms(s); }
static size_t wg_row_floats(const cg_state *s) { return (size_t)((4 * (2 * s->tw + 2) + 15) / 16 * 16); }

static int wg_prepare(hwt_op_ctx *ctx, cg_state *s, int units, int chunk_tiles, char *err,
                      size_t errlen) {
  s->wino = 1;
  s->th = (s->oh + 1) / 2, s->tw = (s->ow + 1) / 2;
  const int64_t T = wg_tiles(s);
  s->ipc = (chunk_tiles + T - 1) / T;
  if (s->ipc > s->n) s->ipc = s->n;
  const int64_t want = (int64_t)units * ctx->max_threads;
  s->blocks = s->ic < want ? s->ic : want;
  s->oblocks = 1;
  int st = HWT_OK;
  const int64_t tail = s->n % s->ipc;
  for (int64_t b = 0; st == HWT_OK && b < s->blocks; b++)
    for (int chunk = 0; chunk < 2 && st == HWT_OK; chunk++) {
      if (chunk && !tail) continue;
      int64_t lo, hi;
      block(s, b, &lo, &hi);
      const int tc = (int)((chunk ? tail : s->ipc) * T);
      for (int beta = 0; beta < 2 && st == HWT_OK; beta++) {
        /* A = Q[xi] [OC, tc], B = V[xi] [cb, tc] transposed, C = M[xi] [OC, cb] */
        hwt_gemm_desc d = {(int)s->oc, (int)(hi - lo), tc, 0, 1, tc, tc, (int)(hi - lo),
                           (float)beta};
        st = add_plan(s, &d, ctx->isa);
      }
    }
  if (st != HWT_OK) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "no GEMM plan for this shape");
  }
  return hwt_ops_prepared(ctx, s,
                          wg_q_floats(s) + wg_v_floats(s) + wg_m_floats(s) + wg_row_floats(s) +
                              s->gemm_ws,
                          2.0 * (double)(s->n * s->oc * s->oh * s->ow * s->ic * 9));
}

/* Q[xi][k][t] = (A g A^T)[xi] for dy's 2x2 tiles g of images [n0, n0 + ni)
 * (zero past the last row and column); t = image * tiles + ty * tw + tx. */
static void wg_q(const cg_state *s, const float *dy, int64_t n0, int64_t ni, float *q) {
  const int64_t T = wg_tiles(s), tc = ni * T, plane = s->oh * s->ow;
  for (int64_t k = 0; k < s->oc; k++)
    for (int64_t n = 0; n < ni; n++)
      for (int64_t ty = 0; ty < s->th; ty++) {
        const float *r0 = dy + ((n0 + n) * s->oc + k) * plane + 2 * ty * s->ow;
        const float *r1 = 2 * ty + 1 < s->oh ? r0 + s->ow : NULL;
        float *dst = q + k * tc + n * T + ty * s->tw;
        for (int64_t tx = 0; tx < s->tw; tx++) {
          const int two = 2 * tx + 1 < s->ow;
          const float g00 = r0[2 * tx], g01 = two ? r0[2 * tx + 1] : 0.0f;
          const float g10 = r1 ? r1[2 * tx] : 0.0f, g11 = r1 && two ? r1[2 * tx + 1] : 0.0f;
          /* rows of A g: g0, g0 + g1, g0 - g1, -g1; then each row r -> r0,
           * r0 + r1, r0 - r1, -r1 */
          const float a[4][2] = {{g00, g01}, {g00 + g10, g01 + g11}, {g00 - g10, g01 - g11},
                                 {-g10, -g11}};
          for (int i = 0; i < 4; i++) {
            const size_t xs = wg_qs(s), e = (size_t)(i * 4) * xs + tx;
            dst[e] = a[i][0];
            dst[e + xs] = a[i][0] + a[i][1];
            dst[e + 2 * xs] = a[i][0] - a[i][1];
            dst[e + 3 * xs] = -a[i][1];
          }
        }
      }
}

/* V[xi][c - lo][t] = (B^T d B)[xi] for the 4x4 input patches d of channels
 * [lo, hi) of images [n0, n0 + ni) (zero padding outside the image). */
static void wg_v(const cg_state *s, const float *x, int64_t n0, int64_t ni, int64_t lo,
                 int64_t hi, float *v, float *rows) {
  const int64_t T = wg_tiles(s), tc = ni * T, wt = 2 * s->tw + 2;
  const size_t xs = wg_vs(s);
  for (int64_t c = lo; c < hi; c++)
    for (int64_t n = 0; n < ni; n++) {
      const float *xc = x + ((n0 + n) * s->ic + c) * s->h * s->w;
      for (int64_t ty = 0; ty < s->th; ty++) {
        /* the patch rows 2ty - ph .. + 3, padded column q = input column q - pw */
        for (int i = 0; i < 4; i++) {
          float *r = rows + i * wt;
          const int64_t y = 2 * ty - s->ph + i;
          memset(r, 0, (size_t)wt * sizeof *r);
          if (y < 0 || y >= s->h) continue;
          const int64_t qa = s->pw, qb = s->pw + s->w < wt ? s->pw + s->w : wt;
          if (qb > qa) memcpy(r + qa, xc + y * s->w, (size_t)(qb - qa) * sizeof *r);
        }
        float *dst = v + (c - lo) * tc + n * T + ty * s->tw;
        const float *d0 = rows, *d1 = rows + wt, *d2 = rows + 2 * wt, *d3 = rows + 3 * wt;
        for (int64_t tx = 0; tx < s->tw; tx++) {
          const int64_t q = 2 * tx;
          float b[4][4]; /* B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
          for (int j = 0; j < 4; j++) {
            b[0][j] = d0[q + j] - d2[q + j];
            b[1][j] = d1[q + j] + d2[q + j];
            b[2][j] = d2[q + j] - d1[q + j];
            b[3][j] = d1[q + j] - d3[q + j];
          }
          for (int i = 0; i < 4; i++) {
            const size_t e = (size_t)(i * 4) * xs + tx;
            dst[e] = b[i][0] - b[i][2];
            dst[e + xs] = b[i][1] + b[i][2];
            dst[e + 2 * xs] = b[i][2] - b[i][1];
            dst[e + 3 * xs] = b[i][1] - b[i][3];
          }
        }
      }
    }
}

static void wg_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const cg_state *s = ctx->state;
  const float *x = ctx->in[0], *dy = ctx->in[1];
  float *dw = ctx->out[0];
  float *q = ws, *v = q + wg_q_floats(s), *m = v + wg_v_floats(s);
  float *rows = m + wg_m_floats(s), *gws = rows + wg_row_floats(s);
  const int64_t T = wg_tiles(s);
  int64_t u0, u1;
  hwt_ops_rows(s->blocks, tid, nth, &u0, &u1);
  for (int64_t u = u0; u < u1; u++) {
    int64_t lo, hi;
    block(s, u, &lo, &hi);
    const int64_t cb = hi - lo;
    for (int64_t n0 = 0; n0 < s->n; n0 += s->ipc) {
      const int64_t ni = s->n - n0 < s->ipc ? s->n - n0 : s->ipc, tc = ni * T;
      wg_q(s, dy, n0, ni, q);
      wg_v(s, x, n0, ni, lo, hi, v, rows);
      const hwt_gemm_plan *pl = find_plan(s, (int)s->oc, (int)cb, (int)tc, n0 ? 1.0f : 0.0f);
      for (int xi = 0; xi < 16; xi++)
        hwt_gemm_run_part(pl, q + xi * wg_qs(s), v + xi * wg_vs(s), m + xi * wg_ms(s), NULL,
                          gws, 0, 1);
    }
    /* dW[k][c] = G^T M G: rows of G^T M are M0 + (M1 + M2)/2, (M1 - M2)/2,
     * (M1 + M2)/2 + M3, and each row r -> r0 + (r1 + r2)/2, (r1 - r2)/2,
     * (r1 + r2)/2 + r3 */
    const size_t xs = wg_ms(s);
    for (int64_t k = 0; k < s->oc; k++)
      for (int64_t c = 0; c < cb; c++) {
        float mm[16], t[3][4];
        for (int xi = 0; xi < 16; xi++) mm[xi] = m[xi * xs + k * cb + c];
        for (int j = 0; j < 4; j++) {
          const float h = 0.5f * (mm[4 + j] + mm[8 + j]);
          t[0][j] = mm[j] + h;
          t[1][j] = 0.5f * (mm[4 + j] - mm[8 + j]);
          t[2][j] = h + mm[12 + j];
        }
        float *o = dw + (k * s->ic + lo + c) * 9;
        for (int i = 0; i < 3; i++) {
          const float h = 0.5f * (t[i][1] + t[i][2]);
          o[i * 3] = t[i][0] + h;
          o[i * 3 + 1] = 0.5f * (t[i][1] - t[i][2]);
          o[i * 3 + 2] = h + t[i][3];
        }
      }
  }
}

static void gw_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const cg_state *s = ctx->state;
  if (s->wino) {
    wg_run(ctx, ws, tid, nth);
    return;
  }
  const float *x = ctx->in[0], *dy = ctx->in[1];
  float *dw = ctx->out[0];
  float *col = ws, *acc = ws + col_floats(s), *gws = acc + gw_acc_floats(s);
  const int64_t kk = s->kh * s->kw, cols = s->rows * s->ow, p = s->oh * s->ow;
  int64_t u0, u1;
  hwt_ops_rows(s->blocks * s->oblocks, tid, nth, &u0, &u1);
  for (int64_t u = u0; u < u1; u++) {
    int64_t lo, hi, o0, o1;
    block(s, u / s->oblocks, &lo, &hi);
    oblock(s, u % s->oblocks, &o0, &o1);
    const int M = (int)((hi - lo) * kk), N = (int)(o1 - o0);
    for (int64_t n = 0; n < s->n; n++)
      for (int64_t r0 = 0; r0 < s->oh; r0 += s->rows) {
        im2col(s, x + n * s->ic * s->h * s->w, lo, hi, r0, col);
        const float beta = n == 0 && r0 == 0 ? 0.0f : 1.0f;
        const hwt_gemm_plan *pl = find_plan(s, M, N, (int)cols, beta);
        hwt_gemm_run_part(pl, col, dy + (n * s->oc + o0) * p + r0 * s->ow, acc, NULL, gws, 0,
                          1);
      }
    /* acc is dW^T's block [M, N]: into dW [OC, IC*kk] */
    const int64_t k2 = s->ic * kk;
    for (int64_t j = 0; j < N; j++)
      for (int64_t m = 0; m < M; m++) dw[(o0 + j) * k2 + lo * kk + m] = acc[m * N + j];
  }
}

/* ---- data gradient: dy [N,OC,OH,OW], w [OC,IC,KH,KW] -> dx [N,IC,H,W] ---- */

/* The data gradient's GEMM plans and the end of its prepare (shared with
 * conv_transpose2d). */
static int data_prepare(hwt_op_ctx *ctx, cg_state *s, char *err, size_t errlen) {
  int st = HWT_OK;
  const int64_t kk = s->kh * s->kw, cols = s->rows * s->ow;
  for (int64_t b = 0; st == HWT_OK && b < s->blocks; b++) {
    int64_t lo, hi;
    block(s, b, &lo, &hi);
    /* col [(hi-lo)*kk, cols] = W[:, lo*kk..]^T (A stored [OC, IC*kk]) x dy tile. */
    hwt_gemm_desc d = {(int)((hi - lo) * kk), (int)cols, (int)s->oc, 1, 0,
                       (int)(s->ic * kk), (int)(s->oh * s->ow), (int)cols, 0.0f};
    st = add_plan(s, &d, ctx->isa);
  }
  return finish_prepare(ctx, s, st, 2.0 * (double)(s->n * s->oc * s->oh * s->ow * s->ic * kk),
                        err, errlen);
}

/* At stride 1 the data gradient is a forward CONV: dx = dy (*) W', W' the
 * weights with input and output channels swapped and the kernel turned by
 * 180 degrees ([IC, OC, KH, KW]), padding KH-1-ph and KW-1-pw. It then runs
 * on the forward CONV kernels (the NCHW[x]c template, Winograd where the
 * forward rule takes it for per-run weights) instead of an im2col GEMM and
 * col2im's scatter-add; each share turns and packs the weights itself, as
 * a training step's forward CONV packs them. */
static int fwd_ok(const cg_state *s) {
  return s->sh == 1 && s->sw == 1 && s->ph < s->kh && s->pw < s->kw;
}

static size_t fwd_pack_floats(const cg_state *s) { return (s->conv.w_floats + 15) / 16 * 16; }

static int fwd_prepare(hwt_op_ctx *ctx, cg_state *s, char *err, size_t errlen) {
  hwt_conv_desc d = {0};
  d.N = (int)s->n, d.C = (int)s->oc, d.H = (int)s->oh, d.W = (int)s->ow;
  d.K = (int)s->ic, d.R = (int)s->kh, d.S = (int)s->kw;
  d.stride_h = d.stride_w = d.dil_h = d.dil_w = 1;
  d.pad_h = d.pad_h_end = (int)(s->kh - 1 - s->ph);
  d.pad_w = d.pad_w_end = (int)(s->kw - 1 - s->pw);
  /* The template's knobs as conv2d's attributes (a tuned row of this
   * forward CONV's workload); none: the default, Winograd then only where
   * the per-run rule leaves it. */
  hwt_conv_params p = {0};
  int wino_set = 0;
  int st = hwt_ops_conv_knobs(ctx, &d, 0, &p, &wino_set);
  const int given = st > 0;
  if (st >= 0)
    st = hwt_conv_plan_make(&d, HWT_CONV_NCHW, given ? &p : NULL, ctx->isa, ctx->max_threads,
                            &s->conv);
  if (st == HWT_OK && s->conv.p.winograd && !wino_set &&
      (long)d.N * s->conv.OH * s->conv.OW < HWT_OPS_WINO_PER_RUN_PIXELS * ctx->max_threads) {
    p = s->conv.p;
    p.winograd = 0;
    st = hwt_conv_plan_make(&d, HWT_CONV_NCHW, &p, ctx->isa, ctx->max_threads, &s->conv);
  }
  if (st != HWT_OK && given) {
    char why[200];
    snprintf(why, sizeof why,
             "the CONV template refuses the knobs ic_bn=%d oc_bn=%d reg_n=%d unroll_ker=%d "
             "reg_h=%d winograd=%d for the data gradient's CONV (dy [%d,%d,%d,%d], %dx%d, "
             "padding %d,%d)",
             p.ic_bn, p.oc_bn, p.reg_n, p.unroll_ker, p.reg_h, p.winograd, d.N, d.C, d.H, d.W,
             d.R, d.S, d.pad_h, d.pad_w);
    free(s);
    return hwt_ops_fail(err, errlen, ctx, why);
  }
  if (st != HWT_OK || s->conv.OH != s->h || s->conv.OW != s->w) {
    free(s);
    return hwt_ops_fail(err, errlen, ctx, "the CONV kernel refuses the data gradient's CONV");
  }
  s->fwd = 1;
  /* the turned weights are dead once packed: they share the CONV's workspace */
  const size_t turned = (size_t)((s->oc * s->ic * s->kh * s->kw + 15) / 16 * 16);
  const size_t rest = turned > s->conv.ws_floats ? turned : s->conv.ws_floats;
  return hwt_ops_prepared(ctx, s, fwd_pack_floats(s) + rest,
                          2.0 * (double)(s->n * s->oc * s->oh * s->ow * s->ic * s->kh * s->kw));
}

/* ---- the im2col data gradient's knobs (hwtune/grad_conv.h) ----
 * units: (image, channel block) units' channel blocks per thread;
 * tile_cols: at most this many output columns per im2col tile (whole rows).
 * Only where the data gradient is not a forward CONV (fwd_ok), which takes
 * the CONV template's knobs instead. */
static const char *const GD_KNOB_NAMES[HWT_GD_KNOBS] = {"units", "tile_cols"};

const char *hwt_grad_data_knob_name(int i) {
  return i >= 0 && i < HWT_GD_KNOBS ? GD_KNOB_NAMES[i] : NULL;
}

static int gd_desc_im2col(const hwt_conv_desc *d) {
  return gw_desc_ok(d) && !(d->stride_h == 1 && d->stride_w == 1 && d->pad_h < d->R &&
                            d->pad_w < d->S);
}

int hwt_grad_data_knobs(const hwt_conv_desc *d, hwt_conv_knob *out) {
  if (!out || !gd_desc_im2col(d)) return HWT_EINVAL;
  knob_set(&out[0], GW_UNITS_V, 3);
  knob_set(&out[1], GW_TILE_COLS_V, 5);
  return HWT_OK;
}

int hwt_grad_data_default(const hwt_conv_desc *d, int *v) {
  if (!v || !gd_desc_im2col(d)) return HWT_EINVAL;
  v[0] = UNITS_PER_THREAD;
  v[1] = TILE_COLS;
  return HWT_OK;
}

int hwt_grad_data_canonical(const hwt_conv_desc *d, int *v) {
  hwt_conv_knob k[HWT_GD_KNOBS];
  if (!v || hwt_grad_data_knobs(d, k) != HWT_OK) return HWT_EINVAL;
  for (int i = 0; i < HWT_GD_KNOBS; i++) {
    int ok = 0;
    for (int j = 0; j < k[i].n; j++) ok |= k[i].v[j] == v[i];
    if (!ok) return HWT_EINVAL;
  }
  v[1] = canon_value(d, GW_TILE_COLS_V, 5, v[1], TILE_COLS, tile_rows_of);
  return HWT_OK;
}

static int gd_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  cg_state *s = NULL;
  int st = open_state(ctx, hwt_ops_out(ctx, 0), hwt_ops_in(ctx, 1), hwt_ops_in(ctx, 0),
                      "conv2d_grad_data takes dy and w", &s, err, errlen);
  if (st != HWT_OK) return st;
  const int fwd = fwd_ok(s);
  static const char *const conv_knobs[] = {"ic_bn", "oc_bn", "reg_n", "unroll_ker", "reg_h",
                                           "winograd"};
  for (size_t i = 0; !fwd && i < sizeof conv_knobs / sizeof *conv_knobs; i++)
    if (hwt_ops_knob(ctx, conv_knobs[i]) >= 0) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx,
                          "CONV template knobs apply to a stride-1 data gradient only (this "
                          "one runs as an im2col GEMM)");
    }
  for (int i = 0; fwd && i < HWT_GD_KNOBS; i++)
    if (hwt_ops_knob(ctx, GD_KNOB_NAMES[i]) >= 0) {
      free(s);
      return hwt_ops_fail(err, errlen, ctx,
                          "im2col knobs apply to a data gradient that is not a forward CONV "
                          "(this one is: it takes the CONV template's knobs)");
    }
  if (fwd) return fwd_prepare(ctx, s, err, errlen);
  hwt_conv_desc d = {0};
  d.N = (int)s->n, d.C = (int)s->ic, d.H = (int)s->h, d.W = (int)s->w;
  d.K = (int)s->oc, d.R = (int)s->kh, d.S = (int)s->kw;
  d.stride_h = (int)s->sh, d.stride_w = (int)s->sw, d.pad_h = (int)s->ph, d.pad_w = (int)s->pw;
  hwt_conv_knob k[HWT_GD_KNOBS];
  int v[HWT_GD_KNOBS];
  hwt_grad_data_knobs(&d, k);
  hwt_grad_data_default(&d, v);
  for (int i = 0; i < HWT_GD_KNOBS; i++) {
    const int a = hwt_ops_knob(ctx, GD_KNOB_NAMES[i]);
    if (a < 0) continue;
    int ok = 0;
    for (int j = 0; j < k[i].n; j++) ok |= k[i].v[j] == a;
    if (!ok) {
      char why[160];
      snprintf(why, sizeof why, "data gradient knob %s=%d is not legal for this conv",
               GD_KNOB_NAMES[i], a);
      free(s);
      return hwt_ops_fail(err, errlen, ctx, why);
    }
    v[i] = a;
  }
  s->rows = tile_rows(s->oh, s->ow, v[1]);
  const int64_t want = (int64_t)v[0] * ctx->max_threads;
  s->blocks = s->ic < want ? s->ic : want;
  return data_prepare(ctx, s, err, errlen);
}

/* W [OC, IC, KH, KW] -> W' [IC, OC, KH, KW], each kernel turned by 180
 * degrees. */
static void turn_weights(const cg_state *s, const float *w, float *t) {
  const int64_t kk = s->kh * s->kw;
  for (int64_t o = 0; o < s->oc; o++)
    for (int64_t i = 0; i < s->ic; i++) {
      const float *src = w + (o * s->ic + i) * kk;
      float *dst = t + (i * s->oc + o) * kk;
      for (int64_t e = 0; e < kk; e++) dst[e] = src[kk - 1 - e];
    }
}

static void fwd_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const cg_state *s = ctx->state;
  float *packed = ws, *rest = ws + fwd_pack_floats(s);
  turn_weights(s, ctx->in[1], rest);
  hwt_conv_pack_weights(&s->conv, rest, packed);
  hwt_conv_run_part(&s->conv, ctx->in[0], packed, NULL, ctx->out[0], rest, tid, nth);
}

/* Both data ops: units (image, channel block of the output) each start
 * their channels at the bias (conv_transpose2d's third input) or zero. */
static void gd_run(const hwt_op_ctx *ctx, float *ws, int tid, int nth) {
  const cg_state *s = ctx->state;
  if (s->fwd) {
    fwd_run(ctx, ws, tid, nth);
    return;
  }
  const float *dy = ctx->in[0], *w = ctx->in[1];
  const float *bias = ctx->n_in == 3 ? ctx->in[2] : NULL;
  float *dx = ctx->out[0];
  float *col = ws, *gws = ws + col_floats(s);
  const int64_t kk = s->kh * s->kw, cols = s->rows * s->ow, p = s->oh * s->ow;
  int64_t u0, u1;
  hwt_ops_rows(s->n * s->blocks, tid, nth, &u0, &u1);
  for (int64_t u = u0; u < u1; u++) {
    const int64_t n = u / s->blocks;
    int64_t lo, hi;
    block(s, u % s->blocks, &lo, &hi);
    float *dxn = dx + n * s->ic * s->h * s->w;
    const int64_t plane = s->h * s->w;
    if (!bias)
      memset(dxn + lo * plane, 0, (size_t)((hi - lo) * plane) * sizeof *dxn);
    else
      for (int64_t c = lo; c < hi; c++)
        for (int64_t i = 0; i < plane; i++) dxn[c * plane + i] = bias[c];
    const hwt_gemm_plan *pl = find_plan(s, (int)((hi - lo) * kk), (int)cols, (int)s->oc, 0.0f);
    for (int64_t r0 = 0; r0 < s->oh; r0 += s->rows) {
      hwt_gemm_run_part(pl, w + lo * kk, dy + n * s->oc * p + r0 * s->ow, col, NULL, gws, 0, 1);
      col2im(s, col, lo, hi, r0, dxn, gws + s->gemm_ws);
    }
  }
}

/* ---- conv_transpose2d: x [N,C,H,W], w [C,OC,KH,KW], bias [OC] -> y [N,OC,OH,OW] ----
 * The data gradient of the conv from y's shape to x's: x plays dy, OC the
 * conv's input channels. OH = (H-1)*sh + (KH-1)*dh + 1 - pad - pad_end +
 * output_padding; the rows past the windows' reach (output_padding) hold
 * the bias only. */
static int ct_prepare(hwt_op_ctx *ctx, char *err, size_t errlen) {
  if (ctx->n_in < 2 || ctx->n_in > 3 || ctx->n_out != 1)
    return hwt_ops_fail(err, errlen, ctx, "conv_transpose2d takes x, w[, bias]");
  const hwt_graph *g = ctx->g;
  const int xi = hwt_ops_in(ctx, 0), wi = hwt_ops_in(ctx, 1), yi = hwt_ops_out(ctx, 0);
  if (hwt_graph_tensor_ndim(g, xi) != 4 || hwt_graph_tensor_ndim(g, wi) != 4 ||
      hwt_graph_tensor_ndim(g, yi) != 4)
    return hwt_ops_fail(err, errlen, ctx, "x, w and y must be 4-D (NCHW)");
  const int64_t *x = hwt_graph_tensor_shape(g, xi), *w = hwt_graph_tensor_shape(g, wi);
  const int64_t *y = hwt_graph_tensor_shape(g, yi);
  int64_t st[2] = {1, 1}, pd[2] = {0, 0}, dl[2] = {1, 1}, op[2] = {0, 0};
  hwt_ops_pair(ctx, "stride", st);
  hwt_ops_pair(ctx, "padding", pd);
  hwt_ops_pair(ctx, "dilation", dl);
  hwt_ops_pair(ctx, "output_padding", op);
  int64_t pe[2] = {pd[0], pd[1]};
  hwt_ops_pair(ctx, "padding_end", pe);
  for (int i = 0; i < 2; i++)
    if (st[i] < 1 || dl[i] < 1 || pd[i] < 0 || pe[i] < 0 || op[i] < 0)
      return hwt_ops_fail(err, errlen, ctx, "bad stride, dilation or padding");
  if (w[0] != x[1] || y[0] != x[0] || y[1] != w[1] ||
      (ctx->n_in == 3 && hwt_ops_numel(g, hwt_ops_in(ctx, 2)) != w[1]))
    return hwt_ops_fail(err, errlen, ctx, "x, w, bias and y disagree on channels");
  for (int i = 0; i < 2; i++)
    if (y[2 + i] != (x[2 + i] - 1) * st[i] + (w[2 + i] - 1) * dl[i] + 1 - pd[i] - pe[i] + op[i])
      return hwt_ops_fail(err, errlen, ctx, "y is not the transposed conv's output shape");
  cg_state *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->n = x[0], s->ic = w[1], s->h = y[2], s->w = y[3];
  s->oc = x[1], s->kh = w[2], s->kw = w[3], s->oh = x[2], s->ow = x[3];
  s->sh = st[0], s->sw = st[1], s->ph = pd[0], s->pw = pd[1], s->dh = dl[0], s->dw = dl[1];
  s->rows = tile_rows(s->oh, s->ow, TILE_COLS);
  int64_t want = (int64_t)UNITS_PER_THREAD * ctx->max_threads;
  s->blocks = s->ic < want ? s->ic : want;
  return data_prepare(ctx, s, err, errlen);
}

static const hwt_op_impl GRAD_CONV[] = {
    {"conv2d_grad_weight", gw_prepare, gw_run, hwt_ops_free_state},
    {"conv2d_grad_data", gd_prepare, gd_run, hwt_ops_free_state},
    {"conv_transpose2d", ct_prepare, gd_run, hwt_ops_free_state},
};

HWT_OPS_FAMILY(hwt_ops_grad_conv, GRAD_CONV)
