/* The Winograd F(2x2, 3x3) template (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016): a 3x3 stride-1 CONV as 16
 * independent GEMMs over 2x2 output tiles, 2.25x fewer multiplications
 * than the direct template, at the price of transforms and a 16/9 larger
 * weight tensor. At stride 2 a tile's 5x5 patch splits into even columns
 * (taps 0 and 2: Winograd F(2, 2)) and odd ones (tap 1), per dimension:
 * 25 products where the direct template has 36 (1.44x fewer), as 16 GEMMs
 * (elements that share a weight slice are one GEMM of more rows). One of
 * the templates the tuner picks per workload (knob `winograd`, conv.c);
 * the tile transforms are per ISA (winograd_body.c), the GEMMs are
 * hwtune's (gemm.h) on weights packed once.
 *
 * Per image: tiles (th x tw, raster order) in blocks of tb; output channels
 * in blocks of kb. A work unit is (image, tile block, channel block); a
 * thread's share is a contiguous range of units, so it stages and
 * transforms each tile block's input once for all the channel blocks it
 * computes, and no unit waits for another (no barrier, as conv.h
 * requires):
 *   1. stage the tile block's input rows: zero-padded, channel-blocked
 *      [C/bs][rows][cols][bs] (NCHW[x]c rows are copied, NCHW ones
 *      transposed by the variant's gathers);
 *   2. V[xi][tile][c] = B^T d B for each tile and channel;
 *   3. M[xi] = V[xi] * U[xi] (tiles x C times C x kb), 16 GEMMs;
 *   4. Y = A^T M A (+ bias, ReLU) into the output tiles. */
#include <stdlib.h>
#include <string.h>
#include "hwtune/gemm.h"
#include "conv_internal.h"

/* Stride 2 runs F(2x2, 3x3) at stride 2 (winograd_body.c): 5x5 input
 * patches, 25 transform elements, whose weights are 16 distinct products
 * (rows/columns 3 and 4 both meet tap 1), so the packed weights have 16
 * slices either way. */
#define XW 16  /* weight slices: 4x4 */
static int is_s2(const hwt_conv_plan *p) { return p->d.stride_h == 2; }
static int n_xi(const hwt_conv_plan *p) { return is_s2(p) ? 25 : 16; }
static int patch(const hwt_conv_plan *p) { return is_s2(p) ? 5 : 4; }
/* Input rows/columns between neighbouring tiles' patches. */
static int step(const hwt_conv_plan *p) { return 2 * p->d.stride_h; }
/* The elements of weight slice ws lie at V/M slots [*start, *start + z):
 * stride 2 keeps those sharing a slice next to each other
 * (hwt_wino_s2_slot), so one GEMM of z x tb rows serves them all and the
 * slice is streamed once per tile block, not z times. Returns z. */
static int slice_slots(const hwt_conv_plan *p, int ws, int *start) {
  if (!is_s2(p)) {
    *start = ws;
    return 1;
  }
  const int a = ws / 4, b = ws % 4;
  *start = hwt_wino_s2_slot(a, b);
  return (a == 3 ? 2 : 1) * (b == 3 ? 2 : 1);
}
/* Largest V + M of one tile block (a thread's workspace holds one). */
#define MAX_BLOCK_BYTES (8L << 20)

int hwt_conv_wino_ok(const hwt_conv_desc *d) {
  return d->R == 3 && d->S == 3 && (d->stride_h == 1 || d->stride_h == 2) &&
         d->stride_w == d->stride_h && d->dil_h == 1 && d->dil_w == 1;
}

static int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int round_up(int v, int a) { return (v + a - 1) / a * a; }

static int gemm_plan(const hwt_conv_plan *p, int m, int n, hwt_gemm_plan *gp) {
  hwt_gemm_desc g = {0};
  g.M = m;
  g.N = n;
  g.K = p->wino_cpad;
  g.lda = p->wino_cpad;
  g.ldb = p->d.K;
  g.ldc = n;
  return hwt_gemm_plan_make(&g, p->isa, 1, gp);
}

static int n_kblocks(const hwt_conv_plan *p) { return (p->d.K + p->wino_kb - 1) / p->wino_kb; }
static int tail_kb(const hwt_conv_plan *p) { return p->d.K - (n_kblocks(p) - 1) * p->wino_kb; }

/* Staged rows of a tile block: at most this many tile rows, step input
 * rows each plus those the last tile row's patches reach past. */
static int staged_rows(const hwt_conv_plan *p) {
  int tiles_rows = (p->wino_tb + p->wino_tw - 1) / p->wino_tw + 1;
  if (tiles_rows > p->wino_th) tiles_rows = p->wino_th;
  return step(p) * tiles_rows + patch(p) - step(p);
}
static int staged_cols(const hwt_conv_plan *p) {
  return step(p) * p->wino_tw + patch(p) - step(p);
}

int hwt_conv_wino_plan(hwt_conv_plan *p) {
  const hwt_conv_desc *d = &p->d;
  if (!hwt_conv_wino_ok(d)) return HWT_EINVAL;
  const int vec = hwt_wino_variant_for(p->isa)->vec;
  /* NCHW input is staged in blocks of one vector (8 lanes at least, so the
   * portable variant's staging moves whole lines); NCHW[x]c keeps ic_bn. */
  p->wino_bs = p->layout == HWT_CONV_NCHWC ? p->p.ic_bn : (vec < 8 ? 8 : vec);
  p->wino_cpad = round_up(d->C, p->wino_bs);
  p->wino_th = (p->OH + 1) / 2;
  p->wino_tw = (p->OW + 1) / 2;
  const int T = p->wino_th * p->wino_tw;
  hwt_gemm_plan gp;
  if (gemm_plan(p, 1, 1, &gp) != HWT_OK) return HWT_EINVAL;
  const int mr = gp.mr;
  hwt_cache_sizes cs;
  hwt_cache_sizes_host(&cs);
  /* Tile block: V (tb x C) and M (tb x kb) for all elements in half of
   * L2, so the GEMMs read V where the transform left it and the output
   * transform reads M likewise; whole micro-tiles of mr rows. Every tile
   * block streams the weights (16 x C x kb) once, though: when they are
   * larger than that, the block grows to their size (up to MAX_BLOCK_BYTES)
   * -- V and M then come from L3 too, but once per block, not per tile.
   * ResNet-18's conv4_x (256x14x14, 4 MB of weights, 49 tiles) had 9
   * blocks of 6 tiles and read 38 MB of weights per run. */
  const long l2 = cs.l2 > 0 ? cs.l2 : 256L << 10;
  int kb = d->K, tb = 0;
  for (int pass = 0; pass < 2; pass++) {
    long per_tile = (long)n_xi(p) * (p->wino_cpad + kb) * (long)sizeof(float);
    long budget = (long)XW * p->wino_cpad * kb * (long)sizeof(float);
    if (budget < l2 / 2) budget = l2 / 2;
    if (budget > MAX_BLOCK_BYTES) budget = MAX_BLOCK_BYTES;
    tb = (int)(budget / per_tile) / mr * mr;
    if (tb < mr) tb = mr;
    if (tb >= T) {
      tb = T;
    } else {
      /* As many blocks as the budget asks, rounded up to a multiple of
       * the threads when the batch is one image (27 blocks on 2 threads
       * leave one idle for a block's time); equal blocks, whole
       * micro-tiles when that keeps the count. */
      int blocks = (T + tb - 1) / tb;
      if (d->N == 1 && blocks > p->nth) blocks = round_up(blocks, p->nth);
      tb = (T + blocks - 1) / blocks;
      if ((T + round_up(tb, mr) - 1) / round_up(tb, mr) == blocks) tb = round_up(tb, mr);
      if (tb > T) tb = T;
    }
    /* Output channel blocks only to give every thread equal work: units
     * (images x tile blocks) that do not divide among the threads split
     * K as well (2 threads, 5 tile blocks: 10 units). */
    int units = d->N * ((T + tb - 1) / tb), nkb = 1;
    if (units < 4 * p->nth && units % p->nth) {
      nkb = p->nth / gcd(units, p->nth);
      if (units * nkb < p->nth) nkb = (p->nth + units - 1) / units;
    }
    const int align = p->layout == HWT_CONV_NCHWC && p->p.oc_bn % 8 == 0 ? p->p.oc_bn : 16;
    kb = round_up((d->K + nkb - 1) / nkb, align);
    if (kb > d->K) kb = d->K;
  }
  p->wino_tb = tb;
  p->wino_kb = kb;
  if (gemm_plan(p, tb, kb, &gp) != HWT_OK) return HWT_EINVAL;
  p->wino_pack_full = ALIGN_FLOATS(gp.packed_b_floats);
  size_t gws = 0;
  p->wino_pack_tail = p->wino_pack_full;
  /* Workspace for every GEMM shape a unit runs: tb rows (and, at stride 2,
   * the 2tb and 4tb of the shared slices) by the full and the tail
   * channel block. The packed weights do not depend on the rows. */
  for (int z = 1; z <= (is_s2(p) ? 4 : 1); z *= 2)
    for (int tail = 0; tail < 2; tail++) {
      if (tail && tail_kb(p) == kb) continue;
      if (gemm_plan(p, z * tb, tail ? tail_kb(p) : kb, &gp) != HWT_OK) return HWT_EINVAL;
      if (tail) p->wino_pack_tail = ALIGN_FLOATS(gp.packed_b_floats);
      if (gp.ws_floats > gws) gws = gp.ws_floats;
    }
  p->w_floats = (size_t)XW * ((size_t)(n_kblocks(p) - 1) * p->wino_pack_full + p->wino_pack_tail);
  p->Hp = staged_rows(p);
  p->Wp = staged_cols(p);
  p->copy_input = 1;
  p->ws_floats = ALIGN_FLOATS((size_t)p->wino_cpad * p->Hp * p->Wp) +
                 ALIGN_FLOATS((size_t)n_xi(p) * tb * p->wino_cpad) +
                 ALIGN_FLOATS((size_t)n_xi(p) * tb * kb) +
                 ALIGN_FLOATS((size_t)4 * p->wino_tw * kb) + ALIGN_FLOATS((size_t)kb) +
                 ALIGN_FLOATS(gws);
  return HWT_OK;
}

/* The weight transform's distinct rows of G, U = G g G^T (16 elements per
 * 3x3 kernel g): F(2x2, 3x3) at stride 1, and at stride 2 (its 5th row
 * repeats the 4th, so it is not stored: slice_slots' mapping). */
static const double G_S1[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
static const double G_S2[4][3] = {{1, 0, 0}, {1, 0, 1}, {0, 0, 1}, {0, 1, 0}};

static void weight_transform(const double G[4][3], const float *g, double u[XW]) {
  double t[4][3];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      u[i * 4 + j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
}

int hwt_conv_wino_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed) {
  const hwt_conv_desc *d = &p->d;
  const int C = d->C, K = d->K, cpad = p->wino_cpad;
  /* U[xi][c][k]: each element's GEMM operand, C x K row-major, zero rows
   * for the padding channels. At prepare, or every run for weights that
   * change (engine/ops/conv.c). */
  float *u = calloc((size_t)XW * cpad * K, sizeof(float));
  if (!u) return HWT_ENOMEM;
  /* Output channels innermost: each element's row of U is written in
   * order (k outermost scattered every write over 16 rows of K floats: a
   * 512x512 layer's transform took ~80 ms, which a training step pays
   * every run). */
  for (int c = 0; c < C; c++)
    for (int k = 0; k < K; k++) {
      double t[XW];
      weight_transform(is_s2(p) ? G_S2 : G_S1, w_oihw + ((size_t)k * C + c) * 9, t);
      for (int xi = 0; xi < XW; xi++) u[((size_t)xi * cpad + c) * K + k] = (float)t[xi];
    }
  const int nkb = n_kblocks(p);
  for (int b = 0; b < nkb; b++) {
    const int n = b == nkb - 1 ? tail_kb(p) : p->wino_kb;
    const size_t per = b == nkb - 1 ? p->wino_pack_tail : p->wino_pack_full;
    hwt_gemm_plan gp;
    gemm_plan(p, p->wino_tb, n, &gp);
    for (int xi = 0; xi < XW; xi++)
      hwt_gemm_pack_b(&gp, u + (size_t)xi * cpad * K + (size_t)b * p->wino_kb,
                      w_packed + (size_t)b * XW * p->wino_pack_full + (size_t)xi * per);
  }
  free(u);
  return HWT_OK;
}

/* Step 1: padded rows [step*r0, step*r0 + rows) of image n into st (the
 * real columns the tiles reach, the rest zero). */
static void stage(const hwt_conv_plan *p, const float *x, int n, int r0, int rows, float *st) {
  const hwt_conv_desc *d = &p->d;
  const int bs = p->wino_bs, cols = p->Wp, CB = p->wino_cpad / bs;
  const size_t row_floats = (size_t)cols * bs;
  const hwt_conv_stage_fn transpose = hwt_conv_variant_for(p->isa)->stage;
  for (int cb = 0; cb < CB; cb++)
    for (int r = 0; r < rows; r++) {
      float *dst = st + ((size_t)cb * rows + r) * row_floats;
      const int ih = step(p) * r0 + r - d->pad_h;
      if (ih < 0 || ih >= d->H) {
        memset(dst, 0, row_floats * sizeof(float));
        continue;
      }
      const int c0 = cb * bs, nch = d->C - c0 < bs ? d->C - c0 : bs;
      memset(dst, 0, (size_t)d->pad_w * bs * sizeof(float));
      /* Stride 2 without padding can leave the last input column unread. */
      const int W = d->W < cols - d->pad_w ? d->W : cols - d->pad_w;
      const int end = d->pad_w + W;
      memset(dst + (size_t)end * bs, 0, (size_t)(cols - end) * bs * sizeof(float));
      float *o = dst + (size_t)d->pad_w * bs;
      if (p->layout == HWT_CONV_NCHWC) {
        memcpy(o, x + (((size_t)n * (d->C / bs) + cb) * d->H + ih) * d->W * bs,
               (size_t)W * bs * sizeof(float));
        continue;
      }
      if (nch < bs) memset(o, 0, (size_t)W * bs * sizeof(float));
      const size_t hw = (size_t)d->H * d->W;
      const float *src = x + ((size_t)n * d->C + c0) * hw + (size_t)ih * d->W;
      /* o[col * bs + ch] = src[ch * hw + col], 16 columns per call. */
      for (int c = 0; c < W; c += 16)
        transpose(src + c, (long)hw, nch, W - c < 16 ? W - c : 16, o + (size_t)c * bs, bs);
    }
}

/* The transform elements a tile's outputs need. A^T's first row reads
 * elements {0, 1, 2} of each dimension at stride 1 and {0, 1, 3} at stride
 * 2 (winograd_body.c), so a tile whose second output row (column) lies past
 * the output needs no other element of that dimension, and its GEMM rows
 * for those elements are not computed (odd output sizes). ResNet-18's 7x7
 * layers: 4x4 tiles, 7 of them on an edge; the GEMMs run 324 of 400 tile
 * rows at stride 2 and 225 of 256 at stride 1. Measured (Zen 1, AVX2, 1
 * thread, CPU time, load ~5): 256x14x14 -> 512 at stride 2 went from 32.5
 * to 36.3-37.3 GFLOPS (ORT 32.0), 512x7x7 from 1.41x to 1.55x ORT. */
static int first_output_reads(const hwt_conv_plan *p, int e) {
  return is_s2(p) ? e == 0 || e == 1 || e == 3 : e < 3;
}

/* A tile's class: bit 1 when its second output row lies past the output,
 * bit 0 when its second output column does. */
static int tile_class(const hwt_conv_plan *p, int tr, int tc) {
  return (p->OH - 2 * tr < 2) << 1 | (p->OW - 2 * tc < 2);
}

/* GEMM plans by shape: the rows of a slice's GEMM vary with the elements'
 * tiles (edge tiles, tail blocks). */
#define GP_CACHE 8
typedef struct {
  hwt_gemm_plan gp[GP_CACHE];
  int m[GP_CACHE], n[GP_CACHE], next;
} gemm_cache;

static const hwt_gemm_plan *cached_plan(const hwt_conv_plan *p, gemm_cache *gc, int m, int n) {
  for (int i = 0; i < GP_CACHE; i++)
    if (gc->m[i] == m && gc->n[i] == n) return &gc->gp[i];
  const int i = gc->next;
  gc->next = (i + 1) % GP_CACHE;
  gemm_plan(p, m, n, &gc->gp[i]);
  gc->m[i] = m;
  gc->n[i] = n;
  return &gc->gp[i];
}

void hwt_conv_wino_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth) {
  const hwt_conv_desc *d = &p->d;
  const hwt_wino_variant *v = hwt_wino_variant_for(p->isa);
  const int tw = p->wino_tw, tb = p->wino_tb, kb = p->wino_kb, bs = p->wino_bs;
  const int cpad = p->wino_cpad, rows = p->Hp, cols = p->Wp, OH = p->OH, OW = p->OW;
  const int T = p->wino_th * tw, ntb = (T + tb - 1) / tb, nkb = n_kblocks(p);
  const int xin = n_xi(p), sp = step(p);
  void (*const in_tile)(const float *, long, long, int, float *const *, long) =
      is_s2(p) ? v->in_tile_s2 : v->in_tile;
  void (*const out_tile)(const float *const *, long, int, const float *, int, float, int,
                         float *const[4], const float *const *) = is_s2(p) ? v->out_tile_s2 : v->out_tile;
  const long units = (long)d->N * ntb * nkb;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  float *st = ws;
  float *V = st + ALIGN_FLOATS((size_t)cpad * rows * cols);
  float *M = V + ALIGN_FLOATS((size_t)xin * tb * cpad);
  float *orow = M + ALIGN_FLOATS((size_t)xin * tb * kb);
  float *zero = orow + ALIGN_FLOATS((size_t)4 * tw * kb);
  float *gws = zero + ALIGN_FLOATS((size_t)kb);
  memset(zero, 0, (size_t)kb * sizeof(float));
  const hwt_conv_stage_fn transpose = hwt_conv_variant_for(p->isa)->stage;
  const int blocked_out = p->layout == HWT_CONV_NCHWC, obn = p->p.oc_bn;
  /* needs[class][xi]: whether a tile of that class (tile_class) needs the
   * element at V/M slot xi. */
  unsigned char needs[4][25];
  for (int i = 0; i < patch(p); i++)
    for (int j = 0; j < patch(p); j++) {
      const int xi = is_s2(p) ? hwt_wino_s2_slot(i, j) : i * 4 + j;
      for (int c = 0; c < 4; c++)
        needs[c][xi] = (!(c & 2) || first_output_reads(p, i)) &&
                       (!(c & 1) || first_output_reads(p, j));
    }
  /* V and M of a tile block hold, slot after slot, each element's rows for
   * the block's tiles that need it (raster order): slot xi's rows start at
   * row0[xi], and row0[xin] is their total. Elements sharing a weight slice
   * are adjacent slots, so one GEMM serves them all. */
  int row0[26];
  long have = -1;  /* (image, tile block) whose V this thread holds */
  gemm_cache gc;
  for (int i = 0; i < GP_CACHE; i++) gc.m[i] = gc.n[i] = -1;
  gc.next = 0;
  for (long u = lo; u < hi; u++) {
    const int n = (int)(u / ((long)ntb * nkb)), bi = (int)(u / nkb % ntb), ki = (int)(u % nkb);
    const int t0 = bi * tb, t1 = t0 + tb < T ? t0 + tb : T, r0 = t0 / tw;
    int cnt[25];
    if (u / nkb != have) {
      for (int xi = 0; xi < xin; xi++) cnt[xi] = 0;
      for (int t = t0; t < t1; t++) {
        const unsigned char *need = needs[tile_class(p, t / tw, t % tw)];
        for (int xi = 0; xi < xin; xi++) cnt[xi] += need[xi];
      }
      row0[0] = 0;
      for (int xi = 0; xi < xin; xi++) row0[xi + 1] = row0[xi] + cnt[xi];
      const int srows = sp * ((t1 - 1) / tw - r0) + patch(p);
      stage(p, x, n, r0, srows, st);
      for (int xi = 0; xi < xin; xi++) cnt[xi] = 0;
      for (int t = t0; t < t1; t++) {
        const int lr = sp * (t / tw - r0), lc = sp * (t % tw);
        float *vp[25];
        const unsigned char *need = needs[tile_class(p, t / tw, t % tw)];
        for (int xi = 0; xi < xin; xi++)
          vp[xi] = need[xi] ? V + (size_t)(row0[xi] + cnt[xi]++) * cpad : NULL;
        for (int cb = 0; cb < cpad / bs; cb++)
          in_tile(st + (((size_t)cb * srows + lr) * cols + lc) * bs, (long)cols * bs, bs, bs, vp,
                  (long)cb * bs);
      }
      have = u / nkb;
    }
    const int k0 = ki * kb, kn = ki == nkb - 1 ? d->K - k0 : kb;
    const float *wk = w + (size_t)ki * XW * p->wino_pack_full;
    const size_t per = ki == nkb - 1 ? p->wino_pack_tail : p->wino_pack_full;
    for (int sl = 0; sl < XW; sl++) {
      int at;
      const int z = slice_slots(p, sl, &at);
      const int gm = row0[at + z] - row0[at];
      if (gm == 0) continue;
      hwt_gemm_run_part_packed(cached_plan(p, &gc, gm, kn), V + (size_t)row0[at] * cpad,
                               wk + (size_t)sl * per, M + (size_t)row0[at] * kn, NULL, gws, 0,
                               1);
    }
    for (int xi = 0; xi < xin; xi++) cnt[xi] = 0;
    for (int t = t0; t < t1; t++) {
      const int oh = 2 * (t / tw), ow = 2 * (t % tw);
      const float *mp[25];
      const unsigned char *need = needs[tile_class(p, t / tw, t % tw)];
      for (int xi = 0; xi < xin; xi++)
        mp[xi] = need[xi] ? M + (size_t)(row0[xi] + cnt[xi]++) * kn : zero;
      if (!blocked_out) {
        /* NCHW: the tile's 2x2 pixels x kn channels into the two output
         * rows held pixel-major (orow), each row segment transposed into
         * the kn channel rows once its tile row ends here. */
        const long owp = 2L * tw;
        float *dst[4];
        for (int q = 0; q < 4; q++) dst[q] = orow + ((q / 2) * owp + ow + q % 2) * kn;
        out_tile(mp, 0, kn, bias ? bias + k0 : NULL, res ? 0 : d->relu, d->relu_max,
                 res ? 0 : d->act, dst, NULL);
        if (t % tw != tw - 1 && t != t1 - 1) continue;
        const int c0 = t / tw == t0 / tw ? 2 * (t0 % tw) : 0, c1 = ow + 2 < OW ? ow + 2 : OW;
        for (int a = 0; a < 2 && oh + a < OH; a++) {
          const size_t at = (((size_t)n * d->K + k0) * OH + oh + a) * OW + c0;
          transpose(orow + (a * owp + c0) * kn, kn, c1 - c0, kn, y + at, (long)OH * OW);
          if (res) {
            hwt_conv_residual_rows(y + at, res + at, (long)OH * OW, kn, c1 - c0, d->relu,
                                   d->relu_max);
            hwt_conv_act_rows(p->isa, d->act, y + at, (long)OH * OW, kn, c1 - c0);
          }
        }
        continue;
      }
      for (int k = k0; k < k0 + kn;) {
        const int run = obn - k % obn < k0 + kn - k ? obn - k % obn : k0 + kn - k;
        float *dst[4];
        const float *rq[4];
        for (int q = 0; q < 4; q++) {
          const int h = oh + q / 2, c = ow + q % 2;
          const size_t off =
              ((((size_t)n * (d->K / obn) + k / obn) * OH + h) * OW + c) * obn + k % obn;
          dst[q] = h < OH && c < OW ? y + off : NULL;
          rq[q] = res && h < OH && c < OW ? res + off : NULL;
        }
        out_tile(mp, k - k0, run, bias ? bias + k : NULL, d->relu, d->relu_max, d->act, dst,
                 res ? rq : NULL);
        k += run;
      }
    }
  }
}
