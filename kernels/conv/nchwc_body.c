/* NCHW[x]c CONV row kernel (NeoCPU Algorithm 1), compiled once per SIMD ISA
 * over kernels/common/vec.h (kernels.cmake); the portable variant is
 * nchwc_generic.c, which keeps its accumulators in memory instead.
 *
 * Register block: rb output pixels x nv (1 or 2) vectors of HV_W output
 * channels. Each weight vector is loaded once and multiplied by rb input
 * values broadcast from memory at fixed 4-byte steps (the staged layout,
 * conv_internal.h): AVX-512 FMAs take them as micro-fused [reg + disp]{1to16}
 * operands; AVX2 FMAs cannot broadcast a memory operand, so a broadcast
 * register is needed there. Output-channel blocks that are not a multiple of
 * HV_W use masked loads and stores. */
#include "../common/vec.h"
#include "conv_internal.h"

/* Register blocks (pixels x vectors) that stay in registers, derived from
 * the register file. 32 zmm: 28 accumulators + 2 weight vectors + 2 spare;
 * GCC 12 keeps the 28x1 and 14x2 blocks entirely in registers (checked in
 * the disassembly). 16 ymm: 12 accumulators + 1 weight + 1 broadcast + 2
 * spare, or 6x2 accumulators + 2 weights + 1 broadcast. Two vectors per
 * pixel halve the pixel count. */
#define CAP1 (HV_REGS - 4)
#define CAP2 (CAP1 / 2)

/* RH rows x RB pixels x NV vectors: one weight row (oc_bn floats) against
 * RH input runs of RB consecutive floats, ohs floats apart. */
HV_AI void fma_step(hv_f32 *acc, const float *iq, long ohs, const float *wq, hv_mask m0,
                    hv_mask m1, const int RB, const int NV, const int RH) {
  hv_f32 w0 = hv_load_mask(wq, m0);
  hv_f32 w1 = NV > 1 ? hv_load_mask(wq + HV_W, m1) : w0;
#pragma GCC unroll 2
  for (int h = 0; h < RH; h++)
#pragma GCC unroll 32
  for (int j = 0; j < RB; j++) {
    hv_f32 xv = hv_set1(iq[h * ohs + j]);
    acc[(h * RB + j) * NV] = hv_fmadd(xv, w0, acc[(h * RB + j) * NV]);
    if (NV > 1) acc[(h * RB + j) * NV + 1] = hv_fmadd(xv, w1, acc[(h * RB + j) * NV + 1]);
  }
}

/* One register block: the whole reduction (C, R, S) for rb pixels. RB, NV,
 * UNR and SK are compile-time constants at every call site, so acc[] lives
 * in registers. UNR selects unroll_ker's order (ic outside kw); SK > 0 fixes
 * the kernel width so that order's kw loop is unrolled. */
HV_AI void tile(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
                float *out, hv_mask m0, hv_mask m1, const int RB, const int NV, const int UNR,
                const int SK, const int RH) {
  hv_f32 acc[CAP1];
  hv_f32 b0 = bias ? hv_load_mask(bias, m0) : hv_zero();
  hv_f32 b1 = (NV > 1 && bias) ? hv_load_mask(bias + HV_W, m1) : hv_zero();
#pragma GCC unroll 32
  for (int j = 0; j < RH * RB; j++) {
    acc[j * NV] = b0;
    if (NV > 1) acc[j * NV + 1] = b1;
  }
  const int S = SK ? SK : a->S, R = a->R, CB = a->CB;
  const int icb = a->ic_bn, ocb = a->oc_bn, relu = a->relu;
  const long ics = a->in_ic_stride, rows = a->in_row_stride, cbs = a->in_cb_stride;
  const long ohs = a->in_oh_stride, ors = a->out_row_stride;
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
            fma_step(acc, iq, ohs, wq, m0, m1, RB, NV, RH);
        }
      } else {
        for (int ic = 0; ic < icb; ic++) {
#pragma GCC unroll 8
          for (int kw = 0; kw < S; kw++)
            fma_step(acc, ip + ic * ics + koff[kw], ohs, wp + (long)(kw * icb + ic) * ocb, m0,
                     m1, RB, NV, RH);
        }
      }
    }
  }
  const hv_f32 zero = hv_zero();
#pragma GCC unroll 32
  for (int q = 0; q < RH * RB; q++) {
    const int j = q % RB;
    float *o = out + (q / RB) * ors;
    hv_f32 r0 = relu ? hv_max(acc[q * NV], zero) : acc[q * NV];
    hv_store_mask(o + (long)j * ocb, m0, r0);
    if (NV > 1) {
      hv_f32 r1 = relu ? hv_max(acc[q * NV + 1], zero) : acc[q * NV + 1];
      hv_store_mask(o + (long)j * ocb + HV_W, m1, r1);
    }
  }
}

/* Turns the run-time block size into a compile-time one; sizes beyond the
 * register file are never called (the driver splits blocks at the cap). */
HV_AI void tile_rb(const hwt_conv_row_args *a, const float *in, const float *w,
                   const float *bias, float *out, hv_mask m0, hv_mask m1, int rb, const int NV,
                   const int UNR, const int SK, const int RH) {
#define HWT_TILE_CASE(n)                                     \
  case n:                                                    \
    if ((n) * NV * RH <= CAP1)                               \
      tile(a, in, w, bias, out, m0, m1, n, NV, UNR, SK, RH); \
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
_Static_assert(CAP1 <= 28, "tile_rb lists block sizes up to 28 pixels");

typedef void (*tile_fn)(const hwt_conv_row_args *, const float *, const float *, const float *,
                        float *, hv_mask, hv_mask, int);

/* One out-of-line instance per (vectors, loop order, fixed kernel width,
 * output rows). */
#define HWT_TILE_FN(name, NV, UNR, SK, RH)                                                \
  static void name(const hwt_conv_row_args *a, const float *in, const float *w,          \
                   const float *bias, float *out, hv_mask m0, hv_mask m1, int rb) {      \
    tile_rb(a, in, w, bias, out, m0, m1, rb, NV, UNR, SK, RH);                            \
  }
HWT_TILE_FN(tile_v1_r1, 1, 0, 0, 1)
HWT_TILE_FN(tile_v2_r1, 2, 0, 0, 1)
HWT_TILE_FN(tile_v1_unroll_r1, 1, 1, 0, 1)
HWT_TILE_FN(tile_v2_unroll_r1, 2, 1, 0, 1)
HWT_TILE_FN(tile_v1_unroll3_r1, 1, 1, 3, 1)
HWT_TILE_FN(tile_v2_unroll3_r1, 2, 1, 3, 1)
HWT_TILE_FN(tile_v1_r2, 1, 0, 0, 2)
HWT_TILE_FN(tile_v2_r2, 2, 0, 0, 2)
HWT_TILE_FN(tile_v1_unroll_r2, 1, 1, 0, 2)
HWT_TILE_FN(tile_v2_unroll_r2, 2, 1, 0, 2)
HWT_TILE_FN(tile_v1_unroll3_r2, 1, 1, 3, 2)
HWT_TILE_FN(tile_v2_unroll3_r2, 2, 1, 3, 2)
#undef HWT_TILE_FN

static tile_fn pick(int nv, int unroll, int S, int rh) {
  static const tile_fn fns[2][3][2] = {
      {{tile_v1_r1, tile_v2_r1}, {tile_v1_unroll_r1, tile_v2_unroll_r1},
       {tile_v1_unroll3_r1, tile_v2_unroll3_r1}},
      {{tile_v1_r2, tile_v2_r2}, {tile_v1_unroll_r2, tile_v2_unroll_r2},
       {tile_v1_unroll3_r2, tile_v2_unroll3_r2}}};
  /* With S == 1 both loop orders are the same loop. */
  int order = (!unroll || S == 1) ? 0 : S == 3 ? 2 : 1;
  return fns[rh - 1][order][nv - 1];
}

static void row(const hwt_conv_row_args *a) {
  const int ocb = a->oc_bn, nvec = (ocb + HV_W - 1) / HV_W;
  for (int ow0 = 0; ow0 < a->OW; ow0 += a->reg_n) {
    int blk = a->OW - ow0 < a->reg_n ? a->OW - ow0 : a->reg_n;
    for (int v0 = 0; v0 < nvec; v0 += 2) {
      int nv = nvec - v0 >= 2 ? 2 : 1;
      int lanes = ocb - v0 * HV_W;
      hv_mask m0 = hv_first(lanes), m1 = hv_first(lanes - HV_W);
      int cap = nv == 1 ? CAP1 : CAP2;
      /* Two output rows share each weight load; the block then holds half
       * the pixels per row. */
      cap /= a->rows;
      int pieces = (blk + cap - 1) / cap;
      tile_fn fn = pick(nv, a->unroll_ker, a->S, a->rows);
      for (int i = 0, off = 0; i < pieces; i++) {
        int rb = hwt_conv_piece(blk, pieces, i);
        int ow = ow0 + off;
        fn(a, a->in + ow, a->w + v0 * HV_W, a->bias ? a->bias + v0 * HV_W : 0,
           a->out + (long)ow * ocb + v0 * HV_W, m0, m1, rb);
        off += rb;
      }
    }
  }
}

/* One gather per channel and HV_W columns: scalar copies cost 12% of a
 * 64x56x56 3x3 run (7 instructions per float, AVX-512), the gathers about a
 * fifth of that. */
static void stage_tile(const float *src, long src_stride, int n, int bn, float *dst,
                       long dst_stride) {
  for (int p0 = 0; p0 < n; p0 += HV_W) {
    const hv_mask m = hv_first(n - p0);
    const float *s = src + p0 * src_stride;
    for (int i = 0; i < bn; i++)
      hv_store_mask(dst + i * dst_stride + p0, m, hv_gather_mask(s + i, src_stride, m));
  }
}

/* Ties in oc_bn go to two vectors per pixel when the register file still
 * holds a 14-pixel block of them (AVX-512): half the loads per FMA,
 * measured 91-100 vs 71-77 GFLOPS for one vector on the ResNet-18 3x3
 * layers at 56/28/14, 66 vs 50 at 7x7 (1 thread). */
const hwt_conv_variant HWT_VARIANT(hwt_conv_variant) = {
    .vec = HV_W, .cap1 = CAP1, .cap2 = CAP2, .prefer_two = CAP2 >= 14, .block_scratch = 0,
    .row = row, .stage = stage_tile};
