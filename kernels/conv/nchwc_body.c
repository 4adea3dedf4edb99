/* NCHW[x]c CONV row kernel (NeoCPU Algorithm 1), compiled once per SIMD ISA
 * over kernels/common/vec.h (kernels.cmake); the portable variant is
 * nchwc_generic.c, which keeps its accumulators in memory instead.
 *
 * Register block: rh output rows x rb output pixels x nv (1 to 4) vectors of
 * HV_W output channels. Each step of the reduction (one input channel of one
 * kernel tap) loads nv weight vectors and broadcasts rh*rb input values read
 * at fixed 4-byte steps from the staged input (conv_internal.h), so a block
 * of 12 accumulators costs 7 or 8 loads per 12 FMAs whatever its shape --
 * the shapes MLAS's NCHWc kernels use (3 pixels x 4 vectors on AVX2) are
 * among them, next to the wider rows NeoCPU's template prefers.
 *
 * One call reduces the input channel blocks [0, a->CB) of its row. The
 * first/last flags let a driver split the reduction into passes (MLAS's
 * accumulate-output flag: the first pass starts from the bias, later ones
 * from the partial sums in the output, the last applies the ReLU while the
 * block is in registers); the driver (conv.c) runs one pass today.
 *
 * Vectors are loaded whole; a channel block that is not a multiple of HV_W
 * ends in one masked vector with a block of its own (masked AVX2 loads are
 * slow and their masks take registers, which the full blocks need). */
#include "../common/vec.h"
#include "conv_internal.h"
#include "act_vec.h"

#define NV_MAX 4

/* Largest register block (rows x pixels) for nv vectors per pixel, derived
 * from the register file:
 *   nv = 1: HV_REGS - 4 accumulators (12 ymm, 28 zmm) + the weight, one
 *     broadcast and two spare (GCC 12 keeps the 28x1 and 14x2 zmm blocks
 *     entirely in registers, checked in the disassembly);
 *   nv >= 2, pixel-outer step (nv weights held, one broadcast at a time):
 *     pixels*nv + nv + 1 <= HV_REGS (6x2, 4x3 on AVX2; 14x2, 9x3, 6x4 zmm);
 *   weight-outer step (the block's broadcasts held, one weight at a time),
 *     used when the block has fewer pixels than vectors:
 *     pixels*(nv + 1) + 1 <= HV_REGS (3x4 on AVX2, MLAS's shape). */
#define CAP_PO(nv) ((HV_REGS - 1 - (nv)) / (nv))
#define CAP_WO(nv) ((HV_REGS - 1) / ((nv) + 1) < (nv) ? (HV_REGS - 1) / ((nv) + 1) : (nv) - 1)
#define CAP_OF(nv) \
  ((nv) == 1 ? HV_REGS - 4 : CAP_PO(nv) > CAP_WO(nv) ? CAP_PO(nv) : CAP_WO(nv))
#define ACC_MAX (HV_REGS - 4)

/* One reduction step: one weight row (NV vectors) against RH rows of RB
 * consecutive input floats, ohs floats apart. MT: the single vector is the
 * masked channel tail. */
HV_AI void fma_step(hv_f32 *acc, const float *iq, long ohs, const float *wq, hv_mask mt,
                    const int RB, const int NV, const int RH, const int MT) {
  if (RB * RH < NV) {
    hv_f32 xv[NV_MAX];
#pragma GCC unroll 4
    for (int q = 0; q < RB * RH; q++) xv[q] = hv_set1(iq[(q / RB) * ohs + q % RB]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      hv_f32 wv = hv_load(wq + v * HV_W);
#pragma GCC unroll 4
      for (int q = 0; q < RB * RH; q++) acc[q * NV + v] = hv_fmadd(xv[q], wv, acc[q * NV + v]);
    }
    return;
  }
  hv_f32 wv[NV_MAX];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) wv[v] = MT ? hv_load_mask(wq, mt) : hv_load(wq + v * HV_W);
#pragma GCC unroll 2
  for (int h = 0; h < RH; h++)
#pragma GCC unroll 32
    for (int j = 0; j < RB; j++) {
      hv_f32 xv = hv_set1(iq[h * ohs + j]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        acc[(h * RB + j) * NV + v] = hv_fmadd(xv, wv[v], acc[(h * RB + j) * NV + v]);
    }
}

HV_AI hv_f32 ld(const float *p, hv_mask mt, const int MT) {
  return MT ? hv_load_mask(p, mt) : hv_load(p);
}

HV_AI void st(float *p, hv_mask mt, const int MT, hv_f32 v) {
  if (MT)
    hv_store_mask(p, mt, v);
  else
    hv_store(p, v);
}

/* One register block: channel blocks [0, a->CB) of the reduction for RB
 * pixels of RH rows. RB, NV, UNR, SK, RH and MT are compile-time constants
 * at every call site, so acc[] lives in registers. UNR selects unroll_ker's
 * order (ic outside kw); SK > 0 fixes the kernel width so that order's kw
 * loop is unrolled. */
HV_AI void tile(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
                float *out, hv_mask mt, const int RB, const int NV, const int UNR, const int SK,
                const int RH, const int MT) {
  hv_f32 acc[ACC_MAX];
  const int icb = a->ic_bn, ocb = a->oc_bn;
  const long ors = a->out_row_stride;
  if (a->first) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      hv_f32 b = bias ? ld(bias + v * HV_W, mt, MT) : hv_zero();
#pragma GCC unroll 32
      for (int q = 0; q < RH * RB; q++) acc[q * NV + v] = b;
    }
  } else {
#pragma GCC unroll 32
    for (int q = 0; q < RH * RB; q++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        acc[q * NV + v] = ld(out + (q / RB) * ors + (long)(q % RB) * ocb + v * HV_W, mt, MT);
  }
  const int S = SK ? SK : a->S, R = a->R, CB = a->CB;
  const long ics = a->in_ic_stride, rows = a->in_row_stride, cbs = a->in_cb_stride;
  const long ohs = a->in_oh_stride;
  const int *koff = a->koff;
  for (int cb = 0; cb < CB; cb++) {
    for (int kh = 0; kh < R; kh++) {
      const float *ip = in + cb * cbs + kh * rows;
      const float *wp = w + (long)(cb * R + kh) * S * icb * ocb;
      if (!UNR) {
        for (int kw = 0; kw < S; kw++) {
          const float *iq = ip + koff[kw];
          const float *wq = wp + (long)kw * icb * ocb;
          for (int ic = 0; ic < icb; ic++, iq += ics, wq += ocb)
            fma_step(acc, iq, ohs, wq, mt, RB, NV, RH, MT);
        }
      } else {
        for (int ic = 0; ic < icb; ic++) {
#pragma GCC unroll 8
          for (int kw = 0; kw < S; kw++)
            fma_step(acc, ip + ic * ics + koff[kw], ohs, wp + (long)(kw * icb + ic) * ocb, mt,
                     RB, NV, RH, MT);
        }
      }
    }
  }
  if (a->last) {
    const hv_f32 zero = hv_zero(), hi = hv_set1(a->relu_max);
    const int clamp = a->relu && a->relu_max > 0.0f;
    /* The residual tile sits where this block's output goes. */
    const float *res = a->res ? a->res + (out - a->out) : 0;
#pragma GCC unroll 32
    for (int q = 0; q < RH * RB; q++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        hv_f32 r = acc[q * NV + v];
        if (res) r = hv_add(r, ld(res + (q / RB) * ors + (long)(q % RB) * ocb + v * HV_W, mt, MT));
        /* NaN kept (max and min return their second operand for it), as
           ONNX Runtime's Relu and Clip and hwt_conv_act */
        if (a->relu) r = hv_max(zero, r);
        acc[q * NV + v] = clamp ? hv_min(hi, r) : r;
      }
  }
#pragma GCC unroll 32
  for (int q = 0; q < RH * RB; q++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      st(out + (q / RB) * ors + (long)(q % RB) * ocb + v * HV_W, mt, MT, acc[q * NV + v]);
}

/* Turns the run-time block size into a compile-time one; sizes beyond the
 * register file are never called (row() splits blocks at the cap). */
HV_AI void tile_rb(const hwt_conv_row_args *a, const float *in, const float *w,
                   const float *bias, float *out, hv_mask mt, int rb, const int NV,
                   const int UNR, const int SK, const int RH, const int MT) {
#define HWT_TILE_CASE(n)                                         \
  case n:                                                        \
    if ((n) * RH <= CAP_OF(NV))                                  \
      tile(a, in, w, bias, out, mt, n, NV, UNR, SK, RH, MT);     \
    break;
  switch (rb) {
    HWT_TILE_CASE(1) HWT_TILE_CASE(2) HWT_TILE_CASE(3) HWT_TILE_CASE(4) HWT_TILE_CASE(5)
    HWT_TILE_CASE(6) HWT_TILE_CASE(7) HWT_TILE_CASE(8) HWT_TILE_CASE(9) HWT_TILE_CASE(10)
    HWT_TILE_CASE(11) HWT_TILE_CASE(12) HWT_TILE_CASE(13) HWT_TILE_CASE(14) HWT_TILE_CASE(15)
    HWT_TILE_CASE(16) HWT_TILE_CASE(17) HWT_TILE_CASE(18) HWT_TILE_CASE(19) HWT_TILE_CASE(20)
    HWT_TILE_CASE(21) HWT_TILE_CASE(22) HWT_TILE_CASE(23) HWT_TILE_CASE(24) HWT_TILE_CASE(25)
    HWT_TILE_CASE(26) HWT_TILE_CASE(27) HWT_TILE_CASE(28)
    default: break;
  }
#undef HWT_TILE_CASE
}
_Static_assert(ACC_MAX <= 28, "tile_rb lists block sizes up to 28 pixels");

typedef void (*tile_fn)(const hwt_conv_row_args *, const float *, const float *, const float *,
                        float *, hv_mask, int);

/* One out-of-line instance per (vectors, loop order, fixed kernel width,
 * rows); the masked tail has one per row count. */
#define HWT_TILE_FN(name, NV, UNR, SK, RH, MT)                                            \
  static void name(const hwt_conv_row_args *a, const float *in, const float *w,           \
                   const float *bias, float *out, hv_mask mt, int rb) {                   \
    tile_rb(a, in, w, bias, out, mt, rb, NV, UNR, SK, RH, MT);                             \
  }
#define HWT_TILE_ORDERS(nv, rh)                        \
  HWT_TILE_FN(tile_v##nv##_r##rh, nv, 0, 0, rh, 0)     \
  HWT_TILE_FN(tile_v##nv##_u_r##rh, nv, 1, 0, rh, 0)   \
  HWT_TILE_FN(tile_v##nv##_u3_r##rh, nv, 1, 3, rh, 0)
HWT_TILE_ORDERS(1, 1) HWT_TILE_ORDERS(2, 1) HWT_TILE_ORDERS(3, 1) HWT_TILE_ORDERS(4, 1)
HWT_TILE_ORDERS(1, 2) HWT_TILE_ORDERS(2, 2) HWT_TILE_ORDERS(3, 2) HWT_TILE_ORDERS(4, 2)
HWT_TILE_FN(tile_tail_r1, 1, 0, 0, 1, 1)
HWT_TILE_FN(tile_tail_r2, 1, 0, 0, 2, 1)
#undef HWT_TILE_ORDERS
#undef HWT_TILE_FN

#define HWT_ORDERS(nv, rh) {tile_v##nv##_r##rh, tile_v##nv##_u_r##rh, tile_v##nv##_u3_r##rh}
static const tile_fn k_tiles[2][NV_MAX][3] = {
    {HWT_ORDERS(1, 1), HWT_ORDERS(2, 1), HWT_ORDERS(3, 1), HWT_ORDERS(4, 1)},
    {HWT_ORDERS(1, 2), HWT_ORDERS(2, 2), HWT_ORDERS(3, 2), HWT_ORDERS(4, 2)}};
#undef HWT_ORDERS
static const int k_caps[NV_MAX + 1] = {0, CAP_OF(1), CAP_OF(2), CAP_OF(3), CAP_OF(4)};

static void row(const hwt_conv_row_args *a) {
  const int ocb = a->oc_bn, full = ocb / HV_W, tail = ocb % HV_W;
  const int groups = (full + NV_MAX - 1) / NV_MAX;
  /* With S == 1 both loop orders are the same loop. */
  const int order = (!a->unroll_ker || a->S == 1) ? 0 : a->S == 3 ? 2 : 1;
  const hv_mask mt = hv_first(tail);
  for (int ow0 = 0; ow0 < a->OW; ow0 += a->reg_n) {
    const int blk = a->OW - ow0 < a->reg_n ? a->OW - ow0 : a->reg_n;
    for (int g = 0, v0 = 0; g < groups + (tail > 0); g++) {
      const int masked = g == groups, nv = masked ? 1 : hwt_conv_piece(full, groups, g);
      /* Two output rows share each weight load; the block then holds half
       * the pixels per row. */
      const int cap = k_caps[nv] / a->rows;
      const tile_fn fn = masked ? (a->rows == 1 ? tile_tail_r1 : tile_tail_r2)
                                : k_tiles[a->rows - 1][nv - 1][order];
      const int pieces = (blk + cap - 1) / cap;
      for (int i = 0, off = 0; i < pieces; i++) {
        const int rb = hwt_conv_piece(blk, pieces, i), ow = ow0 + off;
        fn(a, a->in + ow, a->w + v0 * HV_W, a->bias ? a->bias + v0 * HV_W : 0,
           a->out + (long)ow * ocb + v0 * HV_W, mt, rb);
        off += rb;
      }
      v0 += nv;
    }
  }
}

#if defined(__AVX2__)
/* dst[i * ds + j] = src[j * ss + i] for i < 8, j < n (1 <= n <= 8): n row
 * loads (the rest zero), the classic unpack / shuffle / lane-permute
 * transpose (24 shuffles), eight row stores of n lanes. */
static inline void transpose8xn(const float *src, long ss, int n, float *dst, long ds) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; j++) r[j] = j < n ? _mm256_loadu_ps(src + j * ss) : _mm256_setzero_ps();
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  const __m256i m =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int j = 0; j < 4; j++) {
    const __m256 lo = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
    const __m256 hi = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
    if (n == 8) {
      _mm256_storeu_ps(dst + j * ds, lo);
      _mm256_storeu_ps(dst + (j + 4) * ds, hi);
    } else {
      _mm256_maskstore_ps(dst + j * ds, m, lo);
      _mm256_maskstore_ps(dst + (j + 4) * ds, m, hi);
    }
  }
}
#endif

/* Shuffle transposes of 8x8 blocks wherever there are 8 columns, gathers
 * only for fewer. Scalar copies cost 12% of a 64x56x56 3x3 run (7
 * instructions per float, AVX-512), the gathers about a fifth of that; the
 * gathers still took 6.5% of ResNet-18's conv3_1 (64x56x56 -> 128, stride
 * 2, NCHW output transposed back) on Zen 3, where a gather of 8 floats
 * costs about what the whole 8x8 shuffle transpose does. */
/* Gathers for positions [p0, p1) x columns [i0, i1) of stage_tile. */
static void stage_gather(const float *src, long src_stride, int p0, int p1, int i0, int i1,
                         float *dst, long dst_stride) {
  for (int p = p0; p < p1; p += HV_W) {
    const hv_mask m = hv_first(p1 - p);
    const float *s = src + p * src_stride;
    for (int i = i0; i < i1; i++)
      hv_store_mask(dst + i * dst_stride + p, m, hv_gather_mask(s + i, src_stride, m));
  }
}

static void stage_tile(const float *src, long src_stride, int n, int bn, float *dst,
                       long dst_stride) {
#if defined(__AVX2__)
  /* bn >= 8: every i by 8x8 shuffle transposes, the last block of i
   * overlapping the one before (rewriting the same values), and the last
   * positions, when fewer than 8 are left, by masked stores (before, each
   * i past the last multiple of 8, and each position past it, took one
   * gather). ResNet-18's conv5_1 (256x14x14 -> 512, stride 2, NCHW,
   * Winograd: 14-column input rows, 7-pixel output rows), Zen 1 AVX2,
   * thread CPU time per run, three alternated process pairs at load 6.4:
   * input staging 106-153 -> 61-91 us a thread at 2 threads (120-127 ->
   * 69-80 at 1), the whole share 1643-1809 -> 1563-1720 us (3122-3208 ->
   * 2920-3185 at 1). */
  if (bn >= 8) {
    for (int i = 0; i < bn; i += 8) {
      const int i0 = i + 8 <= bn ? i : bn - 8;
      int p = 0;
      for (; p + 8 <= n; p += 8)
        transpose8xn(src + p * src_stride + i0, src_stride, 8, dst + i0 * dst_stride + p,
                     dst_stride);
      if (p < n) {
        const int p0 = n >= 8 ? n - 8 : 0;
        transpose8xn(src + p0 * src_stride + i0, src_stride, n - p0,
                     dst + i0 * dst_stride + p0, dst_stride);
      }
    }
    return;
  }
#endif
  stage_gather(src, src_stride, 0, n, 0, bn, dst, dst_stride);
}

/* dst[pos] = src[pos * step] for pos < n: one stride phase of an NCHW
 * row (stride-2 CONVs). Step 2 by pairs of loads and an even-lane shuffle;
 * other steps by gathers. The scalar loop took 11% of ResNet-18's conv3_1
 * (NCHW, stride 2) on Zen 3. */
static void phase_copy(const float *src, int step, int n, float *dst) {
  int pos = 0;
#if defined(__AVX2__)
  if (step == 2)
    for (; pos + 8 <= n; pos += 8) {
      __m256 a = _mm256_loadu_ps(src + 2 * pos), b = _mm256_loadu_ps(src + 2 * pos + 8);
      __m256 e = _mm256_shuffle_ps(a, b, 0x88); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
      _mm256_storeu_ps(dst + pos, _mm256_castpd_ps(_mm256_permute4x64_pd(
                                      _mm256_castps_pd(e), 0xD8)));
    }
#endif
  for (; pos < n; pos += HV_W) {
    const hv_mask m = hv_first(n - pos);
    hv_store_mask(dst + pos, m, hv_gather_mask(src + (long)pos * step, step, m));
  }
}

/* Both phases of a stride-2 row from one pass over it: per 16 floats two
 * loads, an even-lane and an odd-lane shuffle; the tail (under 8 pairs)
 * scalar, not gathered. Two phase_copy calls read the row twice and spent
 * a gather on each tail: with the per-row bookkeeping they took 9% of
 * ResNet-18's conv3_1 (NCHW, stride 2, Zen 3, 1 thread). */
static void deint2(const float *src, int n, float *even, float *odd) {
  int pos = 0;
#if defined(__AVX2__)
  for (; pos + 8 <= n; pos += 8) {
    __m256 a = _mm256_loadu_ps(src + 2 * pos), b = _mm256_loadu_ps(src + 2 * pos + 8);
    __m256 e = _mm256_shuffle_ps(a, b, 0x88), o = _mm256_shuffle_ps(a, b, 0xDD);
    _mm256_storeu_ps(even + pos, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e),
                                                                        0xD8)));
    _mm256_storeu_ps(odd + pos, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o),
                                                                       0xD8)));
  }
#endif
  for (; pos < n; pos++) {
    even[pos] = src[2 * pos];
    odd[pos] = src[2 * pos + 1];
  }
}

/* hwt_conv_variant.epilogue: OPS_CHAINS vectors a step, SiLU as the
 * element-wise kernel computes it (x times sigmoid_chains: the separate
 * op's bits). The scalar loop it replaces (bias, residual, ReLU; then the
 * activation as a second pass) cost 16->96 at 112x112 (1 thread, avx512,
 * Zen 4 under load, min of 40 interleaved, benchmarks-style ctypes
 * plans): GEMM 421 us, + bias 586 us, + bias + SiLU 998 us. */
static void epilogue(float *y, const float *res, long n, float bias, int relu, float relu_max,
                     int act) {
  const hv_f32 b = hv_set1(bias), zero = hv_zero(), hi = hv_set1(relu_max);
  const int clamp = relu && relu_max > 0.0f;
  long i = 0;
  for (; i + OPS_CHAINS * HV_W <= n; i += OPS_CHAINS * HV_W) {
    hv_f32 v[OPS_CHAINS], x[OPS_CHAINS];
    OPS_EACH v[j] = hv_add(hv_load(y + i + j * HV_W), b);
    if (res) OPS_EACH v[j] = hv_add(v[j], hv_load(res + i + j * HV_W));
    if (relu) OPS_EACH v[j] = hv_max(zero, v[j]); /* NaN kept, as hwt_conv_act */
    if (clamp) OPS_EACH v[j] = hv_min(hi, v[j]);
    if (act == HWT_CONV_ACT_SILU) {
      OPS_EACH x[j] = v[j];
      sigmoid_chains(v);
      OPS_EACH v[j] = hv_mul(x[j], v[j]);
    } else if (act) {
      OPS_EACH v[j] = hwt_conv_act_vec(v[j], act);
    }
    OPS_EACH hv_store(y + i + j * HV_W, v[j]);
  }
  for (; i < n; i += HV_W) {
    const hv_mask m = hv_first(n - i);
    hv_f32 v = hv_add(hv_load_mask(y + i, m), b);
    if (res) v = hv_add(v, hv_load_mask(res + i, m));
    if (relu) v = hv_max(zero, v);
    if (clamp) v = hv_min(hi, v);
    hv_store_mask(y + i, m, hwt_conv_act_vec(v, act));
  }
}

/* hwt_conv_variant.epilogue_t: per output channel, its pixels gathered
 * from the column of c (ldc floats apart; one cache line per pixel, which
 * the next channels read again from L1), then the residual and activation,
 * stored as a contiguous NCHW row. */
static void epilogue_t(float *y, long ldy, const float *c, long ldc, const float *res,
                       int pixels, int channels, int relu, float relu_max, int act) {
  const hv_f32 zero = hv_zero(), hi = hv_set1(relu_max);
  const int clamp = relu && relu_max > 0.0f;
  for (int k = 0; k < channels; k++) {
    float *yk = y + (long)k * ldy;
    const float *rk = res ? res + (long)k * ldy : NULL;
    for (int i = 0; i < pixels; i += HV_W) {
      const hv_mask m = hv_first(pixels - i);
      hv_f32 v = hv_gather_mask(c + (long)i * ldc + k, ldc, m);
      if (rk) v = hv_add(v, hv_load_mask(rk + i, m));
      if (relu) v = hv_max(zero, v); /* NaN kept, as hwt_conv_act */
      if (clamp) v = hv_min(hi, v);
      v = hwt_conv_act_vec(v, act);
      if (i + HV_W <= pixels)
        hv_store(yk + i, v);
      else
        hv_store_mask(yk + i, m, v);
    }
  }
}

/* 1x1 CONVs of at most this many output pixels run on this template, not
 * the GEMM (conv.c). Zen 4, 1 thread, thread-time medians of 21 alternated
 * runs, template (1x1 image rows flattened, conv.c) vs GEMM, under load:
 * AVX-512 at 7x7 1.12-1.29x (MobileNetV2 / EfficientNet-B0's 160->960,
 * 960->160, 960->320, 320->1280, 1152->320, 192->1152, 1152->192), 14x14
 * 1.06-1.12x (96->576, 576->96, 112->672), but 28x28 0.90x (32->192) and
 * 112x112 0.69x (16->96): the template's 14-pixel x 2-vector block (28
 * zmm accumulators) against the GEMM's 12x32 tile, whose 32 columns leave
 * a 49-pixel image 64 wide. AVX2 (6 x 2 ymm blocks on both sides): the GEMM
 * led at 7x7 (template 0.86-0.94x) and beyond; both ISAs led at 1x1 images
 * (squeeze-excitation: 1152->48 2.8x / 1.9x, 48->1152 2.3x / 1.7x, 672->32
 * 1.7x / 1.4x, ctypes calls included), where the GEMM's columns are 1 of
 * its tile's. */
#define PW_MAX_HW HV_BY_ISA(1, 1, 196)

/* 1x1 CONVs of fewer output channels than this run on this template, not
 * the GEMM (conv.c). Zen 4, 1 thread, least of 15 alternated thread-time
 * samples, GEMM vs template (benchmarks/pointwise_layers.py, EfficientNet-B0
 * and MobileNetV2's projections, under load ~9): K = 24 (96->24 and
 * 144->24 at 56x56) 1.62-1.73x on AVX2, 1.13-1.18x on AVX-512; K = 16
 * (32->16 at 112x112) 1.06-1.07x on AVX2 but 0.83-0.88x on AVX-512, whose
 * 12x32 tile spends a 12-row and a 4-row panel on 16 rows. (Zen 3, AVX2:
 * the template led at 192->16, conv.c.) */
#define PW_MIN_K HV_BY_ISA(32, 16, 24)

/* 1x1 CONVs the GEMM path runs (above) of at most this many output pixels
 * run as the transposed GEMM (pw_t.c): AVX2 at 7x7 1.06-1.15x the NCHW
 * GEMM, at 14x14 0.60-0.96x (Zen 3, 1 thread; pw_t.c has the figures).
 * AVX-512 keeps images up to PW_MAX_HW on the template and was not
 * measured on this path: 0. */
#define PW_T_MAX_HW HV_BY_ISA(0, 49, 0)

const hwt_conv_variant HWT_VARIANT(hwt_conv_variant) = {
    .vec = HV_W, .nv_max = NV_MAX, .caps = {0, CAP_OF(1), CAP_OF(2), CAP_OF(3), CAP_OF(4)},
    .block_scratch = 0, .pw_max_hw = PW_MAX_HW,
    .pw_min_k = PW_MIN_K, .row = row, .stage = stage_tile,
    .phase = phase_copy, .deint2 = deint2, .epilogue = epilogue, .pw_t_max_hw = PW_T_MAX_HW,
    .epilogue_t = epilogue_t,
    .stem = &HWT_VARIANT(hwt_conv_stem_variant)};
