/* hwt_qadd's loop (hwtune/qadd.h), written once over kernels/common/vec.h
 * and compiled per ISA variant (kernels.cmake). In engine/ops/quant.c,
 * compiled for baseline x86-64, the loop ran 4 lanes wide with SSE2
 * divisions: qadd_run was 1.8% of the int8 ResNet-50's samples against
 * 16.1% in the VNNI micro-kernel (perf, 1 thread, under load). */
#include <math.h>
#include "../common/vec.h"
#include "qadd_internal.h"

HV_AI hv_f32 qadd_one(hv_f32 a, hv_f32 b, hv_f32 za, hv_f32 sa, hv_f32 zb, hv_f32 sb,
                      hv_f32 sy, hv_f32 lo, hv_f32 hi, hv_f32 zy) {
  /* separate multiplies and adds (hv_fmadd would fuse them on AVX2/512) */
  const hv_f32 v0 = hv_add(hv_mul(hv_sub(a, za), sa), hv_mul(hv_sub(b, zb), sb));
  hv_f32 v = hv_div(v0, sy);
  v = hv_max(v, lo); /* v > lo ? v : lo */
  v = hv_min(v, hi); /* v < hi ? v : hi */
  const hv_f32 rne = hv_set1(12582912.0f);
  return hv_add(hv_sub(hv_add(v, rne), rne), zy);
}

void HWT_VARIANT(hwt_qadd_run)(const hwt_qadd_params *p, const float *a, const float *b,
                               float *y, int64_t n) {
  const hv_f32 za = hv_set1(p->za), sa = hv_set1(p->sa), zb = hv_set1(p->zb);
  const hv_f32 sb = hv_set1(p->sb), sy = hv_set1(p->sy), lo = hv_set1(p->lo);
  const hv_f32 hi = hv_set1(p->hi), zy = hv_set1(p->zy);
  int64_t i = 0;
  for (; i + HV_W <= n; i += HV_W)
    hv_store(y + i, qadd_one(hv_load(a + i), hv_load(b + i), za, sa, zb, sb, sy, lo, hi, zy));
  if (i < n) {
    const hv_mask m = hv_first((long)(n - i));
    hv_store_mask(y + i, m, qadd_one(hv_load_mask(a + i, m), hv_load_mask(b + i, m), za, sa,
                                     zb, sb, sy, lo, hi, zy));
  }
}

/* One vector of bytes widened to floats and back (values 0..255: exact). */
#if defined(HWT_VEC_AVX512)
HV_AI hv_f32 u8_load(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
HV_AI void u8_store(uint8_t *p, hv_f32 v) {
  _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
}
#elif defined(HWT_VEC_AVX2)
HV_AI hv_f32 u8_load(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
HV_AI void u8_store(uint8_t *p, hv_f32 v) {
  const __m256i q = _mm256_cvttps_epi32(v);
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64((__m128i *)(void *)p, _mm_packus_epi16(w, w));
}
#endif

/* One vector of bytes from v0 / sy (the quotient): rounded by vcvtps2dq
   (to nearest even: the default MXCSR mode, which hwt_q_rne assumes too),
   + zy and clamped to 0..255 as integers. For |quotient| < 2^30 this is
   the float path exactly: lo = -zy and hi = 255 - zy are integers, so
   rounding then clamping equals clamping then rounding, and rne(v) + zy
   is an exact small integer either way; qadd_u8's caller checks the
   bound. Four integer steps instead of the float clamp, two adds, a
   subtract and a truncation: in a standalone loop over 802816 bytes (the
   int8 ResNet-50's layer1 adds) 0.209 -> 0.160 ns per element, the same
   bytes (AVX-512, min of 200, under load). */
#if defined(HWT_VEC_AVX512)
HV_AI void u8_store_q(uint8_t *p, hv_f32 q, __m512i zy) {
  const __m512i t = _mm512_max_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(q), zy),
                                     _mm512_setzero_si512());
  _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtusepi32_epi8(t)); /* t >= 0: min(t, 255) */
}
#elif defined(HWT_VEC_AVX2)
HV_AI void u8_store_q(uint8_t *p, hv_f32 q, __m256i zy) {
  /* min(t, 255), then packs saturate negatives to 0 */
  const __m256i t = _mm256_min_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(q), zy),
                                     _mm256_set1_epi32(255));
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
  _mm_storel_epi64((__m128i *)(void *)p, _mm_packus_epi16(w, w));
}
#endif

/* Bytes: whole vectors widened in registers (the vector variants), the
   rest QADD_U8_CHUNK values at a time widened into float buffers, the loop
   above, narrowed back. Through the buffers alone, the int8 ResNet-50's
   byte adds took 3.6% of samples against 40.3% in the VNNI micro-kernel
   (perf, 1 thread, under load). */
enum { QADD_U8_CHUNK = 256 };

void HWT_VARIANT(hwt_qadd_u8_run)(const hwt_qadd_params *p, const uint8_t *a, const uint8_t *b,
                                  uint8_t *y, int64_t n) {
#if defined(HWT_VEC_AVX512) || defined(HWT_VEC_AVX2)
  const hv_f32 za = hv_set1(p->za), sa = hv_set1(p->sa), zb = hv_set1(p->zb);
  const hv_f32 sb = hv_set1(p->sb), sy = hv_set1(p->sy), lo = hv_set1(p->lo);
  const hv_f32 hi = hv_set1(p->hi), zy = hv_set1(p->zy);
  int64_t v0 = 0;
  /* the integer rounding (u8_store_q) when every quotient stays below
     2^30: |v0| <= max|q - za| * sa + max|q - zb| * sb over bytes q (finite,
     so no NaN either) */
  const int zyi = (int)p->zy;
  const double ma = fmax(fabs((double)p->za), fabs(255.0 - (double)p->za));
  const double mb = fmax(fabs((double)p->zb), fabs(255.0 - (double)p->zb));
  if ((ma * (double)p->sa + mb * (double)p->sb) / (double)p->sy < 1073741824.0 &&
      (float)zyi == p->zy && p->lo == -p->zy && p->hi == 255.0f - p->zy) {
#if defined(HWT_VEC_AVX512)
    const __m512i zq = _mm512_set1_epi32(zyi);
#else
    const __m256i zq = _mm256_set1_epi32(zyi);
#endif
    for (; v0 + HV_W <= n; v0 += HV_W) {
      const hv_f32 va = u8_load(a + v0), vb = u8_load(b + v0);
      const hv_f32 q = hv_div(hv_add(hv_mul(hv_sub(va, za), sa), hv_mul(hv_sub(vb, zb), sb)), sy);
      u8_store_q(y + v0, q, zq);
    }
  }
  for (; v0 + HV_W <= n; v0 += HV_W)
    u8_store(y + v0, qadd_one(u8_load(a + v0), u8_load(b + v0), za, sa, zb, sb, sy, lo, hi, zy));
  a += v0, b += v0, y += v0, n -= v0;
#endif
  float fa[QADD_U8_CHUNK], fb[QADD_U8_CHUNK], fy[QADD_U8_CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += QADD_U8_CHUNK) {
    const int m = n - i0 < QADD_U8_CHUNK ? (int)(n - i0) : QADD_U8_CHUNK;
    for (int k = 0; k < m; k++) fa[k] = (float)a[i0 + k];
    for (int k = 0; k < m; k++) fb[k] = (float)b[i0 + k];
    HWT_VARIANT(hwt_qadd_run)(p, fa, fb, fy, m);
    for (int k = 0; k < m; k++) y[i0 + k] = (uint8_t)(int32_t)fy[k];
  }
}
