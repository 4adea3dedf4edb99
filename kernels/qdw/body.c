/* The depthwise int8 conv's variant body (hwtune/qdw.h), compiled once per
 * ISA over kernels/common/vec.h (kernels.cmake). Vectors run along the
 * channels of u8 channels-last pixels, so nothing is transposed: a register
 * block of NP output pixels of one row shares each tap's weight vector;
 * each tap widens a vector of input bytes to floats, takes the zero point
 * off and adds its product (exact integers, hwtune/qdw.h). The portable
 * build (one channel a "vector") is the test oracle of the other two. */
#include <string.h>
#include "../common/vec.h"
#include "qdw_internal.h"

/* One vector of channels' bytes widened to floats; a requantised vector
 * (clamped, not yet rounded) rounded to nearest even (vcvtps2dq in the
 * default MXCSR mode, as hwt_q_rne), + zy, stored as bytes (0..255). */
#if defined(HWT_VEC_AVX512)
HV_AI hv_f32 u8_load(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
HV_AI void q_store(uint8_t *p, hv_f32 v, int zy) {
  const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(zy));
  _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8(q));
}
#elif defined(HWT_VEC_AVX2)
HV_AI hv_f32 u8_load(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
HV_AI void q_store(uint8_t *p, hv_f32 v, int zy) {
  const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(zy));
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64((__m128i *)(void *)p, _mm_packus_epi16(w, w));
}
#else
HV_AI hv_f32 u8_load(const uint8_t *p) { return (float)p[0]; }
HV_AI void q_store(uint8_t *p, hv_f32 v, int zy) {
  p[0] = (uint8_t)(int)(hv_round(v) + (float)zy);
}
#endif

/* Output pixels per register block: NP accumulators, the tap's weight and
 * an input vector fit AVX2's 16 registers at 8; AVX-512's 32 at 12. */
#define NPB HV_BY_ISA(4, 8, 12)

/* The epilogue of one vector of channels c of output pixel p. */
HV_AI void finish(const hwt_qdw_desc *d, const float *bif, hv_f32 acc, int c, uint8_t *yb,
                  float *yf, hv_f32 lo, hv_f32 hi) {
  /* both exact integers: the float sum rounds their exact sum once, as the
     int32 sum converted to float does */
  if (bif) acc = hv_add(acc, hv_load(bif + c));
  hv_f32 v = hv_mul(acc, hv_load(d->scale + c));
  if (d->bias) v = hv_add(v, hv_load(d->bias + c));
  /* ReLU: a float output keeps a NaN (max's second operand wins), as
     ONNX Runtime's Relu; a requantised one takes 0 for it (hwt_q_value) */
  if (d->relu) v = d->requant ? hv_max(v, hv_zero()) : hv_max(hv_zero(), v);
  if (d->requant) v = hv_min(hi, hv_max(lo, v));
  if (yb)
    q_store(yb + c, v, d->zy);
  else
    hv_store(yf + c, d->requant ? hv_add(hv_round(v), hv_set1((float)d->zy)) : v);
}

/* NP output pixels from column ow0 of row oh, every channel: all taps of
 * the window inside the image's columns (inner) or checked per pixel. */
HV_AI void block(const hwt_qdw_desc *d, const float *bif, const uint8_t *x, int x_row0, int oh,
                 int ow0, uint8_t *yb, float *yf, const int NP, const int inner) {
  const int C = d->C, cp = hwt_qdw_cp(C);
  const hv_f32 za = hv_set1((float)d->za);
  const hv_f32 lo = hv_set1((float)(0 - d->zy)), hi = hv_set1((float)(255 - d->zy));
  for (int c = 0; c < C; c += HV_W) {
    hv_f32 acc[16];
    for (int i = 0; i < NP; i++) acc[i] = hv_zero();
    for (int r = 0; r < d->KH; r++) {
      const int ih = oh * d->SH - d->PT + r * d->DH;
      if (ih < 0 || ih >= d->H) continue;
      const uint8_t *xr = x + (size_t)(ih - x_row0) * d->W * C + c;
      for (int s = 0; s < d->KW; s++) {
        const hv_f32 wv = hv_load(d->w + (size_t)(r * d->KW + s) * cp + c);
        const int iw0 = ow0 * d->SW - d->PL + s * d->DW;
        for (int i = 0; i < NP; i++) {
          const int iw = iw0 + i * d->SW;
          if (!inner && (iw < 0 || iw >= d->W)) continue;
          acc[i] = hv_fmadd(hv_sub(u8_load(xr + (size_t)iw * C), za), wv, acc[i]);
        }
      }
    }
    for (int i = 0; i < NP; i++)
      finish(d, bif, acc[i], c, yb ? yb + (size_t)(ow0 + i) * C : NULL,
             yf ? yf + (size_t)(ow0 + i) * cp : NULL, lo, hi);
  }
}

void HWT_VARIANT(hwt_qdw_run)(const hwt_qdw_desc *d, const uint8_t *x, int x_row0, void *y,
                              int oh0, int oh1, float *ws) {
  const int C = d->C, cp = hwt_qdw_cp(C), P = d->OH * d->OW;
  /* Columns whose whole window row lies inside the image: [in0, in1). */
  int in0 = d->PL > 0 ? (d->PL + d->SW - 1) / d->SW : 0;
  int in1 = d->W - 1 + d->PL - (d->KW - 1) * d->DW < 0
                ? 0 : (d->W - 1 + d->PL - (d->KW - 1) * d->DW) / d->SW + 1;
  if (in1 > d->OW) in1 = d->OW;
  if (in0 > in1) in0 = in1;
  /* bias_i as floats (exact: the engine takes integers below 2^24), once */
  float *bif = NULL;
  if (d->bias_i) {
    bif = ws + (d->out_u8 ? 0 : (size_t)d->OW * cp);
    for (int c = 0; c < C; c++) bif[c] = (float)d->bias_i[c];
  }
  for (int oh = oh0; oh < oh1; oh++) {
    uint8_t *yb = d->out_u8 ? (uint8_t *)y + (size_t)oh * d->OW * C : NULL;
    float *yf = d->out_u8 ? NULL : ws;
    int ow = 0;
    for (; ow < in0; ow++) block(d, bif, x, x_row0, oh, ow, yb, yf, 1, 0);
    for (; ow + NPB <= in1; ow += NPB) block(d, bif, x, x_row0, oh, ow, yb, yf, NPB, 1);
    for (; ow + 4 <= in1; ow += 4) block(d, bif, x, x_row0, oh, ow, yb, yf, 4, 1);
    for (; ow < in1; ow++) block(d, bif, x, x_row0, oh, ow, yb, yf, 1, 1);
    for (; ow < d->OW; ow++) block(d, bif, x, x_row0, oh, ow, yb, yf, 1, 0);
    if (!d->out_u8) {
      /* the row's pixels [OW][cp] into the channel planes, 16 channels at
         a time: each pixel's 16 values are one cache line of ws, and the
         16 planes are written in order (a channel at a time read a line
         per value, cp floats apart) */
      float *out = (float *)y + (size_t)oh * d->OW;
      for (int c0 = 0; c0 < C; c0 += 16) {
        const int c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int o = 0; o < d->OW; o++)
          for (int c = c0; c < c1; c++) out[(size_t)c * P + o] = ws[(size_t)o * cp + c];
      }
    }
  }
}
