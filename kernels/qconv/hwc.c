/* The portable conversion of float NCHW activations into the u8
 * channels-last pixels the direct int8 conv reads (hwt_qconv_to_hwc; the
 * AVX2 and AVX-512 variants: hwc_avx2.c, hwc_avx512.c). Moved from
 * engine/ops/quant.c, where it was the only form. */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "qconv_internal.h"

void hwt_qconv_hwc_generic(int ic, int icp, const float *x, ptrdiff_t plane, int n, float shift,
                           uint8_t *dst) {
  const float add = shift;
  /* QCONV_HWC_BLOCK pixels at a time, channel by channel: the block's
     destination lines (at most 64 x icp bytes) stay in L1 while every
     channel writes its byte into each; whole rows at once swept up to
     ~35 KiB of lines per channel at ResNet-50's 56x56x64 layers */
  enum { QCONV_HWC_BLOCK = 64 };
  for (int e0 = 0; e0 < n; e0 += QCONV_HWC_BLOCK) {
    const int eb = n - e0 < QCONV_HWC_BLOCK ? n - e0 : QCONV_HWC_BLOCK;
    uint8_t *db = dst + (size_t)e0 * (size_t)icp;
    int c = 0;
#if defined(__SSE2__)
    /* 4 channels x 4 pixels per step: clamp, convert (exact: integers),
       transpose the 4x4 int32 and pack to bytes, one dword store per
       pixel. The scalar loop below (a byte store per value, not
       vectorised) was 32% of the int8 ResNet-50's samples in libhwtune,
       as much as the VNNI micro-kernel (perf, 1 thread, under load). */
    const __m128 vadd = _mm_set1_ps(add), vlo = _mm_setzero_ps(), vhi = _mm_set1_ps(255.0f);
    for (; c + 4 <= ic; c += 4) {
      const float *x0 = x + (ptrdiff_t)c * plane + e0;
      int e = 0;
      for (; e + 4 <= eb; e += 4) {
        __m128i v[4];
        for (int k = 0; k < 4; k++) {
          __m128 f = _mm_add_ps(_mm_loadu_ps(x0 + k * plane + e), vadd);
          f = _mm_min_ps(_mm_max_ps(f, vlo), vhi);
          v[k] = _mm_cvttps_epi32(f);
        }
        const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpackhi_epi32(v[0], v[1]);
        const __m128i t2 = _mm_unpacklo_epi32(v[2], v[3]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
        const __m128i p01 = _mm_packs_epi32(_mm_unpacklo_epi64(t0, t2), _mm_unpackhi_epi64(t0, t2));
        const __m128i p23 = _mm_packs_epi32(_mm_unpacklo_epi64(t1, t3), _mm_unpackhi_epi64(t1, t3));
        const __m128i q = _mm_packus_epi16(p01, p23); /* pixel k's 4 channels: dword k */
        uint8_t *d = db + (size_t)e * (size_t)icp + c;
        const int32_t w0 = _mm_cvtsi128_si32(q), w1 = _mm_cvtsi128_si32(_mm_srli_si128(q, 4));
        const int32_t w2 = _mm_cvtsi128_si32(_mm_srli_si128(q, 8));
        const int32_t w3 = _mm_cvtsi128_si32(_mm_srli_si128(q, 12));
        memcpy(d, &w0, 4);
        memcpy(d + icp, &w1, 4);
        memcpy(d + 2 * icp, &w2, 4);
        memcpy(d + 3 * icp, &w3, 4);
      }
      for (; e < eb; e++)
        for (int k = 0; k < 4; k++) {
          float v = x0[k * plane + e] + add;
          v = v < 0.0f ? 0.0f : v;
          v = v > 255.0f ? 255.0f : v;
          db[(size_t)e * (size_t)icp + (size_t)(c + k)] = (uint8_t)(int)v;
        }
    }
#endif
    for (; c < ic; c++) {
      const float *xc = x + (ptrdiff_t)c * plane + e0;
      for (int e = 0; e < eb; e++) {
        float v = xc[e] + add;
        v = v < 0.0f ? 0.0f : v;
        v = v > 255.0f ? 255.0f : v;
        db[(size_t)e * (size_t)icp + (size_t)c] = (uint8_t)(int)v;
      }
    }
    for (int e = 0; e < eb; e++)
      for (int cz = ic; cz < icp; cz++) db[(size_t)e * (size_t)icp + (size_t)cz] = 0;
  }
}
