/* NCHW[x]c CONV row kernel, AVX2 + FMA: the AVX-512 kernel's structure
 * (see nchwc_avx512.c) with 8-lane vectors, 16 registers (so smaller
 * blocks) and a broadcast register, since AVX2 FMAs cannot broadcast a
 * memory operand. Channel tails use vmaskmov loads/stores. */
#include <immintrin.h>
#include "conv_internal.h"

#define AI static inline __attribute__((always_inline))

/* RH rows x RB pixels x NV vectors: one weight row (oc_bn floats) against
 * RH input runs of RB consecutive floats, ohs floats apart. */
AI void fma_step(__m256 *acc, const float *iq, long ohs, const float *wq, __m256i m0,
                 __m256i m1, const int RB, const int NV, const int RH) {
  __m256 w0 = _mm256_maskload_ps(wq, m0);
  __m256 w1 = NV > 1 ? _mm256_maskload_ps(wq + 8, m1) : w0;
#pragma GCC unroll 2
  for (int h = 0; h < RH; h++)
#pragma GCC unroll 32
  for (int j = 0; j < RB; j++) {
    __m256 xv = _mm256_set1_ps(iq[h * ohs + j]);
    acc[(h * RB + j) * NV] = _mm256_fmadd_ps(xv, w0, acc[(h * RB + j) * NV]);
    if (NV > 1) acc[(h * RB + j) * NV + 1] = _mm256_fmadd_ps(xv, w1, acc[(h * RB + j) * NV + 1]);
  }
}

/* One register block: the whole reduction (C, R, S) for rb pixels. RB, NV,
 * UNR and SK are compile-time constants at every call site, so acc[] lives
 * in registers. UNR selects unroll_ker's order (ic outside kw); SK > 0 fixes
 * the kernel width so that order's kw loop is unrolled. */
AI void tile(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
             float *out, __m256i m0, __m256i m1, const int RB, const int NV,
             const int UNR, const int SK, const int RH) {
  __m256 acc[HWT_CONV_AVX2_CAP1];
  __m256 b0 = bias ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps();
  __m256 b1 = (NV > 1 && bias) ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps();
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
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 32
  for (int q = 0; q < RH * RB; q++) {
    const int j = q % RB;
    float *o = out + (q / RB) * ors;
    __m256 r0 = relu ? _mm256_max_ps(acc[q * NV], zero) : acc[q * NV];
    _mm256_maskstore_ps(o + (long)j * ocb, m0, r0);
    if (NV > 1) {
      __m256 r1 = relu ? _mm256_max_ps(acc[q * NV + 1], zero) : acc[q * NV + 1];
      _mm256_maskstore_ps(o + (long)j * ocb + 8, m1, r1);
    }
  }
}

/* Turns the run-time block size into a compile-time one. */
AI void tile_rb(const hwt_conv_row_args *a, const float *in, const float *w, const float *bias,
                float *out, __m256i m0, __m256i m1, int rb, const int NV, const int UNR,
                const int SK, const int RH) {
#define HWT_TILE_CASE(n)                                     \
  case n:                                                    \
    if ((n) * NV * RH <= HWT_CONV_AVX2_CAP1)                 \
      tile(a, in, w, bias, out, m0, m1, n, NV, UNR, SK, RH); \
    break;
  switch (rb) {
    HWT_TILE_CASE(1) HWT_TILE_CASE(2) HWT_TILE_CASE(3) HWT_TILE_CASE(4) HWT_TILE_CASE(5)
    HWT_TILE_CASE(6) HWT_TILE_CASE(7) HWT_TILE_CASE(8) HWT_TILE_CASE(9) HWT_TILE_CASE(10)
    HWT_TILE_CASE(11) HWT_TILE_CASE(12)
    default: break;
  }
#undef HWT_TILE_CASE
}

typedef void (*tile_fn)(const hwt_conv_row_args *, const float *, const float *, const float *,
                        float *, __m256i, __m256i, int);

/* One out-of-line instance per (vectors, loop order, fixed kernel width,
 * output rows). */
#define HWT_TILE_FN(name, NV, UNR, SK, RH)                                                        \
  static void name(const hwt_conv_row_args *a, const float *in, const float *w,              \
                   const float *bias, float *out, __m256i m0, __m256i m1, int rb) {       \
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

static __m256i lane_mask(int lanes) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), idx);
}

void hwt_conv_row_avx2(const hwt_conv_row_args *a) {
  const int ocb = a->oc_bn, nvec = (ocb + 7) / 8;
  for (int ow0 = 0; ow0 < a->OW; ow0 += a->reg_n) {
    int blk = a->OW - ow0 < a->reg_n ? a->OW - ow0 : a->reg_n;
    for (int v0 = 0; v0 < nvec; v0 += 2) {
      int nv = nvec - v0 >= 2 ? 2 : 1;
      int lanes = ocb - v0 * 8;
      __m256i m0 = lane_mask(lanes), m1 = lane_mask(lanes - 8);
      int cap = nv == 1 ? HWT_CONV_AVX2_CAP1 : HWT_CONV_AVX2_CAP2;
      /* Two output rows share each weight load; the block then holds half
       * the pixels per row. */
      cap /= a->rows;
      int pieces = (blk + cap - 1) / cap;
      tile_fn fn = pick(nv, a->unroll_ker, a->S, a->rows);
      for (int i = 0, off = 0; i < pieces; i++) {
        int rb = hwt_conv_piece(blk, pieces, i);
        int ow = ow0 + off;
        fn(a, a->in + ow, a->w + v0 * 8, a->bias ? a->bias + v0 * 8 : 0,
           a->out + (long)ow * ocb + v0 * 8, m0, m1, rb);
        off += rb;
      }
    }
  }
}

/* One gather per channel and 8 columns (see nchwc_avx512.c). */
void hwt_conv_stage_tile_avx2(const float *src, long src_stride, int n, int bn, float *dst,
                              long dst_stride) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32((int)src_stride));
  for (int p0 = 0; p0 < n; p0 += 8) {
    const __m256i m = lane_mask(n - p0);
    const float *s = src + p0 * src_stride;
    for (int i = 0; i < bn; i++) {
      __m256 v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), s + i, idx, _mm256_castsi256_ps(m), 4);
      _mm256_maskstore_ps(dst + i * dst_stride + p0, m, v);
    }
  }
}
