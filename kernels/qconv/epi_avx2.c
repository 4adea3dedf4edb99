/* AVX2 epilogue of the direct int8 conv's 6 x 16 tile into an NCHW float
 * output (rs_c 1): the arithmetic of kernels/qconv/epi_avx512.c (the same
 * bit-for-bit argument) on rows of 8 channels, then each 6 x 8 block
 * transposed in registers: a channel's 6 pixels leave as one 128-bit and
 * one 64-bit store instead of 6 scalar ones. u8 channels-last rows (cs_c
 * 1): the same values packed to 16 bytes per pixel, one store. */
#include <immintrin.h>
#include <string.h>
#include "../qgemm/epi.h"
#include "qconv_internal.h"

#define MR 6
#define NR 16

/* The 6 x 8 block r (pixels x channels) stored as channel q's pixels at
 * ch + q * cs (q < n), the first mb of them. */
static inline void store_6x8(const __m256 r[MR], float *ch, ptrdiff_t cs, int n, int mb) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  /* per 128-bit lane l: channel 4l + m of pixels 0..3 in u[m]; of pixels
     4, 5 in the low (m even) or high (m odd) half of t4 (m < 2) or t5 */
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 u[4];
  u[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  u[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  u[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  u[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  for (int l = 0; l < 2; l++) {
    const __m128 p45[2] = {l ? _mm256_extractf128_ps(t4, 1) : _mm256_castps256_ps128(t4),
                           l ? _mm256_extractf128_ps(t5, 1) : _mm256_castps256_ps128(t5)};
    for (int m = 0; m < 4; m++) {
      const int q = 4 * l + m;
      if (q >= n) return;
      const __m128 p03 = l ? _mm256_extractf128_ps(u[m], 1) : _mm256_castps256_ps128(u[m]);
      float *d = ch + (ptrdiff_t)q * cs;
      if (mb == MR) {
        _mm_storeu_ps(d, p03);
        if (m % 2) _mm_storeh_pi((__m64 *)(void *)(d + 4), p45[m / 2]);
        else _mm_storel_pi((__m64 *)(void *)(d + 4), p45[m / 2]);
      } else {
        float tmp[8];
        _mm_storeu_ps(tmp, p03);
        _mm_storeu_ps(tmp + 4, m % 2 ? _mm_movehl_ps(p45[m / 2], p45[m / 2]) : p45[m / 2]);
        memcpy(d, tmp, (size_t)mb * sizeof(float));
      }
    }
  }
}

void hwt_qconv_epi_avx2(const hwt_qgemm_epi *e, const int32_t *acc, const int32_t *colsum,
                        int i0, int mb, int j0, int nb) {
  int32_t qmin, qmax;
  hwt_q_range(e, &qmin, &qmax);
  const int requant = e->out >= HWT_QOUT_QF32, scaled = e->out != HWT_QOUT_ACC;
  const float lo_f = (float)(qmin - e->zy);
  /* ReLU folded into the low clamp: see kernels/qconv/epi_avx512.c */
  const __m256 lo = _mm256_set1_ps(requant && e->relu && lo_f < 0.0f ? 0.0f : lo_f);
  const __m256 hi = _mm256_set1_ps((float)(qmax - e->zy)), zy = _mm256_set1_ps((float)e->zy);
  const __m256 zero = _mm256_setzero_ps();
  const __m256i za = _mm256_set1_epi32(e->za), zyi = _mm256_set1_epi32(e->zy);
  /* a partial column block's per-channel values, zero-padded to the tile
     (the arrays end at the last channel) */
  int32_t cs_p[NR] = {0}, bi_p[NR] = {0};
  float sc_p[NR] = {0}, b_p[NR] = {0};
  const int32_t *cs = colsum + j0, *bias_i = e->bias_i ? e->bias_i + j0 : NULL;
  const float *scale = scaled ? e->scale + j0 : NULL, *bias = e->bias ? e->bias + j0 : NULL;
  if (nb < NR) {
    memcpy(cs_p, cs, (size_t)nb * 4);
    cs = cs_p;
    if (bias_i) bias_i = memcpy(bi_p, bias_i, (size_t)nb * 4);
    if (scale) scale = memcpy(sc_p, scale, (size_t)nb * 4);
    if (bias) bias = memcpy(b_p, bias, (size_t)nb * 4);
  }
  float *c = (float *)e->C + i0;
  __m256i rows[2][MR]; /* u8 outputs: both halves' int32 values */
  rows[1][0] = rows[1][1] = rows[1][2] = rows[1][3] = rows[1][4] = rows[1][5] =
      _mm256_setzero_si256();
  for (int h = 0; h < NR / 8 && 8 * h < nb; h++) {
    const int n = nb - 8 * h < 8 ? nb - 8 * h : 8;
    __m256i off = _mm256_mullo_epi32(za, _mm256_loadu_si256((const __m256i *)(cs + 8 * h)));
    off = _mm256_sub_epi32(bias_i ? _mm256_loadu_si256((const __m256i *)(bias_i + 8 * h))
                                  : _mm256_setzero_si256(),
                           off);
    const __m256 sc = scale ? _mm256_loadu_ps(scale + 8 * h) : zero;
    const __m256 bi = bias ? _mm256_loadu_ps(bias + 8 * h) : zero;
    __m256 r[MR];
    for (int i = 0; i < MR; i++) {
      __m256 v = _mm256_cvtepi32_ps(_mm256_add_epi32(
          _mm256_loadu_si256((const __m256i *)(acc + i * NR + 8 * h)), off));
      if (scaled) {
        v = _mm256_mul_ps(v, sc);
        /* without a bias, + 0 only turns -0 into +0, which requantising drops */
        if (e->bias || !requant) v = _mm256_add_ps(v, bi);
        if (e->out == HWT_QOUT_U8) { /* rne(v) + zy as integers (kernels/qconv/epi_avx512.c) */
          rows[h][i] = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(hi, _mm256_max_ps(lo, v))),
                                        zyi);
          r[i] = v; /* unused: keeps every path's r[] initialised for -Wmaybe-uninitialized */
          continue;
        }
        if (requant) {
          v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
          v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                            zy);
        } else if (e->relu) {
          v = _mm256_max_ps(zero, v); /* NaN kept, as hwt_q_value's float output */
        }
      }
      r[i] = v;
    }
    if (e->out == HWT_QOUT_U8) continue;
    store_6x8(r, c + (ptrdiff_t)(j0 + 8 * h) * e->cs_c, e->cs_c, n, mb);
  }
  if (e->out == HWT_QOUT_U8) { /* channels-last bytes: a pixel's 16 channels adjacent */
    uint8_t *px = (uint8_t *)e->C + (ptrdiff_t)i0 * e->rs_c + j0;
    for (int i = 0; i < mb; i++) {
      /* u16 [0..3 | 8..11 | 4..7 | 12..15] by lanes, reordered, then bytes */
      const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(rows[0][i], rows[1][i]),
                                                 0xD8);
      const __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(w),
                                         _mm256_extracti128_si256(w, 1));
      uint8_t *d = px + (ptrdiff_t)i * e->rs_c;
      if (nb == NR) {
        _mm_storeu_si128((__m128i *)(void *)d, b);
      } else {
        uint8_t tmp[16];
        _mm_storeu_si128((__m128i *)(void *)tmp, b);
        memcpy(d, tmp, (size_t)nb);
      }
    }
  }
}
