/* AVX-512 epilogue of the direct int8 conv's 8 x 32 tile into an NCHW
 * float output (rs_c 1: a channel's 8 pixels are adjacent): the GEMM
 * epilogue's per-element arithmetic (kernels/qgemm/epi.h) on rows of 16
 * channels, then each 8 x 16 block transposed in registers so that every
 * channel's 8 pixels leave as one 256-bit store. The GEMM's epilogue
 * stored the tile value by value (256 scalar stores, each an extract):
 * hwt_qgemm_epi_avx512 took 8.3% of the int8 ResNet-50's samples against
 * 12.5% in the VNNI micro-kernel (perf, 1 thread, under load).
 *
 * Bit for bit the reference's arithmetic: c = acc - za * colsum + bias_i
 * (int32, wrapping alike), (float)c * scale + bias unfused (the build is
 * ISO C: no contraction, and the intrinsics are separate), clamps and ReLU
 * as max/min whose operand order gives the reference's `a < b ? ...`
 * choices, and rne(v) + zy as vroundscaleps (ties to even) then + zy: the
 * two differ only in the sign of a zero, which + zy removes. u8 outputs
 * in channels-last rows (cs_c 1, the byte links of hwtune.engine.qlayout)
 * take the same values, narrowed, one 16-byte store per row and half tile:
 * through the GEMM's epilogue they cost what the transposing float stores
 * had saved (hwt_qgemm_epi_avx512 2.4% of the int8 ResNet-50's samples for
 * the 32 byte-linked convs' outputs against 3.9% for the other 21 convs'
 * float ones, perf, 1 thread, under load). Only called after the plan saw
 * avx512_vnni in CPUID. */
#include <immintrin.h>
#include "../qgemm/epi.h"
#include "qconv_internal.h"

#define MR 8
#define NR 32

/* Rows r[0..7] (pixels) of 16 channels -> channel m's 8 pixels in
 * ymm (out[m]), m = 0..15. */
static inline void transpose_8x16(const __m512 r[8], __m256 out[16]) {
  __m512 t[8], u[8];
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  /* per 128-bit lane l: u[m] (m < 4) holds channel 4l + m of pixels 0..3,
     u[4 + m] the same of pixels 4..7 */
  for (int h = 0; h < 2; h++) {
    const __m512 *th = t + 4 * h;
    u[4 * h + 0] = _mm512_shuffle_ps(th[0], th[2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 1] = _mm512_shuffle_ps(th[0], th[2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * h + 2] = _mm512_shuffle_ps(th[1], th[3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 3] = _mm512_shuffle_ps(th[1], th[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  /* lanes (a.0, b.0, a.1, b.1) and (a.2, b.2, a.3, b.3) */
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i hi =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int m = 0; m < 4; m++) {
    const __m512 a = _mm512_permutex2var_ps(u[m], lo, u[4 + m]);
    const __m512 b = _mm512_permutex2var_ps(u[m], hi, u[4 + m]);
    out[m] = _mm512_castps512_ps256(a);
    out[4 + m] = _mm512_extractf32x8_ps(a, 1);
    out[8 + m] = _mm512_castps512_ps256(b);
    out[12 + m] = _mm512_extractf32x8_ps(b, 1);
  }
}

void hwt_qconv_epi_avx512(const hwt_qgemm_epi *e, const int32_t *acc, const int32_t *colsum,
                          int i0, int mb, int j0, int nb) {
  int32_t qmin, qmax;
  hwt_q_range(e, &qmin, &qmax);
  const int requant = e->out >= HWT_QOUT_QF32, scaled = e->out != HWT_QOUT_ACC;
  const float lo_f = (float)(qmin - e->zy);
  /* ReLU then the low clamp is the clamp at max(lo, 0) (the results differ
     at most in a zero's sign, which rne(v) + zy drops) */
  const __m512 lo = _mm512_set1_ps(requant && e->relu && lo_f < 0.0f ? 0.0f : lo_f);
  const __m512 hi = _mm512_set1_ps((float)(qmax - e->zy)), zy = _mm512_set1_ps((float)e->zy);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i za = _mm512_set1_epi32(e->za), zyi = _mm512_set1_epi32(e->zy);
  const __mmask8 pm = (__mmask8)((1u << mb) - 1u);
  float *c = (float *)e->C + i0;
  for (int h = 0; h < NR / 16 && 16 * h < nb; h++) {
    const int n = nb - 16 * h < 16 ? nb - 16 * h : 16, j = j0 + 16 * h;
    const __mmask16 m = (__mmask16)((1u << n) - 1u);
    __m512i off = _mm512_mullo_epi32(za, _mm512_maskz_loadu_epi32(m, colsum + j));
    off = _mm512_sub_epi32(e->bias_i ? _mm512_maskz_loadu_epi32(m, e->bias_i + j)
                                     : _mm512_setzero_si512(),
                           off);
    const __m512 sc = scaled ? _mm512_maskz_loadu_ps(m, e->scale + j) : zero;
    const __m512 bi = e->bias ? _mm512_maskz_loadu_ps(m, e->bias + j) : zero;
    if (e->out == HWT_QOUT_U8) { /* channels-last bytes: a pixel's channels adjacent */
      uint8_t *px = (uint8_t *)e->C + (ptrdiff_t)i0 * e->rs_c + j;
      for (int i = 0; i < mb; i++) {
        __m512 v = _mm512_cvtepi32_ps(
            _mm512_add_epi32(_mm512_loadu_si512(acc + i * NR + 16 * h), off));
        v = _mm512_mul_ps(v, sc);
        if (e->bias) v = _mm512_add_ps(v, bi);
        v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        /* vcvtps2dq rounds to nearest even (the default MXCSR mode, which
           hwt_q_rne assumes too): rne(v) + zy as integers, exactly */
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zyi);
        _mm_mask_storeu_epi8(px + (ptrdiff_t)i * e->rs_c, m, _mm512_cvtepi32_epi8(q));
      }
      continue;
    }
    __m512 r[MR];
    for (int i = 0; i < MR; i++) {
      __m512 v = _mm512_cvtepi32_ps(
          _mm512_add_epi32(_mm512_loadu_si512(acc + i * NR + 16 * h), off));
      if (scaled) {
        v = _mm512_mul_ps(v, sc);
        /* without a bias, + 0 only turns -0 into +0, which requantising drops */
        if (e->bias || !requant) v = _mm512_add_ps(v, bi);
        if (requant) {
          v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
          v = _mm512_add_ps(
              _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
        } else if (e->relu) {
          v = _mm512_max_ps(zero, v); /* NaN kept, as hwt_q_value's float output */
        }
      }
      r[i] = v;
    }
    __m256 col[16];
    transpose_8x16(r, col);
    float *ch = c + (ptrdiff_t)j * e->cs_c;
    if (mb == MR && n == 16) {
      for (int q = 0; q < 16; q++) _mm256_storeu_ps(ch + (ptrdiff_t)q * e->cs_c, col[q]);
    } else {
      for (int q = 0; q < n; q++) _mm256_mask_storeu_ps(ch + (ptrdiff_t)q * e->cs_c, pm, col[q]);
    }
  }
}
