/* NCHW[x]c CONV row kernel, AVX-512 (NeoCPU Algorithm 1). Register block:
 * rb output pixels x nv (1 or 2) vectors of 16 output channels. Each weight
 * vector is loaded once and multiplied by rb input values broadcast straight
 * from memory at fixed 4-byte steps (the staged layout, conv_internal.h), so
 * every FMA takes a micro-fused [reg + disp]{1to16} operand. Output-channel
 * blocks that are not a multiple of 16 use masked loads and stores. */
#include <immintrin.h>
#include "conv_internal.h"

#define AI static inline __attribute__((always_inline))

/* RH rows x RB pixels x NV vectors: one weight row (oc_bn floats) against
 * RH input runs of RB consecutive floats, ohs floats apart. */
AI void fma_step(__m512 *acc, const float *iq, long ohs, const float *wq, __mmask16 m0,
                 __mmask16 m1, const int RB, const int NV, const int RH) {
  __m512 w0 = _mm512_maskz_loadu_ps(m0, wq);
  __m512 w1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, wq + 16) : w0;
#pragma GCC unroll 2
  for (int h = 0; h < RH; h++)
#pragma GCC unroll 32
  for (int j = 0; j < RB; j++) {
    __m512 xv = _mm512_set1_ps(iq[h * ohs + j]);
    acc[(h * RB + j) * NV] = _mm512_fmadd_ps(xv, w0, acc[(h * RB + j) * NV]);
    if (NV > 1) acc[(h * RB + j) * NV + 1] = _mm512_fmadd_ps(xv, w1, acc[(h * RB + j) * NV + 1]);
  }
}

/* One register block: the whole reduction (C, R, S) for rb pixels. RB, NV,
 * UNR and SK are compile-time constants at every call site, so acc[] lives
 * in registers. UNR selects unroll_ker's order (ic outside kw); SK > 0 fixes
 * the kernel width so that order's kw loop is unrolled. */
AI void tile(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
             float *out, __mmask16 m0, __mmask16 m1, const int RB, const int NV,
             const int UNR, const int SK, const int RH) {
  __m512 acc[HWT_CONV_AVX512_CAP1];
  __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  __m512 b1 = (NV > 1 && bias) ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
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
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 32
  for (int q = 0; q < RH * RB; q++) {
    const int j = q % RB;
    float *o = out + (q / RB) * ors;
    __m512 r0 = relu ? _mm512_max_ps(acc[q * NV], zero) : acc[q * NV];
    _mm512_mask_storeu_ps(o + (long)j * ocb, m0, r0);
    if (NV > 1) {
      __m512 r1 = relu ? _mm512_max_ps(acc[q * NV + 1], zero) : acc[q * NV + 1];
      _mm512_mask_storeu_ps(o + (long)j * ocb + 16, m1, r1);
    }
  }
}

/* Turns the run-time block size into a compile-time one. */
AI void tile_rb(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
                float *out, __mmask16 m0, __mmask16 m1, int rb, const int NV, const int UNR,
                const int SK, const int RH) {
#define HWT_TILE_CASE(n)                                     \
  case n:                                                    \
    if ((n) * NV * RH <= HWT_CONV_AVX512_CAP1)                 \
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

typedef void (*tile_fn)(const hwt_conv_row_args *, const float *, const float *, const float *,
                        float *, __mmask16, __mmask16, int);

/* One out-of-line instance per (vectors, loop order, fixed kernel width,
 * output rows). */
#define HWT_TILE_FN(name, NV, UNR, SK, RH)                                                        \
  static void name(const hwt_conv_row_args *a, const float *in, const float *w,              \
                   const float *bias, float *out, __mmask16 m0, __mmask16 m1, int rb) {       \
    tile_rb(a, in, w, bias, out, m0, m1, rb, NV, UNR, SK, RH);                                    \
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

static __mmask16 lane_mask(int lanes) {
  if (lanes >= 16) return (__mmask16)0xFFFF;
  return lanes <= 0 ? (__mmask16)0 : (__mmask16)((1u << lanes) - 1u);
}

void hwt_conv_row_avx512(const hwt_conv_row_args *a) {
  const int ocb = a->oc_bn, nvec = (ocb + 15) / 16;
  for (int ow0 = 0; ow0 < a->OW; ow0 += a->reg_n) {
    int blk = a->OW - ow0 < a->reg_n ? a->OW - ow0 : a->reg_n;
    for (int v0 = 0; v0 < nvec; v0 += 2) {
      int nv = nvec - v0 >= 2 ? 2 : 1;
      int lanes = ocb - v0 * 16;
      __mmask16 m0 = lane_mask(lanes), m1 = lane_mask(lanes - 16);
      int cap = nv == 1 ? HWT_CONV_AVX512_CAP1 : HWT_CONV_AVX512_CAP2;
      /* Two output rows share each weight load; the block then holds half
       * the pixels per row. */
      cap /= a->rows;
      int pieces = (blk + cap - 1) / cap;
      tile_fn fn = pick(nv, a->unroll_ker, a->S, a->rows);
      for (int i = 0, off = 0; i < pieces; i++) {
        int rb = hwt_conv_piece(blk, pieces, i);
        int ow = ow0 + off;
        fn(a, a->in + ow, a->w + v0 * 16, a->bias ? a->bias + v0 * 16 : 0,
           a->out + (long)ow * ocb + v0 * 16, m0, m1, rb);
        off += rb;
      }
    }
  }
}

/* One gather per channel: scalar copies cost 12% of a 64x56x56 3x3 run
 * (7 instructions per float), the gathers about a fifth of that. */
void hwt_conv_stage_tile_avx512(const float *src, long src_stride, int n, int bn, float *dst,
                                long dst_stride) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int)src_stride));
  const __mmask16 m = lane_mask(n);
  for (int i = 0; i < bn; i++) {
    __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + i, 4);
    _mm512_mask_storeu_ps(dst + i * dst_stride, m, v);
  }
}
