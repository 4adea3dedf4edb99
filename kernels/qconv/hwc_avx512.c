/* AVX-512 conversion of float NCHW activations into the direct int8
 * conv's u8 channels-last pixels (hwt_qconv_to_hwc): 16 pixels x 16
 * channels per step. Each channel's 16 pixels are clamped and truncated
 * as floats (the portable form's operations and order, so NaN and
 * out-of-range values give its bytes), narrowed by two packs to a 4 x 4
 * byte block per 128-bit lane (4 channels x 4 pixels), transposed in the
 * lane by one vpshufb into pixel dwords, then a 4 x 4 dword transpose
 * leaves each pixel's 16 channels as one 16-byte store. Channel tails and
 * the zero channels up to icp are a masked byte store of the same block.
 * The portable form's 4 x 4 SSE2 steps (qconv_run with it inlined) took
 * 3.9% of the int8 ResNet-50's samples against 17.1% in the VNNI
 * micro-kernel (perf, 1 thread, under load). */
#include <immintrin.h>
#include "qconv_internal.h"

/* Pixels per pass over the channels: the pass's destination lines
   (QCONV_HWC_BLOCK x icp bytes) stay in L1 while the channel blocks fill
   them (the portable form's 64, measured there) */
enum { QCONV_HWC_BLOCK = 64 };

void hwt_qconv_hwc_avx512(int ic, int icp, const float *x, ptrdiff_t plane, int n, float shift,
                          uint8_t *dst) {
  const __m512 add = _mm512_set1_ps(shift), lo = _mm512_setzero_ps(),
               hi = _mm512_set1_ps(255.0f);
  /* in each lane: byte 4c + p (channel c, pixel p) -> 4p + c */
  const __m512i tr = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  for (int e0 = 0; e0 < n; e0 += QCONV_HWC_BLOCK) {
    const int eb = n - e0 < QCONV_HWC_BLOCK ? n - e0 : QCONV_HWC_BLOCK;
    for (int c0 = 0; c0 < icp; c0 += 16) {
      const int nc = ic - c0 < 16 ? ic - c0 : 16, nbytes = icp - c0 < 16 ? icp - c0 : 16;
      const __mmask16 bm = (__mmask16)((1u << nbytes) - 1u);
      for (int e = e0; e < e0 + eb; e += 16) {
        const int np = e0 + eb - e < 16 ? e0 + eb - e : 16;
        const __mmask16 pm = (__mmask16)((1u << np) - 1u);
        __m512i q[16];
        for (int k = 0; k < 16; k++) {
          if (k >= nc) {
            q[k] = _mm512_setzero_si512();
            continue;
          }
          const float *src = x + (ptrdiff_t)(c0 + k) * plane + e;
          __m512 f = np == 16 ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(pm, src);
          f = _mm512_add_ps(f, add);
          /* v < 0 ? 0 : v, then v > 255 ? 255 : v */
          f = _mm512_min_ps(hi, _mm512_max_ps(lo, f));
          q[k] = _mm512_cvttps_epi32(f);
        }
        __m512i g[4];
        for (int k = 0; k < 4; k++) {
          const __m512i w01 = _mm512_packs_epi32(q[4 * k], q[4 * k + 1]);
          const __m512i w23 = _mm512_packs_epi32(q[4 * k + 2], q[4 * k + 3]);
          g[k] = _mm512_shuffle_epi8(_mm512_packus_epi16(w01, w23), tr);
        }
        const __m512i a = _mm512_unpacklo_epi32(g[0], g[1]), b = _mm512_unpackhi_epi32(g[0], g[1]);
        const __m512i c = _mm512_unpacklo_epi32(g[2], g[3]), d = _mm512_unpackhi_epi32(g[2], g[3]);
        /* pm[m], lane l: pixel e + 4l + m's 16 channels */
        const __m512i px[4] = {_mm512_unpacklo_epi64(a, c), _mm512_unpackhi_epi64(a, c),
                               _mm512_unpacklo_epi64(b, d), _mm512_unpackhi_epi64(b, d)};
        uint8_t *out = dst + (size_t)e * (size_t)icp + (size_t)c0;
        for (int m = 0; m < 4; m++) {
          const __m128i v[4] = {_mm512_castsi512_si128(px[m]), _mm512_extracti32x4_epi32(px[m], 1),
                                _mm512_extracti32x4_epi32(px[m], 2),
                                _mm512_extracti32x4_epi32(px[m], 3)};
          for (int l = 0; l < 4 && 4 * l + m < np; l++) {
            uint8_t *o = out + (size_t)(4 * l + m) * (size_t)icp;
            if (nbytes == 16) _mm_storeu_si128((__m128i *)(void *)o, v[l]);
            else _mm_mask_storeu_epi8(o, bm, v[l]);
          }
        }
      }
    }
  }
}
