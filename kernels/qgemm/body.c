/* int8 GEMM packing and epilogue, one body compiled per ISA variant
 * (kernels.cmake, HWTUNE_KERNEL_BODIES), exporting HWT_VARIANT(hwt_qgemm_*).
 * Plain C with the layout (k group kg, element size) fixed per variant, so
 * the compiler vectorises the conversions and the epilogue's float math with
 * that ISA's width. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "../common/vec.h"
#include "epi.h"
#include "qgemm_internal.h"

/* One A value as u8 (0..255): s8 inputs move by +128; float inputs hold
 * integers, clamped so that a stray value cannot wrap. */
static inline int32_t a_u8(const void *A, hwt_qa_type t, size_t idx) {
  switch (t) {
    case HWT_QA_U8: return ((const uint8_t *)A)[idx];
    case HWT_QA_S8: return ((const int8_t *)A)[idx] + 128;
    case HWT_QA_F32U8: {
      float f = ((const float *)A)[idx];
      f = f < 0.0f ? 0.0f : f > 255.0f ? 255.0f : f;
      return (int32_t)f;
    }
    default: {
      float f = ((const float *)A)[idx] + 128.0f;
      f = f < 0.0f ? 0.0f : f > 255.0f ? 255.0f : f;
      return (int32_t)f;
    }
  }
}

/* The layout this ISA's row of variants.c packs (its k group and element
 * size), as compile-time constants so that the packing loops below index
 * with shifts and move whole groups; any other layout takes the general
 * loop. */
#if defined(HWT_VEC_AVX512)
#define KG 4
#define ESIZE 1
#define MR 8
#elif defined(HWT_VEC_AVX2)
#define KG 2
#define ESIZE 2
#define MR 6
#else
#define KG 2
#define ESIZE 2
#define MR 4
#endif
/* Values of one A row converted per pass of pack_a_fixed's buffered loop:
   a multiple of every KG, and 64 u8 or int16 values stay in registers. */
#define PACK_CHUNK 64

/* One A micro-panel for a fixed type and this ISA's layout. The k loop of
 * a row writes one k group (KG values) per step; per element indexing with
 * the plan's run-time kg (a division per value) took 40% of a small
 * ResNet-50's int8 time in perf (hwt_qgemm_pack_a 3.9% of samples against
 * 2.3% in the VNNI micro-kernel). */
static inline __attribute__((always_inline)) void pack_a_fixed(
    const hwt_qgemm_plan *p, const void *A, int i0, int mb, void *dst, int32_t *rowsum,
    const hwt_qa_type t) {
  const int mr = p->mr, K = p->d.K, Kq = p->Kp / KG;
  for (int i = 0; i < mr; i++) {
    int32_t sum = 0;
    const size_t row = (size_t)(i0 + i) * (size_t)p->d.lda;
    int q = 0;
    if (t == HWT_QA_U8 && i < mb) {
      /* u8 rows (qconv2d's im2col): whole k groups moved at once (4-byte
         words at the VNNI layout, widened int16 pairs at the others) and
         the row sum as its own loop, which vectorises; the per-value loop
         below was 23% of qconv2d's samples on the int8 ResNet-50 (VNNI,
         perf, under load), most of them on its byte stores and sums */
      const uint8_t *src = (const uint8_t *)A + row;
      for (int k = 0; k < K; k++) sum += src[k];
#if ESIZE == 1
      for (; q < K / KG; q++)
        memcpy((uint8_t *)dst + ((size_t)q * mr + i) * KG, src + (size_t)q * KG, KG);
      for (; q < Kq; q++) {
        uint8_t *d = (uint8_t *)dst + ((size_t)q * mr + i) * KG;
        for (int u = 0; u < KG; u++) d[u] = q * KG + u < K ? src[q * KG + u] : 0;
      }
#else
      for (; q < K / KG; q++) {
        int16_t *d = (int16_t *)dst + ((size_t)q * mr + i) * KG;
        for (int u = 0; u < KG; u++) d[u] = src[q * KG + u];
      }
      for (; q < Kq; q++) {
        int16_t *d = (int16_t *)dst + ((size_t)q * mr + i) * KG;
        for (int u = 0; u < KG; u++) d[u] = (int16_t)(q * KG + u < K ? src[q * KG + u] : 0);
      }
#endif
      rowsum[i] = sum;
      continue;
    }
    if (i < mb) {
      /* s8 and float-held rows (DynamicQuantizeLinear's output before
         every qmatmul of a quantize_dynamic BERT): the whole k groups
         PACK_CHUNK values at a time, converted into a buffer by loops the
         compiler vectorises (clamp, truncate, narrow; sum), then moved a
         group at a time; the rest (a last partial group, the padding)
         below. Value by value, hwt_qgemm_pack_a took 3.5% of the int8
         BERT-base's samples against 16.5% in the VNNI micro-kernel (perf,
         1 thread, under load) */
#if ESIZE == 1
      uint8_t buf[PACK_CHUNK];
#else
      int16_t buf[PACK_CHUNK];
#endif
      const int whole = K / KG * KG;
      for (int k0 = 0; k0 < whole; k0 += PACK_CHUNK) {
        const int n = whole - k0 < PACK_CHUNK ? whole - k0 : PACK_CHUNK;
        /* two loops: GCC 12 vectorises neither half when the int32 sum
           and the narrowing store share one loop */
        for (int u = 0; u < n; u++)
          buf[u] = (__typeof__(buf[0]))a_u8(A, t, row + (size_t)(k0 + u));
        for (int u = 0; u < n; u++) sum += buf[u];
        for (int g = 0; g < n / KG; g++)
          memcpy((char *)dst + ((size_t)(k0 / KG + g) * mr + i) * KG * ESIZE, buf + g * KG,
                 KG * ESIZE);
      }
      q = whole / KG;
    }
    for (; q < Kq; q++) {
#if ESIZE == 1
      uint8_t *d = (uint8_t *)dst + ((size_t)q * mr + i) * KG;
#else
      int16_t *d = (int16_t *)dst + ((size_t)q * mr + i) * KG;
#endif
      for (int u = 0; u < KG; u++) {
        const int k = q * KG + u;
        const int32_t v = (i < mb && k < K) ? a_u8(A, t, row + (size_t)k) : 0;
        d[u] = (__typeof__(d[0]))v;
        sum += v;
      }
    }
    rowsum[i] = sum;
  }
}

/* The same from A whose k runs with stride ks (hwt_qgemm_desc.a_ks > 1):
 * k by k, each k's mr rows read from adjacent addresses (an NCHW 1x1
 * conv: mr pixels of one channel) and spread with the k group's stride. */
static inline __attribute__((always_inline)) void pack_a_kstrided(
    const hwt_qgemm_plan *p, const void *A, int i0, int mb, void *dst, int32_t *rowsum,
    const hwt_qa_type t) {
  const int mr = p->mr, K = p->d.K, Kp = p->Kp;
  const size_t ks = (size_t)p->d.a_ks, lda = (size_t)p->d.lda;
  int32_t sum[8] = {0}; /* mr <= 8 */
  int k = 0;
  if (mb == MR && mr == MR && lda == 1 && (t == HWT_QA_F32U8 || t == HWT_QA_F32S8)) {
    /* Full tiles of adjacent float rows (the 1x1 conv's case): a k group's
       KG x MR values converted as vectors along the rows, then interleaved
       into the panel; the per-value loop below took 4.1% of samples against
       the micro-kernel's 5.9% on the int8 ResNet-50 (perf, under load). */
    const float add = t == HWT_QA_F32S8 ? 128.0f : 0.0f;
    const float *src = (const float *)A + (size_t)i0;
    for (; k + KG <= K; k += KG) {
      int32_t v[KG][MR];
      for (int u = 0; u < KG; u++) {
        const float *s = src + (size_t)(k + u) * ks;
        for (int i = 0; i < MR; i++) {
          float f = s[i] + add;
          f = f < 0.0f ? 0.0f : f;
          f = f > 255.0f ? 255.0f : f;
          v[u][i] = (int32_t)f;
        }
      }
#if ESIZE == 1
      uint8_t *d = (uint8_t *)dst + (size_t)(k / KG) * MR * KG;
#else
      int16_t *d = (int16_t *)dst + (size_t)(k / KG) * MR * KG;
#endif
      for (int i = 0; i < MR; i++)
        for (int u = 0; u < KG; u++) {
          d[i * KG + u] = (__typeof__(d[0]))v[u][i];
          sum[i] += v[u][i];
        }
    }
  }
  for (; k < Kp; k++) {
#if ESIZE == 1
    uint8_t *d = (uint8_t *)dst + (size_t)(k / KG) * mr * KG + (size_t)(k % KG);
#else
    int16_t *d = (int16_t *)dst + (size_t)(k / KG) * mr * KG + (size_t)(k % KG);
#endif
    const size_t at = (size_t)k * ks + (size_t)i0 * lda;
    for (int i = 0; i < mr; i++) {
      const int32_t v = (i < mb && k < K) ? a_u8(A, t, at + (size_t)i * lda) : 0;
      d[i * KG] = (__typeof__(d[0]))v;
      sum[i] += v;
    }
  }
  for (int i = 0; i < mr; i++) rowsum[i] = sum[i];
}

static void pack_a_general(const hwt_qgemm_plan *p, const void *A, int i0, int mb, void *dst,
                           int32_t *rowsum) {
  const int mr = p->mr, kg = p->kg, K = p->d.K, Kp = p->Kp;
  for (int i = 0; i < mr; i++) {
    int32_t sum = 0;
    for (int k = 0; k < Kp; k++) {
      const size_t ks = p->d.a_ks > 1 ? (size_t)p->d.a_ks : 1;
      const int32_t v = (i < mb && k < K) ? a_u8(A, p->d.a_type,
                                                 (size_t)(i0 + i) * (size_t)p->d.lda +
                                                     (size_t)k * ks)
                                          : 0;
      const size_t at = ((size_t)(k / kg) * mr + i) * kg + (size_t)(k % kg);
      if (p->esize == 1) ((uint8_t *)dst)[at] = (uint8_t)v;
      else ((int16_t *)dst)[at] = (int16_t)v;
      sum += v;
    }
    rowsum[i] = sum;
  }
}

void HWT_VARIANT(hwt_qgemm_pack_a)(const hwt_qgemm_plan *p, const void *A, int i0, int mb,
                                   void *dst, int32_t *rowsum) {
  if (p->kg != KG || p->esize != ESIZE || p->mr > 8) {
    pack_a_general(p, A, i0, mb, dst, rowsum);
    return;
  }
  if (p->d.a_ks > 1) {
    switch (p->d.a_type) {
      case HWT_QA_U8: pack_a_kstrided(p, A, i0, mb, dst, rowsum, HWT_QA_U8); break;
      case HWT_QA_S8: pack_a_kstrided(p, A, i0, mb, dst, rowsum, HWT_QA_S8); break;
      case HWT_QA_F32U8: pack_a_kstrided(p, A, i0, mb, dst, rowsum, HWT_QA_F32U8); break;
      default: pack_a_kstrided(p, A, i0, mb, dst, rowsum, HWT_QA_F32S8);
    }
    return;
  }
  switch (p->d.a_type) {
    case HWT_QA_U8: pack_a_fixed(p, A, i0, mb, dst, rowsum, HWT_QA_U8); break;
    case HWT_QA_S8: pack_a_fixed(p, A, i0, mb, dst, rowsum, HWT_QA_S8); break;
    case HWT_QA_F32U8: pack_a_fixed(p, A, i0, mb, dst, rowsum, HWT_QA_F32U8); break;
    default: pack_a_fixed(p, A, i0, mb, dst, rowsum, HWT_QA_F32S8); break;
  }
}

void HWT_VARIANT(hwt_qgemm_pack_b)(const hwt_qgemm_plan *p, const int8_t *B, ptrdiff_t rs,
                                   ptrdiff_t cs, int j0, int nb, void *dst) {
  const int nr = p->nr, kg = p->kg, K = p->d.K, Kp = p->Kp;
  for (int k = 0; k < Kp; k++)
    for (int j = 0; j < nr; j++) {
      const int v = (j < nb && k < K) ? B[(ptrdiff_t)k * rs + (ptrdiff_t)(j0 + j) * cs] : 0;
      const size_t at = ((size_t)(k / kg) * nr + j) * kg + (size_t)(k % kg);
      if (p->esize == 1) ((int8_t *)dst)[at] = (int8_t)v;
      else ((int16_t *)dst)[at] = (int16_t)v;
    }
}

/* One tile's values into C: row by row where C's columns are contiguous
 * (cs 1), else column by column (NCHW outputs: rs 1, cs H*W, where a row's
 * nb values land in nb different channel planes and a column's mb values
 * are adjacent). Stored row by row, the 8 x 32 VNNI tile of a ResNet-50
 * 1x1 conv (K 64) was 256 scalar stores H*W*4 bytes apart per 256
 * vpdpbusd: hwt_qgemm_epi took 2.9% of samples against the micro-kernel's
 * 4.8% (perf, under load). */
#define STORE_TILE(T, conv)                                                       \
  do {                                                                           \
    T *c = (T *)e->C + (ptrdiff_t)i0 * rs + (ptrdiff_t)j0 * cs;                  \
    if (rs == 1 && cs != 1) {                                                    \
      for (int j = 0; j < nb; j++)                                               \
        for (int i = 0; i < mb; i++) c[(ptrdiff_t)j * cs + i] = conv(v[i * nr + j]); \
    } else if (cs == 1) { /* channels-last rows: contiguous, vectorised */       \
      for (int i = 0; i < mb; i++)                                               \
        for (int j = 0; j < nb; j++) c[(ptrdiff_t)i * rs + j] = conv(v[i * nr + j]); \
    } else {                                                                     \
      for (int i = 0; i < mb; i++)                                               \
        for (int j = 0; j < nb; j++)                                             \
          c[(ptrdiff_t)i * rs + (ptrdiff_t)j * cs] = conv(v[i * nr + j]);        \
    }                                                                            \
  } while (0)
#define AS_U8(x) ((uint8_t)(int32_t)(x))
#define AS_S8(x) ((int8_t)(int32_t)(x))
#define AS_F32(x) (x)

void HWT_VARIANT(hwt_qgemm_epi)(const hwt_qgemm_plan *p, const hwt_qgemm_epi *e, int32_t za,
                                const int32_t *acc, const int32_t *rowsum,
                                const int32_t *colsum, int i0, int mb, int j0, int nb) {
  int32_t qmin, qmax;
  hwt_q_range(e, &qmin, &qmax);
  const int requant = e->out >= HWT_QOUT_QF32, nr = p->nr, K = p->d.K;
  const float lo = (float)(qmin - e->zy), hi = (float)(qmax - e->zy), zy = (float)e->zy;
  float v[8 * 64]; /* the tile: mr <= 8, nr <= 64 */
  for (int i = 0; i < mb; i++) {
    const int32_t *a = acc + (size_t)i * nr;
    float *vi = v + (size_t)i * nr;
    const int32_t krow = K * za - rowsum[i];
    for (int j = 0; j < nb; j++) {
      int32_t c = a[j] - za * colsum[j0 + j];
      if (e->zb) c += e->zb[j0 + j] * krow;
      if (e->bias_i) c += e->bias_i[j0 + j];
      vi[j] = (float)c;
    }
    if (e->out != HWT_QOUT_ACC)
      for (int j = 0; j < nb; j++)
        vi[j] = hwt_q_value(vi[j], e->scale[j0 + j], e->bias ? e->bias[j0 + j] : 0.0f,
                            e->relu, requant, lo, hi, zy);
  }
  const ptrdiff_t rs = e->rs_c, cs = e->cs_c;
  switch (e->out) {
    case HWT_QOUT_U8: STORE_TILE(uint8_t, AS_U8); break;
    case HWT_QOUT_S8: STORE_TILE(int8_t, AS_S8); break;
    default: STORE_TILE(float, AS_F32);
  }
}
