/* The depthwise variant body, compiled once per ISA over
 * kernels/common/vec.h (kernels.cmake). A chunk of output rows first
 * stages the input rows it reads: zero-padded and, for stride_w > 1, split
 * into stride phases (phase q holds padded columns q, q + sw, ...), so the
 * output columns ow .. ow + HV_W - 1 read HV_W consecutive floats at every
 * tap. The output is computed in register blocks of 4 accumulators (1 row
 * x 4 vectors of columns, 2 x 2, or 4 rows x 1 vector for narrow rows)
 * over the R x S taps (one broadcast weight per 4 FMAs), the bias as the
 * starting value, with the epilogue (+ residual, ReLU or SiLU / HardSwish:
 * act_vec.h) in registers before one store;
 * a row's last vector masks its store (the staged rows have a vector of
 * slack, so loads never need a mask). 3x3, 5x5 and 7x7 filters run with
 * the tap loops unrolled at compile time. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "../common/vec.h"
#include "conv_internal.h"
#include "act_vec.h"
#include "dw_impl.h"

/* One staged row (p->phases x p->wq floats) of input row xr, NULL: a row
 * of the padding. The stride-phase split goes through the dense
 * template's own per-ISA copies (hwt_conv_variant: deint2, phase): the
 * scalar split made the stride-2 depthwise layers 2-3x slower than their
 * stride-1 neighbours per output (MobileNetV2's 96-channel 112x112 layer,
 * 951 us at 1 thread, Zen 4 under load). */
static void stage_row(const hwt_dwconv_plan *p, const float *xr, float *dst) {
  const int sw = p->phases, wq = p->wq, pl = p->d.pad_w, W = p->d.W;
  if (!xr) {
    memset(dst, 0, sizeof(float) * (size_t)sw * (size_t)wq);
    return;
  }
  const hwt_conv_variant *cv = hwt_conv_variant_for(HV_ISA);
  /* Phase q's o[j] = x[q + j * sw - pl] where that column exists, j in
   * [j0[q], j1[q]); zeros elsewhere. */
  long j0[2] = {0, 0}, j1[2] = {0, 0};
  for (int q = 0; q < sw; q++) {
    float *o = dst + (long)q * wq;
    long a = pl > q ? (pl - q + sw - 1) / sw : 0;
    long b = (long)W - 1 + pl - q < 0 ? 0 : ((long)W - 1 + pl - q) / sw + 1;
    if (a > wq) a = wq;
    if (b > wq) b = wq;
    if (b < a) b = a;
    for (long j = 0; j < a; j++) o[j] = 0.0f;
    for (long j = b; j < wq; j++) o[j] = 0.0f;
    if (sw == 1)
      memcpy(o + a, xr + a - pl, sizeof(float) * (size_t)(b - a));
    else if (sw == 2) {
      j0[q] = a;
      j1[q] = b;
    } else if (b > a)
      cv->phase(xr + (q + a * sw - pl), sw, (int)(b - a), o + a);
  }
  if (sw != 2) return;
  /* Both phases of the columns both hold in one pass, the ends apart. */
  const long a = j0[0] > j0[1] ? j0[0] : j0[1];
  long b = j1[0] < j1[1] ? j1[0] : j1[1];
  if (b < a) b = a;
  float *even = dst, *odd = dst + wq;
  for (int q = 0; q < 2; q++) {
    float *o = q ? odd : even;
    for (long j = j0[q]; j < a && j < j1[q]; j++) o[j] = xr[q + 2 * j - pl];
    for (long j = b > j0[q] ? b : j0[q]; j < j1[q]; j++) o[j] = xr[q + 2 * j - pl];
  }
  if (b > a) cv->deint2(xr + (2 * a - pl), (int)(b - a), even + a, odd + a);
}

/* ReLU, then the clamp at hi (ReLU6) when hi is finite: max(0, acc) and
 * min(hi, acc) keep a NaN, as the numpy reference does (np.maximum, and
 * clip's select); or SiLU / HardSwish (act, act_vec.h). */
HV_AI hv_f32 activate(hv_f32 acc, int relu, int clamp, hv_f32 hi, int act) {
  if (relu) acc = hv_max(hv_zero(), acc);
  if (clamp) acc = hv_min(hi, acc);
  return act ? hwt_conv_act_vec(acc, act) : acc;
}

HV_AI hv_f32 epilogue(const hwt_dwconv_plan *p, hv_f32 acc, const float *res, hv_mask m,
                      int full) {
  if (res) acc = hv_add(acc, full ? hv_load(res) : hv_load_mask(res, m));
  return activate(acc, p->d.relu, p->d.relu && p->relu_max < INFINITY, hv_set1(p->relu_max),
                  0);
}

/* A register block of NR output rows x NV vectors of columns starting at
 * column ow: st is the first row's staged input (its kernel row 0), rows
 * ostep floats apart; y / res the first row's output at ow; n the columns
 * left in the row from ow (the last vector masks its store past them).
 * NR x NV >= 4 independent accumulators hide the FMA latency (4 cycles on
 * Zen 4): one vector per row, as a 56-wide row at AVX-512 left it, chained
 * 9 FMAs a vector and ran MobileNetV2's 144-channel 56x56 layer at 22
 * GFLOPS (1 thread, under load). */
HV_AI void block(const hwt_dwconv_plan *p, const float *st, long ostep, const long *off,
                 const float *w, hv_f32 bv, const float *res, float *y, long n, const int R,
                 const int S, const int NR, const int NV) {
  const long rstep = (long)p->d.dil_h * p->phases * p->wq, OW = p->OW;
  hv_f32 acc[4][4];
  for (int i = 0; i < NR; i++)
    for (int v = 0; v < NV; v++) acc[i][v] = bv;
  for (int r = 0; r < R; r++)
    for (int s = 0; s < S; s++) {
      const hv_f32 wv = hv_set1(w[r * S + s]);
      for (int i = 0; i < NR; i++) {
        const float *q = st + i * ostep + r * rstep + off[s];
        for (int v = 0; v < NV; v++) acc[i][v] = hv_fmadd(hv_load(q + v * HV_W), wv, acc[i][v]);
      }
    }
  hv_f32 out[4]; /* NR x NV <= 4: the activation's 4 chains side by side */
  for (int i = 0; i < NR; i++)
    for (int v = 0; v < NV; v++) {
      const long left = n - (long)v * HV_W, at = i * OW + (long)v * HV_W;
      out[i * NV + v] = epilogue(p, acc[i][v], res ? res + at : NULL, hv_first(left),
                                 left >= HV_W);
    }
  for (int q = NR * NV; q < 4; q++) out[q] = hv_zero();
  if (p->d.act) hwt_conv_act_vec4(out, p->d.act);
  for (int i = 0; i < NR; i++)
    for (int v = 0; v < NV; v++) {
      const long left = n - (long)v * HV_W, at = i * OW + (long)v * HV_W;
      if (left >= HV_W)
        hv_store(y + at, out[i * NV + v]);
      else
        hv_store_mask(y + at, hv_first(left), out[i * NV + v]);
    }
}

/* Output rows [o0, o1) of a chunk whose staged rows start at ws. */
HV_AI void chunk_rows(const hwt_dwconv_plan *p, const float *ws, int o0, int o1,
                      const float *w, float bias, const float *res, float *y, const int R,
                      const int S) {
  const long ostep = (long)p->d.stride_h * p->phases * p->wq, OW = p->OW;
  long off[64]; /* float offset of tap column s in a staged row (S <= 64: plan_make) */
  for (int s = 0; s < S; s++) {
    const int t = s * p->d.dil_w;
    off[s] = (long)(t % p->phases) * p->wq + t / p->phases;
  }
  const hv_f32 bv = hv_set1(bias);
  for (long ow = 0; ow < OW; ow += 4 * HV_W) {
    const long n = OW - ow, vecs = (n + HV_W - 1) / HV_W;
    const int nv = vecs < 4 ? (int)vecs : 4, nr = nv >= 3 ? 1 : nv == 2 ? 2 : 4;
    for (int oh = o0; oh < o1;) {
      const float *st = ws + (oh - o0) * ostep + ow;
      const float *rr = res ? res + oh * OW + ow : NULL;
      float *yr = y + oh * OW + ow;
      const int rows = o1 - oh >= nr ? nr : 1;
      if (rows == 1 && nv == 4)
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 1, 4);
      else if (rows == 1 && nv == 3)
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 1, 3);
      else if (rows == 2)
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 2, 2);
      else if (rows == 4)
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 4, 1);
      else if (nv == 2)
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 1, 2);
      else
        block(p, st, ostep, off, w, bv, rr, yr, n, R, S, 1, 1);
      oh += rows;
    }
  }
}

static void rows(const hwt_dwconv_plan *p, const float *x, const float *w, float bias,
                 const float *res, float *y, int oa, int ob, float *ws) {
  const hwt_conv_desc *d = &p->d;
  const long row = (long)p->phases * p->wq;
  if (d->S > 64) return;  /* the driver's plan never makes one (hwt_dwconv_plan_make) */
  for (int o0 = oa; o0 < ob; o0 += p->chunk) {
    const int o1 = ob < o0 + p->chunk ? ob : o0 + p->chunk;
    const long span = hwt_dwconv_span(p, o1 - o0), ih0 = (long)o0 * d->stride_h - d->pad_h;
    for (long i = 0; i < span; i++) {
      const long ih = ih0 + i;
      stage_row(p, ih >= 0 && ih < d->H ? x + ih * d->W : NULL, ws + i * row);
    }
    if (d->R == 3 && d->S == 3)
      chunk_rows(p, ws, o0, o1, w, bias, res, y, 3, 3);
    else if (d->R == 5 && d->S == 5)
      chunk_rows(p, ws, o0, o1, w, bias, res, y, 5, 5);
    else if (d->R == 7 && d->S == 7)
      chunk_rows(p, ws, o0, o1, w, bias, res, y, 7, 7);
    else
      chunk_rows(p, ws, o0, o1, w, bias, res, y, d->R, d->S);
  }
}


/* Lane permutes of the grouped blocked path: lane k of perm(v, idx[j])
 * is lane k - k % cg + j of v (input j of k's group). The portable build
 * runs the blocked path only for NCHW[x]c depthwise convs (one channel a
 * "vector"): no permutes. */
#if HV_W == 1
typedef int hv_idx;
HV_AI hv_f32 perm(hv_f32 v, hv_idx i) {
  (void)i;
  return v;
}
HV_AI hv_idx idx_load(const int32_t *p) { return p[0]; }
#elif HV_W == 16
typedef __m512i hv_idx;
HV_AI hv_f32 perm(hv_f32 v, hv_idx i) { return _mm512_permutexvar_ps(i, v); }
HV_AI hv_idx idx_load(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
#else
typedef __m256i hv_idx;
HV_AI hv_f32 perm(hv_f32 v, hv_idx i) { return _mm256_permutevar8x32_ps(v, i); }
HV_AI hv_idx idx_load(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
#endif

/* A block's epilogue, in registers unless a residual comes on the way out
 * (now 0): ReLU / ReLU6, one store per pixel into the output row (SiLU /
 * HardSwish follow on the rows in L1: blocked_rows). */
HV_AI void block_out(const hwt_dwconv_plan *p, hv_f32 *acc, float *orow, int ow, const int NP,
                     int now) {
  const hv_f32 hi = hv_set1(p->relu_max);
  const int relu = now && p->d.relu, clamp = relu && p->relu_max < INFINITY;
  for (int i = 0; i < NP; i++) acc[i] = activate(acc[i], relu, clamp, hi, 0);
  for (int i = 0; i < NP; i++) hv_store(orow + (long)(ow + i) * HV_W, acc[i]);
}

/* Blocked path. NP output pixels x one vector of channels per register
 * block: NP accumulators sharing each tap's weight vector(s). CG 1:
 * depthwise; CG > 1: each staged input vector permuted CG ways, one
 * weight vector per (tap, input of the group). */
HV_AI void bblock(const hwt_dwconv_plan *p, const float *st, const float *wp,
                  const hv_idx *idx, hv_f32 bv, float *orow, int ow, const int R, const int S,
                  const int CG, const int NP, int now) {
  const long cols = hwt_dwconv_cols(p) * HV_W, sw = (long)p->d.stride_w * HV_W;
  hv_f32 acc[12]; /* NP <= 12 */
  for (int i = 0; i < NP; i++) acc[i] = bv;
  for (int r = 0; r < R; r++) {
    const float *in = st + r * (long)p->d.dil_h * cols + (long)ow * sw;
    for (int s = 0; s < S; s++) {
      const float *q = in + (long)s * p->d.dil_w * HV_W;
      const float *wt = wp + (long)(r * S + s) * CG * HV_W;
      if (CG == 1) {
        const hv_f32 wv = hv_load(wt);
        for (int i = 0; i < NP; i++) acc[i] = hv_fmadd(hv_load(q + i * sw), wv, acc[i]);
        continue;
      }
      hv_f32 wv[8];
      for (int j = 0; j < CG; j++) wv[j] = hv_load(wt + j * HV_W);
      for (int i = 0; i < NP; i++) {
        const hv_f32 xv = hv_load(q + i * sw);
        for (int j = 0; j < CG; j++) acc[i] = hv_fmadd(perm(xv, idx[j]), wv[j], acc[i]);
      }
    }
  }
  block_out(p, acc, orow, ow, NP, now);
}

/* Depthwise (CG 1) at stride_w SW (1 or 2) and dil_w 1, the same block as
 * bblock with each staged input vector loaded once per kernel row: pixel i
 * reads column SW * i + s at tap s, so the NP x S products of a kernel row
 * need only SW * (NP - 1) + S loads (the row's S weight vectors stay in
 * registers) instead of NP * S. At AVX-512, 12 pixels of a 7x7 row:
 * 18 + 7 loads per 84 FMAs instead of 84 + 7, so the FMAs, not the loads,
 * bound the block. */
HV_AI void bblock_slide(const hwt_dwconv_plan *p, const float *st, const float *wp,
                        hv_f32 bv, float *orow, int ow, const int R, const int S, const int NP,
                        const int SW, int now) {
  const long cols = hwt_dwconv_cols(p) * HV_W;
  hv_f32 acc[12];
  for (int i = 0; i < NP; i++) acc[i] = bv;
  for (int r = 0; r < R; r++) {
    const float *in = st + r * (long)p->d.dil_h * cols + (long)ow * SW * HV_W;
    hv_f32 wv[7];
    for (int s = 0; s < S; s++) wv[s] = hv_load(wp + (long)(r * S + s) * HV_W);
    /* Unrolled whole, so acc[] and wv[] stay registers (GCC's own limits
     * left the 7x7 rows rolled, with acc[] on the stack: 1.8x slower). */
#pragma GCC unroll 32
    for (int j = 0; j < SW * (NP - 1) + S; j++) {
      const hv_f32 xv = hv_load(in + (long)j * HV_W);
#pragma GCC unroll 8
      for (int s = 0; s < S; s++) {
        const int i = (j - s) / SW;
        if (j >= s && (j - s) % SW == 0 && i < NP) acc[i] = hv_fmadd(xv, wv[s], acc[i]);
      }
    }
  }
  block_out(p, acc, orow, ow, NP, now);
}

/* One register block at ow: the sliding block at stride_w SW (1 or 2,
 * depthwise only), else bblock (SW 0). SW is a constant at every call, so
 * the choice is made at compile time. */
HV_AI void any_block(const hwt_dwconv_plan *p, const float *st, const float *wp,
                     const hv_idx *idx, hv_f32 bv, float *orow, int ow, const int R,
                     const int S, const int CG, const int NP, const int SW, int now) {
  if (SW)
    bblock_slide(p, st, wp, bv, orow, ow, R, S, NP, SW, now);
  else
    bblock(p, st, wp, idx, bv, orow, ow, R, S, CG, NP, now);
}

/* Register block of pixels, depthwise: 8 accumulators, a weight and a load
 * fit AVX2's 16 registers; AVX-512's 32 take 12. Grouped: the CG weight
 * vectors stay in registers too, so 4 and 8. */
#define NPB HV_BY_ISA(1, 8, 12)
#define NPB_G HV_BY_ISA(1, 4, 8)

/* One output row in blocks of NB pixels (any_block: SW 0 for bblock). */
HV_AI void brow(const hwt_dwconv_plan *p, const float *st, const float *wp, const hv_idx *idx,
                hv_f32 bv, float *orow, int now, const int R, const int S, const int CG,
                const int NB, const int SW) {
  int ow = 0;
  for (; ow + NB <= p->OW; ow += NB)
    any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, NB, SW, now);
  /* The rest in one block: single pixels chain their R x S FMAs (7x7
   * rows at AVX-512 left 3 of them per row). */
  switch (p->OW - ow) {
    case 0: break;
    case 1: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 1, SW, now); break;
    case 2: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 2, SW, now); break;
    case 3: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 3, SW, now); break;
    case 4: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 4, SW, now); break;
    case 5: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 5, SW, now); break;
    case 6: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 6, SW, now); break;
    case 7: any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 7, SW, now); break;
    default:
      for (; ow + 4 <= p->OW; ow += 4)
        any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 4, SW, now);
      for (; ow < p->OW; ow++) any_block(p, st, wp, idx, bv, orow, ow, R, S, CG, 1, SW, now);
  }
}

/* One output row: depthwise 3x3 / 5x5 / 7x7 and grouped 3x3 unrolled.
 * The rows' kernels carry no activation: one body whose epilogue tested it
 * at run time kept the block's accumulators in memory around it (a ReLU6
 * depthwise CONV ran 1.15-1.3x slower: 32 x 112x112 3x3, 191 against
 * 141-167 us; AVX-512, Zen 4, benchmarks/dw_shapes.c), and a second body
 * with SiLU in registers beside the unrolled taps cost ~1 ns an element,
 * twice the element-wise kernel's own rate in L1 (benchmarks/act_cost.c).
 * So SiLU / HardSwish run on each group of output rows in the L1 buffer
 * (blocked_rows). EfficientNet-B0, benchmarks/ab_zoo.py against the build
 * before (8 and 6 rounds, Zen 3 AVX2, load 0.7-1.0): 0.972 -> 0.991 and
 * 0.975 -> 1.004 x ORT at 1 thread, 1.080 -> 1.156 at 2; dw_shapes.c with
 * SiLU: 240 x 28x28 5x5 320 -> 283 us, 672 x 14x14 5x5 287 -> 242 us,
 * 144 x 56x56 3x3 512 -> 555 us (best of 100, three alternations). */
static void brow_sel(const hwt_dwconv_plan *p, const float *st, const float *wp,
                     const hv_idx *idx, hv_f32 bv, float *orow, int now) {
  const int R = p->d.R, S = p->d.S, k3 = R == 3 && S == 3;
  switch (p->cg) {
    case 1:
      if (HV_W > 1 && p->d.dil_w == 1 && (p->d.stride_w == 1 || p->d.stride_w == 2) &&
          R == S && (R == 3 || R == 5 || R == 7)) {
        const int sw2 = p->d.stride_w == 2;
        if (R == 3)
          sw2 ? brow(p, st, wp, idx, bv, orow, now, 3, 3, 1, NPB, 2)
              : brow(p, st, wp, idx, bv, orow, now, 3, 3, 1, NPB, 1);
        else if (R == 5)
          sw2 ? brow(p, st, wp, idx, bv, orow, now, 5, 5, 1, NPB, 2)
              : brow(p, st, wp, idx, bv, orow, now, 5, 5, 1, NPB, 1);
        else
          sw2 ? brow(p, st, wp, idx, bv, orow, now, 7, 7, 1, NPB, 2)
              : brow(p, st, wp, idx, bv, orow, now, 7, 7, 1, NPB, 1);
      } else if (k3)
        brow(p, st, wp, idx, bv, orow, now, 3, 3, 1, NPB, 0);
      else if (R == 5 && S == 5)
        brow(p, st, wp, idx, bv, orow, now, 5, 5, 1, NPB, 0);
      else if (R == 7 && S == 7)
        brow(p, st, wp, idx, bv, orow, now, 7, 7, 1, NPB, 0);
      else
        brow(p, st, wp, idx, bv, orow, now, R, S, 1, NPB, 0);
      break;
    case 2:
      if (k3)
        brow(p, st, wp, idx, bv, orow, now, 3, 3, 2, NPB_G, 0);
      else
        brow(p, st, wp, idx, bv, orow, now, R, S, 2, NPB_G, 0);
      break;
    case 4:
      if (k3)
        brow(p, st, wp, idx, bv, orow, now, 3, 3, 4, NPB_G, 0);
      else
        brow(p, st, wp, idx, bv, orow, now, R, S, 4, NPB_G, 0);
      break;
    default: /* 8: hwt_gconv_plan_make admits divisors of the vector up to 8 */
      if (k3)
        brow(p, st, wp, idx, bv, orow, now, 3, 3, 8, NPB_G, 0);
      else
        brow(p, st, wp, idx, bv, orow, now, R, S, 8, NPB_G, 0);
  }
}


/* The epilogue after output rows are transposed into place, with a
 * residual: y += res, then ReLU and the clamp, for cbn channels ohw
 * floats apart, n floats each (a group of whole rows). */
static void residual_rows(const hwt_dwconv_plan *p, float *y, const float *res, long ohw,
                          int cbn, long n) {
  const int relu = p->d.relu, clamp = relu && p->relu_max < INFINITY;
  const hv_f32 hi = hv_set1(p->relu_max);
  for (int c = 0; c < cbn; c++) {
    float *yr = y + c * ohw;
    const float *rr = res + c * ohw;
    for (long i = 0; i < n; i += HV_W) {
      const hv_mask m = hv_first(n - i);
      const hv_f32 v = hv_add(hv_load_mask(yr + i, m), hv_load_mask(rr + i, m));
      hv_store_mask(yr + i, m, activate(v, relu, clamp, hi, 0));
    }
  }
}

/* An output row [OW][vec] into NCHW[bn]c (cbn channels per pixel, bn
 * floats apart), with the residual's epilogue when res is not NULL (the
 * ReLU without one was applied in registers). */
static void blocked_out(const hwt_dwconv_plan *p, const float *orow, float *y,
                        const float *res, int cbn) {
  const long bn = p->bn;
  const int relu = p->d.relu, clamp = relu && p->relu_max < INFINITY;
  if (cbn == HV_W) {
    const hv_f32 hi = hv_set1(p->relu_max);
    for (long i = 0; i < p->OW; i++) {
      hv_f32 v = hv_load(orow + i * HV_W);
      if (res) v = activate(hv_add(v, hv_load(res + i * bn)), relu, clamp, hi, 0);
      hv_store(y + i * bn, v);
    }
    return;
  }
  for (long i = 0; i < p->OW; i++)
    for (int c = 0; c < cbn; c++) {
      float v = orow[i * HV_W + c];
      if (res) {
        v += res[i * bn + c];
        if (relu && v < 0.0f) v = 0.0f; /* NaN kept, as np.maximum */
        if (clamp && v > p->relu_max) v = p->relu_max;
      }
      y[i * bn + c] = v;
    }
}

/* Input rows [ia, ib) (inside the image) of a chunk whose staged rows
 * start at st for input row ih0: cbn channels of x, iw1 columns each from
 * column `lead` of a staged row on. NCHW[bn]c copies a pixel's channels
 * (a whole row at once when they fill the block); NCHW narrow rows go
 * through one transpose of the rows into tmp (hwt_dwconv_narrow), wider
 * ones are transposed a row at a time. */
static void stage_rows(const hwt_dwconv_plan *p, const hwt_conv_variant *cv, const float *x,
                       int cbn, long ia, long ib, long ih0, long iw1, long lead, float *st,
                       float *tmp) {
  const hwt_conv_desc *d = &p->d;
  const long row = hwt_dwconv_cols(p) * HV_W, hw = (long)d->H * d->W;
  if (ib <= ia || iw1 <= 0) return;
  if (p->bn && cbn == p->bn && p->bn == HV_W) {
    for (long ih = ia; ih < ib; ih++)
      memcpy(st + (ih - ih0) * row + lead * HV_W, x + ih * d->W * p->bn,
             sizeof(float) * (size_t)(iw1 * HV_W));
    return;
  }
  if (p->bn && cbn == HV_W) {
    /* A vector of a wider block (channels-last when bn = C): one load and
     * store a pixel, where a memcpy call a pixel made the depthwise CONVs
     * of a channels-last MobileNetV2 slower than on NCHW. */
    for (long ih = ia; ih < ib; ih++) {
      const float *xr = x + ih * d->W * p->bn;
      float *sr = st + (ih - ih0) * row + lead * HV_W;
      for (long iw = 0; iw < iw1; iw++) hv_store(sr + iw * HV_W, hv_load(xr + iw * p->bn));
    }
    return;
  }
  if (p->bn) {
    for (long ih = ia; ih < ib; ih++)
      for (long iw = 0; iw < iw1; iw++)
        memcpy(st + (ih - ih0) * row + (lead + iw) * HV_W, x + (ih * d->W + iw) * p->bn,
               sizeof(float) * (size_t)cbn);
    return;
  }
  if (tmp && cbn == HV_W) {
    cv->stage(x + ia * d->W, hw, cbn, (int)((ib - ia) * d->W), tmp, HV_W);
    for (long ih = ia; ih < ib; ih++)
      memcpy(st + (ih - ih0) * row + lead * HV_W, tmp + (ih - ia) * d->W * HV_W,
             sizeof(float) * (size_t)(iw1 * HV_W));
    return;
  }
  for (long ih = ia; ih < ib; ih++)
    cv->stage(x + ih * d->W, hw, cbn, (int)iw1, st + (ih - ih0) * row + lead * HV_W, HV_W);
}

static void blocked_rows(const hwt_dwconv_plan *p, const float *x, const float *w,
                         const float *bias, const float *res, float *y, int cbn, int oa, int ob,
                         float *ws) {
  const hwt_conv_desc *d = &p->d;
  const hwt_conv_variant *cv = hwt_conv_variant_for(HV_ISA);
  const long cols = hwt_dwconv_cols(p), row = cols * HV_W;
  const long ohw = (long)p->OH * p->OW, rs = (long)d->R * d->S;
  const int cg = p->cg, orows = hwt_dwconv_out_rows(p);
  /* ws: the weights [R*S][cg][vec], output rows [orows][OW][vec], the
   * staged rows, the narrow rows' transpose (hwt_dwconv_narrow) */
  float *wp = ws, *obuf = ws + ALIGN_FLOATS((size_t)(rs * cg * HV_W));
  float *st = obuf + ALIGN_FLOATS((size_t)orows * p->OW * HV_W);
  float *tmp = hwt_dwconv_narrow(p)
                   ? st + ALIGN_FLOATS((size_t)(hwt_dwconv_span(p, p->chunk) * row))
                   : NULL;
  for (long t = 0; t < rs; t++)
    for (int j = 0; j < cg; j++)
      for (int c = 0; c < HV_W; c++)
        wp[(t * cg + j) * HV_W + c] = c < cbn ? w[((long)c * cg + j) * rs + t] : 0.0f;
  hv_idx idx[8];
  for (int j = 0; j < cg && cg > 1; j++) {
    int32_t lanes[HV_W];
    for (int k = 0; k < HV_W; k++) lanes[k] = k - k % cg + j;
    idx[j] = idx_load(lanes);
  }
  const hv_f32 bv = bias ? hv_load_mask(bias, hv_first(cbn)) : hv_zero();
  /* Input columns a staged row holds: the ones the windows reach. */
  long iw1 = cols - d->pad_w < d->W ? cols - d->pad_w : d->W;
  if (iw1 < 0) iw1 = 0;
  const long lead = d->pad_w < cols ? d->pad_w : cols;
  const int now = !res; /* the epilogue in registers (bblock) */
  for (int o0 = oa; o0 < ob; o0 += p->chunk) {
    const int o1 = ob < o0 + p->chunk ? ob : o0 + p->chunk;
    const long span = hwt_dwconv_span(p, o1 - o0), ih0 = (long)o0 * d->stride_h - d->pad_h;
    for (long i = 0; i < span; i++) {
      const long ih = ih0 + i;
      float *sr = st + i * row;
      if (ih < 0 || ih >= d->H || iw1 == 0 || cbn < HV_W) {
        memset(sr, 0, sizeof(float) * (size_t)row);
      } else {
        memset(sr, 0, sizeof(float) * (size_t)(lead * HV_W));
        memset(sr + (lead + iw1) * HV_W, 0, sizeof(float) * (size_t)(row - (lead + iw1) * HV_W));
      }
    }
    const long ia = ih0 > 0 ? ih0 : 0, ib = ih0 + span < d->H ? ih0 + span : d->H;
    stage_rows(p, cv, x, cbn, ia, ib, ih0, iw1, lead, st, tmp);
    for (int g0 = o0; g0 < o1; g0 += orows) {
      const int g1 = o1 < g0 + orows ? o1 : g0 + orows;
      for (int oh = g0; oh < g1; oh++)
        brow_sel(p, st + (long)(oh - o0) * d->stride_h * row, wp, idx, bv,
                 obuf + (long)(oh - g0) * p->OW * HV_W, now);
      if (now)
        hwt_conv_act_rows(HV_ISA, d->act, obuf, 0, 1, (long)(g1 - g0) * p->OW * HV_W);
      if (p->bn) {
        /* With a residual, SiLU / HardSwish (conv_internal.h) follow it on
         * the row just written, in L1. */
        for (int oh = g0; oh < g1; oh++) {
          const float *orow = obuf + (long)(oh - g0) * p->OW * HV_W;
          float *yb = y + (long)oh * p->OW * p->bn;
          blocked_out(p, orow, yb, res ? res + (long)oh * p->OW * p->bn : NULL, cbn);
          if (res && cbn == p->bn)
            hwt_conv_act_rows(HV_ISA, d->act, yb, 0, 1, (long)p->OW * p->bn);
          else if (res)
            hwt_conv_act_rows(HV_ISA, d->act, yb, p->bn, p->OW, cbn);
        }
        continue;
      }
      /* The group's rows are contiguous in each NCHW plane: one transpose. */
      const long n = (long)(g1 - g0) * p->OW;
      float *yr = y + (long)g0 * p->OW;
      cv->stage(obuf, HV_W, (int)n, cbn, yr, ohw);
      if (res) {
        residual_rows(p, yr, res + (long)g0 * p->OW, ohw, cbn, n);
        hwt_conv_act_rows(HV_ISA, d->act, yr, ohw, cbn, n);
      }
    }
  }
}
const hwt_dwconv_variant HWT_VARIANT(hwt_dwconv_variant) = {
    .vec = HV_W, .rows = rows, .blocked_rows = blocked_rows};
