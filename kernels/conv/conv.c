/* CONV plan, knob declaration and dispatch. The NCHW[x]c template's search
 * space is declared here, next to the template that uses it (as TVM's x86
 * conv2d does), and the default is derived from the SIMD width. */
#include <stdlib.h>
#include <string.h>
#include "conv_internal.h"
#include "hwtune/gemm.h"
#include "../gemm/gemm_internal.h"

#ifndef ROWS_OUTER_ENABLED
#define ROWS_OUTER_ENABLED 1
#endif

/* Floats per channel of one staged row: sw phases of PL = ceil(Wp / sw). */
static long stage_ic_stride(const hwt_conv_plan *p) {
  int sw = p->d.stride_w;
  return (long)sw * ((p->Wp + sw - 1) / sw);
}

int hwt_conv_out_dims(const hwt_conv_desc *d, int *oh, int *ow) {
  if (!d || d->N < 1 || d->C < 1 || d->H < 1 || d->W < 1 || d->K < 1 || d->R < 1 ||
      d->S < 1 || d->stride_h < 1 || d->stride_w < 1 || d->pad_h < 0 || d->pad_w < 0 ||
      d->pad_h_end < 0 || d->pad_w_end < 0 || d->dil_h < 1 || d->dil_w < 1 || d->act < 0 ||
      d->act > HWT_CONV_ACT_HARD_SWISH || (d->act && d->relu))
    return HWT_EINVAL;
  /* In long: a dilation or padding near INT_MAX must not wrap; the padded
   * extent (which bounds every staged row and tap offset) must fit an int. */
  long hp = (long)d->H + d->pad_h + d->pad_h_end, wp = (long)d->W + d->pad_w + d->pad_w_end;
  long h = hp - ((long)(d->R - 1) * d->dil_h + 1);
  long w = wp - ((long)(d->S - 1) * d->dil_w + 1);
  if (h < 0 || w < 0 || hp > 0x7fffffffL || wp > 0x7fffffffL) return HWT_EINVAL;
  if (oh) *oh = (int)(h / d->stride_h + 1);
  if (ow) *ow = (int)(w / d->stride_w + 1);
  return HWT_OK;
}

static void divisors(int n, hwt_conv_knob *k) {
  k->n = 0;
  for (int i = 1; i <= n && k->n < HWT_CONV_KNOB_MAX; i++)
    if (n % i == 0) k->v[k->n++] = i;
}

static int knob_has(const hwt_conv_knob *k, int v) {
  for (int i = 0; i < k->n; i++)
    if (k->v[i] == v) return 1;
  return 0;
}

/* NeoCPU searches reg_n up to 32; beyond the register file the kernels split
 * a block into equal pieces, so larger values would only repeat smaller
 * ones. Values that do not divide OW leave a shorter last block; powers of
 * two are kept among those so widths with few divisors (primes) still get
 * wide blocks. */
#define REG_N_MAX 32

int hwt_conv_knobs(const hwt_conv_desc *d, hwt_isa isa, hwt_conv_knobs_t *out) {
  int OW;
  if (!out || hwt_conv_out_dims(d, 0, &OW) != HWT_OK) return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  divisors(d->C, &out->ic_bn);
  divisors(d->K, &out->oc_bn);
  out->reg_n.n = 0;
  for (int r = 1; r <= REG_N_MAX && r <= OW; r++)
    if (OW % r == 0 || (r & (r - 1)) == 0) out->reg_n.v[out->reg_n.n++] = r;
  out->unroll_ker.n = 2;
  out->unroll_ker.v[0] = 0;
  out->unroll_ker.v[1] = 1;
  /* Two rows fill the register file only with half a row's pixels each;
   * more rows would leave too few pixels per row to amortise a block. */
  int OH;
  hwt_conv_out_dims(d, &OH, 0);
  out->reg_h.n = OH > 1 ? 2 : 1;
  out->reg_h.v[0] = 1;
  out->reg_h.v[1] = 2;
  /* The Winograd template (winograd.c) where it applies: F(2x2, 3x3) at
   * stride 1 or 2. */
  out->winograd.n = hwt_conv_wino_ok(d) ? 2 : 1;
  out->winograd.v[0] = 0;
  out->winograd.v[1] = 2;
  return HWT_OK;
}

static int largest_divisor_le(int n, int cap) {
  for (int b = cap < n ? cap : n; b > 1; b--)
    if (n % b == 0) return b;
  return 1;
}

/* oc_bn with the best SIMD lane use among the divisors of K up to
 * DEFAULT_NV vectors per pixel, so K = 17 gets 17 (two vectors, 53% of
 * lanes) rather than 1 (6%); ties go to the wider block. Wider blocks (up to
 * the variant's nv_max) stay in the tuner's space: 2 vectors x 6 pixels
 * measured ahead of 4 x 3 (MLAS's shape) on 5 of the 7 ResNet-18 3x3 layers
 * on AVX2 (Zen 3, 1 thread, best of 9 interleaved with ONNX Runtime, busy
 * machine: e.g. 64x56x56 1.01x vs 0.88x ORT, 512x7x7 0.99x vs 0.67x), and
 * 2 vectors x 14 pixels measured 91-100 vs 71-77 GFLOPS for 1 x 28 on
 * AVX-512 (Cascade Lake). */
#define DEFAULT_NV 2
static int default_oc_bn(int K, int vec) {
  int best = 1;
  double best_use = 0.0;
  for (int b = 1; b <= K && b <= DEFAULT_NV * vec; b++) {
    if (K % b) continue;
    double use = (double)b / (((b + vec - 1) / vec) * vec);
    if (use >= best_use) best_use = use, best = b;
  }
  return best;
}

/* row() splits a block wider than the register file (cap pixels) into
 * equal pieces, so reg_n is judged by the pieces it leaves: the widest
 * average piece over the row (fewest partial blocks), ties to the smaller
 * reg_n. Returns that average. */
static double best_reg_n(const hwt_conv_knob *legal, int OW, int cap, int *reg_n) {
  *reg_n = 1;
  double best = 0.0;
  for (int i = 0; i < legal->n; i++) {
    int r = legal->v[i], pieces = 0;
    for (int ow = 0; ow < OW; ow += r) {
      int blk = OW - ow < r ? OW - ow : r;
      pieces += (blk + cap - 1) / cap;
    }
    double avg = (double)OW / pieces;
    if (avg > best) best = avg, *reg_n = r;
  }
  return best;
}

/* Winograd F(2x2, 3x3) by default for 3x3 stride-1 and -2 CONVs with at least
 * this many input and output channels. Measured against the direct
 * template's default (Zen 3, AVX2, 1 thread, best of 10, NCHW / NCHWc
 * tensors): 32x32 at 56x56 1.10x / 1.51x, 64x64 at 7x7 1.10x / 1.09x, the
 * ResNet-18 3x3 layers (64-512 channels) 1.05-2.0x; with fewer channels
 * the transforms outweigh the GEMMs: 16x16 at 56x56 0.84x / 1.14x, 8x8
 * 0.40x, 3->64 at 224x224 0.28x. The same rule at stride 2 (EPYC Zen 1,
 * AVX2, 1 thread, CPU-time medians of 15 alternated samples, NCHW): the
 * ResNet-18 layers 64->128 at 56x56 1.13x, 128->256 at 28x28 1.31x,
 * 256->512 at 14x14 1.04x; 32->32 and 32->64 at 56x56 1.02x / 1.06x,
 * 48->96 at 28x28 1.14x, 32->64 at 15x15 1.05x; below 32 channels
 * 16->16 / 16->32 at 56x56 0.81x / 0.86x, 8->16 at 112x112 0.69x, 3->32
 * at 224x224 0.27x. */
#define WINO_MIN_CH 32

/* Untuned fallback, after TVM's x86 conv2d fallback: oc_bn from the SIMD
 * width (above), ic_bn the largest divisor of C up to oc_bn (16, 32 and 64
 * measured within noise of each other at 256x14x14 and 128x28x28), reg_n
 * the legal value whose register blocks are widest on average (above),
 * unroll_ker off, one row per block unless the row is too narrow (below);
 * Winograd where WINO_MIN_CH says (above). */
int hwt_conv_default_params(const hwt_conv_desc *d, hwt_isa isa, hwt_conv_params *out) {
  hwt_conv_knobs_t k;
  int st = hwt_conv_knobs(d, isa, &k);
  if (st != HWT_OK) return st;
  const hwt_conv_variant *v = hwt_conv_variant_for(isa);
  int OW;
  hwt_conv_out_dims(d, 0, &OW);
  out->oc_bn = default_oc_bn(d->K, v->vec);
  out->ic_bn = largest_divisor_le(d->C, out->oc_bn);
  int nv = (out->oc_bn + v->vec - 1) / v->vec;
  int cap = v->caps[nv < v->nv_max ? nv : v->nv_max];
  out->unroll_ker = 0;
  out->reg_h = 1;
  out->winograd = hwt_conv_wino_ok(d) && d->C >= WINO_MIN_CH && d->K >= WINO_MIN_CH ? 2 : 0;
  double acc = best_reg_n(&k.reg_n, OW, cap, &out->reg_n) * nv;
  /* Narrow outputs leave one row too few accumulators to cover the FMA
   * latency (4 cycles x 2 pipes on Zen 3 and Skylake-class cores: 8
   * independent chains): two rows share each weight load and double the
   * block. Measured on 512x7x7 (AVX2, Zen 3, 1 thread, CPU time, best of
   * 9 interleaved with ONNX Runtime): 2 rows x 7 pixels 0.91x ORT vs 1 row
   * 0.83x (blocks of 4 and 3 pixels x 2 vectors); on AVX-512 the 7-pixel
   * row is one 14-accumulator block and two rows measured no better (71.5
   * vs 73.1 GFLOPS, Cascade Lake), which this rule leaves at one row. */
  int OH;
  hwt_conv_out_dims(d, &OH, 0);
  if (!v->block_scratch && OH > 1 && acc < 8.0 && cap >= 2) {
    out->reg_h = 2;
    best_reg_n(&k.reg_n, OW, cap / 2, &out->reg_n);
  }
  return HWT_OK;
}

/* 1x1 stride-1 unpadded CONVs on NCHW tensors with default params run as
 * one GEMM per image, y[n] (K x OH*OW) = W (K x C) . x[n] (C x OH*OW),
 * through hwtune's GEMM (packing, blocking and micro-kernel per ISA).
 * Measured against the template's default on GoogleNet and ResNet 1x1
 * shapes (Zen 3, AVX2, 1 thread, thread-time medians, NCHW): 192->64 at
 * 28x28 77.5 vs 62.0 GFLOPS, 192->96 83.0 vs 62.6, 256->128 86.7 vs 61.2,
 * 480->192 at 14x14 78.2 vs 56.7, 832->384 at 7x7 59.3 vs 53.2, 64->256 at
 * 56x56 84.9 vs 56.4, 1024->256 at 14x14 82.1 vs 58.1; but 192->16 49.5 vs
 * 53.7: too few output channels (rows of A) to amortise packing x[n],
 * hence a least K, the variant's pw_min_k (measured per variant on Zen 4:
 * nchwc_body.c); at K = 32 the GEMM still led, 1.03-1.26x (192->32 at
 * 28x28, 480->32 at 14x14, 256->32 at 56x56, 64->32, 832->32 at 7x7).
 * (The packed-A GEMM runs the blocked path whatever K, also at most
 * HWT_GEMV_MAX_M rows, so the epilogue's share is always that path's.)
 * Explicit params always mean the template: they are its knobs. */

/* A 1x1 stride-1 unpadded CONV: per image a (K x C) . (C x H*W) product,
 * whatever the image's shape. */
static int pointwise(const hwt_conv_desc *d) {
  return d->R == 1 && d->S == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 &&
         d->pad_w == 0 && d->pad_h_end == 0 && d->pad_w_end == 0;
}

static int gemm_ok(const hwt_conv_desc *d, hwt_isa isa) {
  return pointwise(d) && d->K >= hwt_conv_variant_for(isa)->pw_min_k;
}

/* Small images stay on the template (the variant's pw_max_hw: its
 * register block against the GEMM's tile, nchwc_body.c). */
static int gemm_default(const hwt_conv_desc *d, int OH, int OW, hwt_isa isa) {
  return gemm_ok(d, isa) && (long)OH * OW > hwt_conv_variant_for(isa)->pw_max_hw;
}

/* The pointwise CONV's image as one row of H*W pixels: the same tensors
 * (an NCHW channel plane is contiguous), one output row per image. */
static hwt_conv_desc flat_desc(const hwt_conv_desc *d) {
  hwt_conv_desc f = *d;
  f.W = d->H * d->W;
  f.H = 1;
  return f;
}

/* Whether a pointwise NCHW CONV with default params runs flattened: when
 * its output row is narrower than the register block (AVX-512 at 7x7: a
 * 7-pixel row leaves half of the 14 x 2-vector block empty), and the
 * flattened plan's units (one per image and oc block) split evenly over
 * nth threads or are many: 2-thread critical path (the longer share's
 * thread time, medians of 21 alternated runs, Zen 4 AVX-512, under load)
 * flattened vs by rows 0.87x on 960->320 at 7x7 (10 oc blocks of 32),
 * 0.93x on 320->1280 and 1152->320, 0.95x on 1152->192 (6 blocks), but
 * 1.11x on 960->160 (5 blocks: 3 vs 2) and 1.09x on 576->160 at 7x7;
 * 1 thread flattened vs by rows 0.90-0.97x on the 7x7 shapes of
 * nchwc_body.c's PW_MAX_HW. */
static int flat_ok(const hwt_conv_desc *d, int OW, hwt_isa isa, int nth) {
  const hwt_conv_variant *v = hwt_conv_variant_for(isa);
  /* Small images only (those pw_max_hw keeps on the template): the NCHW
   * output row is staged whole in each thread's workspace. */
  if (!pointwise(d) || d->H == 1 || (long)d->H * d->W > v->pw_max_hw) return 0;
  hwt_conv_params p;
  const hwt_conv_desc f = flat_desc(d);
  if (hwt_conv_default_params(d, isa, &p) != HWT_OK) return 0;
  const int nv = (p.oc_bn + v->vec - 1) / v->vec;
  if (OW * p.reg_h >= v->caps[nv < v->nv_max ? nv : v->nv_max]) return 0;
  if (hwt_conv_default_params(&f, isa, &p) != HWT_OK) return 0;
  const long units = (long)d->N * (d->K / p.oc_bn);
  return units % nth == 0 || units >= 8L * nth;
}

/* The template's view of a flattened plan (run_part): one row per image. */
static const hwt_conv_plan *flat_view(const hwt_conv_plan *p, hwt_conv_plan *q) {
  if (!p->flat) return p;
  *q = *p;
  q->d = flat_desc(&p->d);
  q->OW = p->OH * p->OW;
  q->OH = 1;
  q->Wp = q->d.W;
  q->Hp = 1;
  return q;
}

static void gemm_desc_of(const hwt_conv_desc *d, int hw, hwt_gemm_desc *g) {
  memset(g, 0, sizeof *g);
  g->M = d->K;
  g->N = hw;
  g->K = d->C;
  g->lda = d->C;
  g->ldb = hw;
  g->ldc = hw;
}

int hwt_conv_plan_make(const hwt_conv_desc *d, hwt_conv_layout layout,
                       const hwt_conv_params *params, hwt_isa isa, int nth,
                       hwt_conv_plan *out) {
  int OH, OW;
  if (!out || nth < 1 || hwt_conv_out_dims(d, &OH, &OW) != HWT_OK) return HWT_EINVAL;
  if (layout != HWT_CONV_NCHW && layout != HWT_CONV_NCHWC && layout != HWT_CONV_NCHW_DIRECT &&
      layout != HWT_CONV_NCHW_GEMM && layout != HWT_CONV_NCHW_STEM)
    return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  /* NCHW with default params stays runnable whatever the kernel width. */
  if (layout == HWT_CONV_NCHW && !params && d->S > HWT_CONV_MAX_S) layout = HWT_CONV_NCHW_DIRECT;
  /* Strided 1x1: the stride-1 CONV of the subsampled input where that
   * one runs as the GEMM or the flattened template (pw_stride.c). */
  if (layout == HWT_CONV_NCHW && !params && hwt_conv_pw_strided(d) &&
      hwt_conv_pw_plan(d, isa, nth, out) == HWT_OK)
    return HWT_OK;
  memset(out, 0, sizeof(*out));
  out->d = *d;
  out->layout = layout;
  out->isa = isa;
  out->nth = nth;
  out->OH = OH;
  out->OW = OW;
  out->x_floats = (size_t)d->N * d->C * d->H * d->W;
  out->y_floats = (size_t)d->N * d->K * OH * OW;
  out->w_floats = (size_t)d->K * d->C * d->R * d->S;
  out->Hp = d->H;
  out->Wp = d->W;
  if (layout == HWT_CONV_NCHW && !params && gemm_default(d, OH, OW, isa))
    layout = HWT_CONV_NCHW_GEMM;
  /* Few input channels (the image's): the stem kernel (stem.c says where). */
  if (layout == HWT_CONV_NCHW && !params && hwt_conv_stem_default(d, isa))
    layout = HWT_CONV_NCHW_STEM;
  if (layout == HWT_CONV_NCHW_STEM) return hwt_conv_stem_plan(out);
  if (layout == HWT_CONV_NCHW && !params && flat_ok(d, OW, isa, nth)) {
    const hwt_conv_desc f = flat_desc(d);
    int st = hwt_conv_plan_make(&f, layout, NULL, isa, nth, out);
    if (st != HWT_OK) return st;
    out->d = *d;
    out->OH = OH;
    out->OW = OW;
    out->Hp = d->H;
    out->Wp = d->W;
    out->flat = 1;
    return HWT_OK;
  }
  if (layout == HWT_CONV_NCHW_GEMM) {
    hwt_gemm_desc g;
    hwt_gemm_plan gp;
    gemm_desc_of(d, OH * OW, &g);
    if (!gemm_ok(d, isa) || hwt_gemm_plan_make(&g, isa, nth, &gp) != HWT_OK)
      return HWT_EINVAL;
    out->layout = layout;
    if (hwt_conv_pw_t_ok(OH * OW, isa)) return hwt_conv_pw_t_plan(out);
    /* The weights are the GEMM's A, packed once into its micro-panels
     * (hwt_conv_pack_weights): MobileNetV2's 1x1 CONVs repacked them in
     * every thread on every run, e.g. 960->160 at 7x7 packed 154K floats
     * for 15 MFLOP, and under AVX-512's A-in-L1 order once more per nc
     * column block. benchmarks/bench_pointwise.py --baseline-lib (the
     * build before, same ctypes calls, 1 thread, medians of 31
     * interleaved thread-time samples, Zen 4 AVX-512, under load ~17):
     * before / after 1.00-1.32x over 12 MobileNetV2 / EfficientNet-B0
     * shapes, 160->960 at 7x7 1.22x, 672->192 at 7x7 1.32x, 320->1280 at
     * 7x7 1.16x, 96->576 at 14x14 1.08x, 16->96 at 112x112 1.00x. */
    out->w_floats = hwt_gemm_packed_a_floats(&gp);
    /* run_part plans the GEMM for the nth it is called with, which may be
     * below the plan's (a corun scheduler gives an op fewer threads when
     * few are idle), and a share of fewer threads can need a larger
     * packing buffer: size for every count up to nth. (ASan: a 1x1 CONV
     * of MobileNetV2 run by corun at per-op thread counts wrote past its
     * workspace.) */
    out->ws_floats = hwt_gemm_packed_a_ws_floats(&gp);
    for (int t = 1; t < nth; t++) {
      hwt_gemm_plan gt;
      if (hwt_gemm_plan_make(&g, isa, t, &gt) == HWT_OK &&
          hwt_gemm_packed_a_ws_floats(&gt) > out->ws_floats)
        out->ws_floats = hwt_gemm_packed_a_ws_floats(&gt);
    }
    return HWT_OK;
  }
  if (layout == HWT_CONV_NCHW_DIRECT) {
    const int G = HWT_CONV_DIRECT_OCG;
    out->w_floats = (size_t)((d->K + G - 1) / G) * G * d->C * d->R * d->S;
    out->ws_floats = ALIGN_FLOATS((size_t)G * OW);
    return HWT_OK;
  }
  hwt_conv_params p;
  if (params) {
    hwt_conv_knobs_t k;
    hwt_conv_knobs(d, isa, &k);
    if (!knob_has(&k.ic_bn, params->ic_bn) || !knob_has(&k.oc_bn, params->oc_bn) ||
        !knob_has(&k.reg_n, params->reg_n) || !knob_has(&k.unroll_ker, params->unroll_ker) ||
        !knob_has(&k.reg_h, params->reg_h) || !knob_has(&k.winograd, params->winograd))
      return HWT_EINVAL;
    p = *params;
  } else {
    hwt_conv_default_params(d, isa, &p);
  }
  out->p = p;
  if (p.winograd) return hwt_conv_wino_plan(out);
  if (layout == HWT_CONV_NCHWC && hwt_conv_nhwc_gemm_ok(d, &p)) return hwt_conv_nhwc_gemm_plan(out);
  if (d->S > HWT_CONV_MAX_S) return HWT_EINVAL;
  /* The row kernels always read a staged copy: zero padding makes every
   * register block run the same unclipped loop (border blocks would fall to
   * one pixel), and the transposed rows give them a compile-time pixel
   * stride (a runtime stride spilled the block's addresses: 34 GFLOPS vs
   * 61-100 on 64x56x56 3x3, AVX-512, shared machine). Only the extent the
   * output reads is staged. The exception: an unpadded NCHW input with
   * stride_w 1 already has that layout up to runtime strides between
   * channels and rows, so the kernels read it in place (GoogleNet's 1x1
   * convs: otherwise every thread copies the whole input for only 2*K
   * flops per float copied). */
  out->copy_input = !(layout == HWT_CONV_NCHW && d->pad_h == 0 && d->pad_w == 0 &&
                      d->pad_h_end == 0 && d->pad_w_end == 0 && d->stride_w == 1);
  /* Dilation only spreads the taps: the staged rows are the same, the
   * kernels step dil_h rows and dil_w columns between taps (koff). */
  out->Hp = (OH - 1) * d->stride_h + (d->R - 1) * d->dil_h + 1;
  out->Wp = (OW - 1) * d->stride_w + (d->S - 1) * d->dil_w + 1;
  size_t ws = out->copy_input ? ALIGN_FLOATS((size_t)d->C * out->Hp * stage_ic_stride(out)) : 0;
  /* Rows outer when the staged input outweighs the weights: split over oc
   * blocks, every thread would stage (and stream from L2/L3 once per oc
   * block) the whole input to read a fraction of weights that fit in L2.
   * ResNet-18's conv3_1 (64x56x56 -> 128, stride 2; 830K staged floats vs
   * 74K weights), NCHW on the engine, Zen 3 AVX2, quiet, medians of 1.5 s,
   * three alternated process pairs: 2 threads 135.8-137.5 -> 151.5-153.2
   * GFLOPS, 1 thread 73.4-75.4 -> 76.2-77.5; the layers the rule leaves
   * alone (conv4_1, conv5_1) unchanged. */
  out->rows_outer = ROWS_OUTER_ENABLED && out->copy_input &&
                    (size_t)d->C * out->Hp * stage_ic_stride(out) > out->w_floats;
  if (hwt_conv_variant_for(isa)->block_scratch) ws += ALIGN_FLOATS((size_t)p.reg_n * p.oc_bn);
  /* NCHW output: reg_h rows of the register blocks' [OW][oc_bn] before they
   * are transposed into NCHW rows. */
  if (layout == HWT_CONV_NCHW) ws += ALIGN_FLOATS((size_t)p.reg_h * OW * p.oc_bn);
  out->ws_floats = ws;
  return HWT_OK;
}

int hwt_conv_pack_weights(const hwt_conv_plan *p, const float *w_oihw, float *w_packed) {
  if (!p || !w_oihw || !w_packed) return HWT_EINVAL;
  const hwt_conv_desc *d = &p->d;
  if (p->layout == HWT_CONV_NCHW_DIRECT) {
    hwt_conv_direct_pack(d, w_oihw, w_packed);
    return HWT_OK;
  }
  if (p->layout == HWT_CONV_NCHW_STEM) {
    hwt_conv_stem_pack(p, w_oihw, w_packed);
    return HWT_OK;
  }
  if (p->layout == HWT_CONV_NCHW_GEMM && p->gemm_t) return hwt_conv_pw_t_pack(p, w_oihw, w_packed);
  if (p->layout == HWT_CONV_NCHW_GEMM) { /* A of the GEMM: OIHW is K x C already */
    hwt_gemm_desc g;
    hwt_gemm_plan gp;
    gemm_desc_of(d, p->OH * p->OW, &g);
    if (hwt_gemm_plan_make(&g, p->isa, 1, &gp) != HWT_OK) return HWT_EINVAL;
    return hwt_gemm_pack_a(&gp, w_oihw, w_packed);
  }
  if (p->p.winograd) return hwt_conv_wino_pack(p, w_oihw, w_packed);
  if (p->nhwc_gemm) {
    /* OIHW (K x C) to the blocked OIHW[C]i[K]o, [C][K]: the GEMM's B. */
    float *b = malloc((size_t)d->K * d->C * sizeof(float));
    if (!b) return HWT_ENOMEM;
    int st = hwt_layout_oihw_to_blocked(d->K, d->C, 1, 1, d->C, d->K, w_oihw, b);
    if (st == HWT_OK) st = hwt_conv_nhwc_gemm_pack(p, b, w_packed);
    free(b);
    return st;
  }
  return hwt_layout_oihw_to_blocked(d->K, d->C, d->R, d->S, p->p.ic_bn, p->p.oc_bn, w_oihw,
                                    w_packed);
}

int hwt_conv_pack_blocked_weights(const hwt_conv_plan *p, const float *w_blocked,
                                  float *w_packed) {
  if (!p || !w_blocked || !w_packed || !p->nhwc_gemm) return HWT_EINVAL;
  return hwt_conv_nhwc_gemm_pack(p, w_blocked, w_packed);
}

/* Positions [*lo, *hi) of phase ph (of pl) whose padded column ph + pos*sw
 * is a real input column; the rest of the phase is zero padding. */
static void phase_real(const hwt_conv_plan *p, int ph, int pl, int *lo, int *hi) {
  const hwt_conv_desc *d = &p->d;
  const int sw = d->stride_w, real_end = d->pad_w + d->W < p->Wp ? d->pad_w + d->W : p->Wp;
  *lo = d->pad_w > ph ? (d->pad_w - ph + sw - 1) / sw : 0;
  *hi = real_end > ph ? (real_end - ph + sw - 1) / sw : 0;
  if (*hi > pl) *hi = pl;
  if (*lo > *hi) *lo = *hi;
}

/* Staged row r of channel block cb (row floats): its place in ws, or NULL
 * for a padding row, which is zeroed here. *ih: the input row it holds. */
static float *staged_row(const hwt_conv_plan *p, float *ws, int cb, int r, long row, int *ih) {
  float *dst = ws + ((size_t)cb * p->Hp + r) * row;
  *ih = r - p->d.pad_h;
  if (*ih >= 0 && *ih < p->d.H) return dst;
  memset(dst, 0, (size_t)row * sizeof(float));
  return NULL;
}

/* Stage padded rows [r0, r1) of image n (NCHW[ic_bn]c) into ws in the row
 * kernels' layout (conv_internal.h): zero halo, each row block transposed to
 * [ic_bn][sw][PL] with padded column c at phase c % sw, position c / sw. */
static void stage_rows(const hwt_conv_plan *p, const float *x, float *ws, int n, int r0,
                       int r1, hwt_conv_stage_fn stage) {
  const hwt_conv_desc *d = &p->d;
  const int bn = p->p.ic_bn, CB = d->C / bn, sw = d->stride_w;
  const long ics = stage_ic_stride(p), row = (long)bn * ics;
  for (int cb = 0; cb < CB; cb++) {
    const float *img = x + ((size_t)n * CB + cb) * d->H * d->W * bn;
    for (int r = r0; r < r1; r++) {
      int ih;
      float *dst = staged_row(p, ws, cb, r, row, &ih);
      if (!dst) continue;
      /* Transposed in tiles of 16 columns by the variant's gathers: scalar
       * copies took 12-13% of a 64x56x56 3x3 run (AVX-512) whichever side
       * was strided; the gathers take ~8%, mostly the input's first touch. */
      const float *src = img + (size_t)ih * d->W * bn;
      const int pl = (int)(ics / sw);
      for (int ph = 0; ph < sw; ph++) {
        int lo, hi;
        phase_real(p, ph, pl, &lo, &hi);
        float *o = dst + (long)ph * pl;
        for (int i = 0; i < bn; i++) {
          for (int pos = 0; pos < lo; pos++) o[(long)i * ics + pos] = 0.0f;
          for (int pos = hi; pos < pl; pos++) o[(long)i * ics + pos] = 0.0f;
        }
        for (int t0 = lo; t0 < hi; t0 += 16) {
          int t1 = t0 + 16 < hi ? t0 + 16 : hi;
          stage(src + (long)(ph + t0 * sw - d->pad_w) * bn, (long)sw * bn, t1 - t0, bn, o + t0,
                ics);
        }
      }
    }
  }
}

/* Phase ranges are per plan, not per row: at most this many phases keep
 * theirs in a table (larger strides recompute them per row). */
#define PHASES_CACHED 8

/* One NCHW channel row of the input (its real columns at src) staged as
 * row o: sw phases of pl, phase ph's real positions [lo[ph], hi[ph]), the
 * rest zero. Stride 2 reads the row once for both phases (deint2) over the
 * positions where both are real. */
static void stage_channel_row(const hwt_conv_plan *p, const hwt_conv_variant *v,
                              const float *src, float *o, int pl, const int *lo,
                              const int *hi) {
  const hwt_conv_desc *d = &p->d;
  const int sw = d->stride_w;
  for (int ph = 0; ph < sw; ph++) {
    int l, h;
    if (ph < PHASES_CACHED)
      l = lo[ph], h = hi[ph];
    else
      phase_real(p, ph, pl, &l, &h);
    float *op = o + (long)ph * pl;
    for (int pos = 0; pos < l; pos++) op[pos] = 0.0f;
    for (int pos = h; pos < pl; pos++) op[pos] = 0.0f;
    if (sw == 2) continue; /* copied below, both phases at once */
    const float *s = src + ph - d->pad_w;
    if (sw == 1)
      memcpy(op + l, s + l, (size_t)(h - l) * sizeof(float));
    else
      v->phase(s + (long)l * sw, sw, h - l, op + l);
  }
  if (sw != 2) return;
  /* Positions both phases hold real columns, one pass; the few others
   * (next to the padding) one float at a time. */
  const int both_lo = lo[0] > lo[1] ? lo[0] : lo[1], both_hi = hi[0] < hi[1] ? hi[0] : hi[1];
  const float *s = src - d->pad_w;
  for (int ph = 0; ph < 2; ph++) {
    float *op = o + (long)ph * pl;
    const int edge_lo = both_lo < hi[ph] ? both_lo : hi[ph];
    const int edge_hi = both_hi > lo[ph] ? both_hi : lo[ph];
    for (int pos = lo[ph]; pos < edge_lo; pos++) op[pos] = s[ph + 2 * pos];
    for (int pos = edge_hi > edge_lo ? edge_hi : edge_lo; pos < hi[ph]; pos++)
      op[pos] = s[ph + 2 * pos];
  }
  if (both_hi > both_lo)
    v->deint2(s + 2 * both_lo, both_hi - both_lo, o + both_lo, o + pl + both_lo);
}

/* stage_rows for an NCHW input: every staged channel row is a (phase-split)
 * copy of one contiguous input row, so no transpose is needed. */
static void stage_rows_nchw(const hwt_conv_plan *p, const float *x, float *ws, int n, int r0,
                            int r1) {
  const hwt_conv_desc *d = &p->d;
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  const int bn = p->p.ic_bn, CB = d->C / bn, sw = d->stride_w;
  const long ics = stage_ic_stride(p), row = (long)bn * ics;
  const int pl = (int)(ics / sw);
  int lo[PHASES_CACHED], hi[PHASES_CACHED];
  for (int ph = 0; ph < sw && ph < PHASES_CACHED; ph++) phase_real(p, ph, pl, &lo[ph], &hi[ph]);
  for (int cb = 0; cb < CB; cb++)
    for (int r = r0; r < r1; r++) {
      int ih;
      float *dst = staged_row(p, ws, cb, r, row, &ih);
      if (!dst) continue;
      for (int i = 0; i < bn; i++)
        stage_channel_row(p, v, x + (((size_t)n * d->C + cb * bn + i) * d->H + ih) * d->W,
                          dst + (long)i * ics, pl, lo, hi);
    }
}

/* Work units: groups of reg_h output rows over (n, oc block, oh), split
 * contiguously so one thread keeps an oc block's weights (C*R*S*oc_bn
 * floats) hot in L2 across its rows; with rows_outer, over (n, oh, oc
 * block): a share is a band of rows for every oc block, so a thread stages
 * only its band's input rows and reads all the weights (plan_make's rule). */
static void nchwc_units(const hwt_conv_plan *p, const float *x, const float *w,
                        const float *bias, const float *res, float *y, float *ws, long lo,
                        long hi) {
  const hwt_conv_desc *d = &p->d;
  const int bn = p->p.ic_bn, obn = p->p.oc_bn, KB = d->K / obn, OH = p->OH;
  const int rh = p->p.reg_h, OHB = (OH + rh - 1) / rh;
  const long per_image = (long)KB * OHB;
  const long ics = stage_ic_stride(p);
  float *staged = ws;
  float *scratch = ws + (p->copy_input ? ALIGN_FLOATS((size_t)d->C * p->Hp * ics) : 0);
  const int nchw = p->layout == HWT_CONV_NCHW;
  /* NCHW output rows are written to this [reg_h][OW][oc_bn] block first. */
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  float *orow = scratch + (v->block_scratch ? ALIGN_FLOATS((size_t)p->p.reg_n * obn) : 0);
  const long ohw = (long)OH * p->OW;
  hwt_conv_row_args a;
  const int CB = d->C / bn;
  a.CB = CB;
  a.first = a.last = 1;
  a.R = d->R;
  a.S = d->S;
  a.ic_bn = bn;
  a.oc_bn = obn;
  a.OW = p->OW;
  a.reg_n = p->p.reg_n;
  a.unroll_ker = p->p.unroll_ker;
  /* An NCHW residual is added (then the ReLU) to each row after its
   * transpose, while the row is still in L1. */
  a.relu = d->relu && !(nchw && res);
  a.relu_max = a.relu ? d->relu_max : 0.0f;
  a.res = NULL;
  a.scratch = scratch;
  a.in_ic_stride = ics;
  long in_row = (long)bn * ics;  /* floats between staged rows */
  a.in_cb_stride = (long)p->Hp * bn * ics;
  a.out_row_stride = (long)p->OW * obn;
  for (int s = 0; s < d->S; s++) {
    const int col = s * d->dil_w;  /* the tap's padded column for output pixel 0 */
    a.koff[s] = (col % d->stride_w) * (int)(ics / d->stride_w) + col / d->stride_w;
  }
  if (!p->copy_input) {  /* the NCHW input itself (stride_w 1: koff[s] == s * dil_w) */
    a.in_ic_stride = (long)d->H * d->W;
    in_row = d->W;
    a.in_cb_stride = (long)bn * d->H * d->W;
  }
  a.in_oh_stride = (long)d->stride_h * in_row;
  a.in_row_stride = (long)d->dil_h * in_row;
  void (*const row)(const hwt_conv_row_args *) = v->row;
  const hwt_conv_stage_fn stage = v->stage;
  int staged_n = -1, staged_to = 0, band_end = 0;
  const float *img = staged;  /* the rows the kernel reads: staged, or x itself */
  for (long u = lo; u < hi; u++) {
    const long ui = u % per_image;
    const int n = (int)(u / per_image);
    const int kb = (int)(p->rows_outer ? ui % KB : ui / OHB);
    const int oh = (int)(p->rows_outer ? ui / KB : ui % OHB) * rh;
    a.rows = OH - oh < rh ? OH - oh : rh;
    if (!p->copy_input) {
      img = x + (size_t)n * d->C * d->H * d->W;
    } else {
      if (n != staged_n) {
        /* Rows this thread reads in image n: all of them if its share spans
         * more than one oc block, else those of its output rows. */
        long u0 = lo > (long)n * per_image ? lo : (long)n * per_image;
        long u1 = hi < (long)(n + 1) * per_image ? hi : (long)(n + 1) * per_image;
        int oh0 = 0, oh1 = OH;
        if (p->rows_outer) {  /* the rows of the share, every oc block */
          oh0 = (int)((u0 % per_image) / KB) * rh;
          oh1 = (int)(((u1 - 1) % per_image) / KB) * rh + rh;
        } else if ((u0 / OHB) == ((u1 - 1) / OHB)) {  /* one oc block: its rows */
          oh0 = (int)(u0 % OHB) * rh;
          oh1 = (int)((u1 - 1) % OHB) * rh + rh;
        }
        if (oh1 > OH) oh1 = OH;
        staged_to = oh0 * d->stride_h;
        band_end = (oh1 - 1) * d->stride_h + (d->R - 1) * d->dil_h + 1;
        staged_n = n;
      }
      /* Oc blocks outer: every block reads the whole band, staged at once.
       * Rows outer: each output row's input rows are staged when its first
       * unit comes, so they are still in L1/L2 for the other oc blocks
       * (staging the whole band first left 830 KB staged for conv3_1 to be
       * read back from L3). */
      int need = band_end;
      if (p->rows_outer) {
        need = (oh + a.rows - 1) * d->stride_h + (d->R - 1) * d->dil_h + 1;
        if (need > band_end) need = band_end;
      }
      if (need > staged_to) {
        if (nchw)
          stage_rows_nchw(p, x, staged, n, staged_to, need);
        else
          stage_rows(p, x, staged, n, staged_to, need, stage);
        staged_to = need;
      }
    }
    a.in = img + (size_t)oh * a.in_oh_stride;
    a.w = w + (size_t)kb * CB * d->R * d->S * bn * obn;
    a.bias = bias ? bias + (size_t)kb * obn : 0;
    if (!nchw) {
      const size_t at = (((size_t)n * KB + kb) * OH + oh) * p->OW * obn;
      a.out = y + at;
      a.res = res ? res + at : NULL;
    } else {
      a.out = orow;
    }
    row(&a);
    /* The activation over the block's rows just written (L1), before the
     * NCHW transpose, or after the residual that comes with it. */
    if (!nchw) {
      hwt_conv_act_rows(p->isa, d->act, a.out, 0, 1, (long)a.rows * a.out_row_stride);
      continue;
    }
    if (!res) hwt_conv_act_rows(p->isa, d->act, orow, 0, 1, (long)a.rows * a.out_row_stride);
    /* [rows][OW][oc_bn] -> oc_bn NCHW rows each, 16 pixels per gather. */
    for (int h = 0; h < a.rows; h++) {
      float *yo = y + ((size_t)n * d->K + (size_t)kb * obn) * ohw + (long)(oh + h) * p->OW;
      const float *src = orow + h * a.out_row_stride;
      for (int ow0 = 0; ow0 < p->OW; ow0 += 16)
        stage(src + (long)ow0 * obn, obn, p->OW - ow0 < 16 ? p->OW - ow0 : 16, obn, yo + ow0,
              ohw);
      if (res) {
        hwt_conv_residual_rows(yo, res + (yo - y), ohw, obn, p->OW, d->relu, d->relu_max);
        hwt_conv_act_rows(p->isa, d->act, yo, ohw, obn, p->OW);
      }
    }
  }
}

/* Columns per GEMM call when an epilogue follows (bias, residual,
 * activation): the output in blocks of about half of L2, evened out in
 * whole 16-column tiles, so the epilogue reads each block from L2 while it
 * is there, not from memory; hw (one call) when the output is within twice
 * L2, nothing follows, or the weights (the GEMM's A, read again by every
 * block) do not fit in the other half of L2. Measured with
 * benchmarks/bench_pointwise.py --baseline-lib (the build without blocks;
 * Zen 3, AVX2, 512 KiB L2, 1 thread, thread-time medians of 15 alternated
 * samples, bias epilogue, two rounds): ResNet's 1x1 CONVs at 56x56
 * 1.00-1.21x (64->128 1.13, 64->256 1.11-1.21, 256->64 1.07-1.11, 256->256
 * 1.00-1.03), MobileNetV2's 16->96 at 112x112 1.23-1.44x and 24->144 at
 * 56x56 1.03-1.14x; 32->192 at 28x28 (602 KB of output, two blocks) read
 * 0.93-1.08x, hence twice L2; weights past half of L2 (512->512 at 28x28,
 * 1 MB) were no gain (0.93-0.99x). */
static int pw_chunk(const hwt_conv_desc *d, int hw, int epi) {
  if (!epi) return hw;
  hwt_cache_sizes cs;
  hwt_cache_sizes_host(&cs);
  const long l2 = cs.l2 > 0 ? cs.l2 : 256L << 10;
  const long out_bytes = (long)sizeof(float) * d->K * hw;
  if (out_bytes <= 2 * l2 || (long)sizeof(float) * d->K * d->C > l2 / 2) return hw;
  const long blocks = (out_bytes + l2 / 2 - 1) / (l2 / 2);
  const long c = ((hw + blocks - 1) / blocks + 15) / 16 * 16;
  return c < hw ? (int)c : hw;
}

/* NCHW_GEMM: thread tid's share of each image's GEMM, then the epilogue
 * (bias per output channel, residual, ReLU) on the same share while it is
 * in cache: the GEMM's own bias is per column, and shares never wait for
 * each other, so each thread finishes exactly the tiles it computed.
 * The pass costs 16->96 at 112x112 about a third of its GEMM (~610 vs
 * ~460 us, 1 thread, benchmarks/bench_pointwise.py, under load ~14), but
 * two ways of hiding it measured slower there (before / after, same
 * script against the build without them): the epilogue run by the GEMM on
 * each finished 12x32 tile through a callback, 0.82-0.87x on 16->96 at
 * 112x112, 24->144 at 56x56 and 32->192 at 28x28 (the tile's K = 16..32
 * FMAs per output are fewer than the epilogue's own work); this loop with
 * branch-free clamps, 0.84-0.95x there (more work without ReLU). A
 * prefetch of the next prepacked A micro-panel under the A-in-L1 order
 * was within noise (0.97-1.03x). The variant's own vector loop (bias,
 * residual, ReLU and SiLU / HardSwish in one pass: nchwc_body.c) against
 * the scalar loop plus a SiLU pass (1 thread, avx512, Zen 4 under load ~2.5,
 * min of 40 ctypes runs, two alternated process pairs): the epilogue of
 * 16->96 at 112x112 154-165 -> 62-70 us, 24->144 at 56x56 65 -> 22 us,
 * 40->240 at 28x28 28 -> 14 us; with SiLU the whole conv 994-1011 -> 839-843
 * us, 440 -> 381 us, 250 -> 219 us. The epilogue applied by the micro-kernels
 * in registers as they store each finished tile (row bias, residual, ReLU;
 * pointwise_layers.py --baseline-lib, ResNet-50's 1x1 CONVs, 1 thread, Zen
 * 4 under load ~7, 11-15 alternated samples): with the residual 0.81-0.86x
 * on AVX2 (its rows, one line per row of the tile and a row of C apart,
 * missed in the B-panel order's column strips even when prefetched two
 * tiles ahead) and 0.93-1.03x on AVX-512; bias and ReLU alone 0.98-1.05x
 * (AVX2) and 0.98-1.03x (AVX-512, two rows 1.12-1.23x in one run only):
 * within noise, so not kept. */
static void gemm_units(const hwt_conv_plan *p, const float *x, const float *w,
                       const float *bias, const float *res, float *y, float *ws, int tid,
                       int nth) {
  const hwt_conv_desc *d = &p->d;
  const int hw = p->OH * p->OW;
  const int epi = bias || res || d->relu || d->act;
  hwt_gemm_desc g;
  hwt_gemm_plan whole, part[2]; /* the blocks of `chunk` columns, the last one */
  gemm_desc_of(d, hw, &g);
  if (hwt_gemm_plan_make(&g, p->isa, nth, &whole) != HWT_OK) return;
  int chunk = pw_chunk(d, hw, epi);
  for (int i = 0; i < 2 && chunk < hw; i++) {
    hwt_gemm_desc gc = g;
    gc.N = i ? hw - (hw - 1) / chunk * chunk : chunk; /* ldb = ldc = hw: columns in place */
    /* The workspace was sized for one call over hw columns: blocks that
     * would need more run as that one call. */
    if (hwt_gemm_plan_make(&gc, p->isa, nth, &part[i]) != HWT_OK ||
        part[i].ws_floats > whole.ws_floats)
      chunk = hw;
  }
  const hwt_gemm_variant *gv = hwt_gemm_variant_get(p->isa);
  const hwt_conv_variant *v = hwt_conv_variant_for(p->isa);
  for (int n = 0; n < d->N; n++) {
    const size_t xo = (size_t)n * d->C * hw, yo = (size_t)n * d->K * hw;
    for (int j = 0; j < hw; j += chunk) {
      const hwt_gemm_plan *gp = chunk == hw ? &whole : &part[j + chunk >= hw];
      const int cw = gp->d.N;
      hwt_gemm_run_part_packed_a(gp, w, x + xo + j, y + yo + j, NULL, ws, tid, nth);
      if (!epi) continue;
      const hwt_gemm_share sh = hwt_gemm_share_of(gv, g.M, cw, g.K, tid, nth);
      for (int k = sh.i0; k < sh.i1; k++) {
        const size_t at = yo + (size_t)k * hw + (size_t)(j + sh.j0);
        v->epilogue(y + at, res ? res + at : NULL, sh.j1 - sh.j0, bias ? bias[k] : 0.0f,
                    d->relu, d->relu_max, d->act);
      }
    }
  }
}

void hwt_conv_run_part(const hwt_conv_plan *p, const float *x, const float *w_packed,
                       const float *bias, float *y, float *ws, int tid, int nth) {
  hwt_conv_run_part_res(p, x, w_packed, bias, NULL, y, ws, tid, nth);
}

void hwt_conv_run_part_res(const hwt_conv_plan *p, const float *x, const float *w_packed,
                           const float *bias, const float *res, float *y, float *ws, int tid,
                           int nth) {
  if (p->sub) {
    hwt_conv_pw_run_part(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  hwt_conv_plan view;
  p = flat_view(p, &view);
  const hwt_conv_desc *d = &p->d;
  long units;
  if (p->layout == HWT_CONV_NCHW_GEMM && p->gemm_t) {
    hwt_conv_pw_t_run_part(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  if (p->layout == HWT_CONV_NCHW_GEMM) {
    gemm_units(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  if (p->layout == HWT_CONV_NCHW_STEM) {
    hwt_conv_stem_run_part(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  if (p->nhwc_gemm) {
    hwt_conv_nhwc_gemm_run_part(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  if (p->layout != HWT_CONV_NCHW_DIRECT && p->p.winograd) {
    hwt_conv_wino_run_part(p, x, w_packed, bias, res, y, ws, tid, nth);
    return;
  }
  if (p->layout == HWT_CONV_NCHW_DIRECT)
    units = (long)d->N * ((d->K + HWT_CONV_DIRECT_OCG - 1) / HWT_CONV_DIRECT_OCG) * p->OH;
  else
    units = (long)d->N * (d->K / p->p.oc_bn) * ((p->OH + p->p.reg_h - 1) / p->p.reg_h);
  long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  if (lo >= hi) return;
  if (p->layout == HWT_CONV_NCHW_DIRECT)
    hwt_conv_direct_units(p, x, w_packed, bias, res, y, ws, lo, hi);
  else
    nchwc_units(p, x, w_packed, bias, res, y, ws, lo, hi);
}
