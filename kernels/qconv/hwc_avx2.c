/* AVX2 conversion of float NCHW activations into the direct int8 conv's
 * u8 channels-last pixels (hwt_qconv_to_hwc): 8 pixels x 8 channels per
 * step, the steps of kernels/qconv/hwc_avx512.c at half the width: clamp
 * and truncate as floats, two packs into a 4 x 4 byte block per 128-bit
 * lane, vpshufb into pixel dwords, one dword unpack into each pixel's 8
 * channels, one 8-byte store per pixel. Channels past the last multiple
 * of 8 (and the zero channels up to icp) go through a small buffer. */
#include <immintrin.h>
#include <string.h>
#include "qconv_internal.h"

/* Pixels per pass over the channels, as the portable form's (hwc.c) */
enum { QCONV_HWC_BLOCK = 64 };

void hwt_qconv_hwc_avx2(int ic, int icp, const float *x, ptrdiff_t plane, int n, float shift,
                        uint8_t *dst) {
  const __m256 add = _mm256_set1_ps(shift), lo = _mm256_setzero_ps(),
               hi = _mm256_set1_ps(255.0f);
  const __m256i tr = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  for (int e0 = 0; e0 < n; e0 += QCONV_HWC_BLOCK) {
    const int eb = n - e0 < QCONV_HWC_BLOCK ? n - e0 : QCONV_HWC_BLOCK;
    for (int c0 = 0; c0 < icp; c0 += 8) {
      const int nc = ic - c0 < 8 ? ic - c0 : 8, nbytes = icp - c0 < 8 ? icp - c0 : 8;
      for (int e = e0; e < e0 + eb; e += 8) {
        const int np = e0 + eb - e < 8 ? e0 + eb - e : 8;
        const __m256i pm = _mm256_cmpgt_epi32(_mm256_set1_epi32(np),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256i q[8];
        for (int k = 0; k < 8; k++) {
          if (k >= nc) {
            q[k] = _mm256_setzero_si256();
            continue;
          }
          const float *src = x + (ptrdiff_t)(c0 + k) * plane + e;
          __m256 f = np == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, pm);
          f = _mm256_add_ps(f, add);
          f = _mm256_min_ps(hi, _mm256_max_ps(lo, f)); /* the portable clamps' order */
          q[k] = _mm256_cvttps_epi32(f);
        }
        __m256i g[2];
        for (int k = 0; k < 2; k++) {
          const __m256i w01 = _mm256_packs_epi32(q[4 * k], q[4 * k + 1]);
          const __m256i w23 = _mm256_packs_epi32(q[4 * k + 2], q[4 * k + 3]);
          g[k] = _mm256_shuffle_epi8(_mm256_packus_epi16(w01, w23), tr);
        }
        /* lane l: pixels 4l, 4l + 1 (ab[0]) and 4l + 2, 4l + 3 (ab[1]), 8 bytes each */
        const __m256i ab[2] = {_mm256_unpacklo_epi32(g[0], g[1]),
                               _mm256_unpackhi_epi32(g[0], g[1])};
        uint64_t px[8];
        for (int h = 0; h < 2; h++) {
          const __m128i l0 = _mm256_castsi256_si128(ab[h]);
          const __m128i l1 = _mm256_extracti128_si256(ab[h], 1);
          px[2 * h] = (uint64_t)_mm_cvtsi128_si64(l0);
          px[2 * h + 1] = (uint64_t)_mm_extract_epi64(l0, 1);
          px[4 + 2 * h] = (uint64_t)_mm_cvtsi128_si64(l1);
          px[4 + 2 * h + 1] = (uint64_t)_mm_extract_epi64(l1, 1);
        }
        uint8_t *out = dst + (size_t)e * (size_t)icp + (size_t)c0;
        for (int p = 0; p < np; p++) {
          if (nbytes == 8) memcpy(out + (size_t)p * (size_t)icp, &px[p], 8);
          else memcpy(out + (size_t)p * (size_t)icp, &px[p], (size_t)nbytes);
        }
      }
    }
  }
}
