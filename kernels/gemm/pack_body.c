/* Packing: copy a block of op(A) / op(B) into micro-panel order so the
 * micro-kernel reads both operands with unit stride, zero-padding edges so it
 * never branches on them. Transposes are absorbed here. Plain C with the
 * panel width a compile-time constant (the switch below), so copies become
 * full-width vector moves. One body, compiled once per ISA variant
 * (kernels.cmake, HWTUNE_KERNEL_BODIES), exporting HWT_VARIANT(hwt_gemm_pack_a/b). */
#include <stddef.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include "../common/vec.h"
#include "gemm_internal.h"

/* Contiguous source: row k of the block is src[k*ld + 0:nb], cut into
 * ceil(nb/W) panels. Rows go in groups of PACK_ROWS: within a group each
 * panel gets PACK_ROWS consecutive rows (one contiguous run of PACK_ROWS*W
 * floats), and the group's source rows are read sequentially. Row by row
 * instead (k outer, panels inner) writes one short run to every panel per
 * row: the panels are kb*W*4 bytes apart, a multiple of 4 KiB for kb % 32 ==
 * 0, so 16 write streams fell into one L1 set and packing B 256x512 ran at
 * ~14 GB/s. One panel down all k rows instead reads W floats per row at a
 * stride of ld, one new page per row when ld >= 1024 (3x slower on
 * [256,1024]x[1024,1024]). Packing B of [64,512]x[512,512] (AVX-512, two
 * 256x512 blocks, median of 201): row by row 131 us (16 GB/s); groups of 4,
 * 8, 16, 32 rows 95, 94, 97, 94 us; 8 plus a prefetch of the row one group
 * ahead 90 us (23 GB/s). */
#define PACK_ROWS 8
static inline void pack_rows(float *restrict dst, const float *restrict src, size_t ld, int kb,
                             int nb, const int W) {
  int full = nb / W, rem = nb - full * W;
  size_t panel = (size_t)kb * W;
  for (int k0 = 0; k0 < kb; k0 += PACK_ROWS) {
    int k1 = kb - k0 < PACK_ROWS ? kb : k0 + PACK_ROWS;
    for (int p = 0; p < full; p++) {
      const float *s = src + (size_t)p * W;
      float *o = dst + (size_t)p * panel;
      for (int k = k0; k < k1; k++) {
#if defined(__SSE2__)
        if (k + PACK_ROWS < kb)
          for (int j = 0; j < W; j += 16)
            _mm_prefetch((const char *)(s + (size_t)(k + PACK_ROWS) * ld + j), _MM_HINT_T0);
#endif
        for (int j = 0; j < W; j++) o[(size_t)k * W + j] = s[(size_t)k * ld + j];
      }
    }
    if (rem) {
      const float *s = src + (size_t)full * W;
      float *o = dst + (size_t)full * panel;
      for (int k = k0; k < k1; k++) {
        for (int j = 0; j < rem; j++) o[(size_t)k * W + j] = s[(size_t)k * ld + j];
        for (int j = rem; j < W; j++) o[(size_t)k * W + j] = 0.0f;
      }
    }
  }
}

/* Transposing source: panel element (k, j) is src[j*ld + k]. Full panels
 * go through 4x4 register transposes (SSE is baseline on x86-64): four row
 * loads and four panel stores per 16 floats, where GCC's own vectorisation
 * builds vectors from scalar inserts and ran slower than scalar code
 * (pack A 64x512, 12-row panels: 27 us vectorised, 19 us scalar). */
static inline void pack_cols(float *restrict dst, const float *restrict src, size_t ld, int kb,
                             int n, const int W) {
  int k0 = 0;
#if defined(__SSE2__)
  /* W = 4q + 2 (the 6-row AVX2 panel): q 4x4 transposes and the last two
     rows interleaved pairwise (unpack), two floats per k. */
  if (n == W && (W % 4 == 0 || W % 4 == 2)) {
    const int W4 = W / 4 * 4;
    for (; k0 + 4 <= kb; k0 += 4) {
      for (int j = 0; j < W4; j += 4) {
        const float *s = src + (size_t)j * ld + k0;
        __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + ld);
        __m128 r2 = _mm_loadu_ps(s + 2 * ld), r3 = _mm_loadu_ps(s + 3 * ld);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        float *o = dst + (size_t)k0 * W + j;
        _mm_storeu_ps(o, r0);
        _mm_storeu_ps(o + W, r1);
        _mm_storeu_ps(o + 2 * W, r2);
        _mm_storeu_ps(o + 3 * W, r3);
      }
      if (W4 < W) {
        const float *s = src + (size_t)W4 * ld + k0;
        __m128 x = _mm_loadu_ps(s), y = _mm_loadu_ps(s + ld);
        __m128 lo = _mm_unpacklo_ps(x, y), hi = _mm_unpackhi_ps(x, y); /* x0 y0 x1 y1 */
        float *o = dst + (size_t)k0 * W + W4;
        _mm_storel_pi((__m64 *)o, lo);
        _mm_storeh_pi((__m64 *)(o + W), lo);
        _mm_storel_pi((__m64 *)(o + 2 * W), hi);
        _mm_storeh_pi((__m64 *)(o + 3 * W), hi);
      }
    }
  }
#endif
  for (int k = k0; k < kb; k++) {
    for (int j = 0; j < n; j++) dst[(size_t)k * W + j] = src[(size_t)j * ld + k];
    for (int j = n; j < W; j++) dst[(size_t)k * W + j] = 0.0f;
  }
}

/* Transposing packs go one micro-panel at a time (pack_cols reads W rows
 * of the source in step); contiguous ones take the whole block (pack_rows).
 * The switch makes the registered tile widths (variants.c) compile-time
 * constants; other widths take the generic loop. */
static inline void pack_block(float *dst, const float *src, size_t ld, int kb, int nb, int W,
                              int contiguous) {
  switch (W) {
#define HWT_PACK_CASE(w)                                                     \
  case w:                                                                    \
    if (contiguous)                                                          \
      pack_rows(dst, src, ld, kb, nb, w);                                    \
    else                                                                     \
      for (int p = 0; p < nb; p += w)                                        \
        pack_cols(dst + (size_t)p * kb, src + (size_t)p * ld, ld, kb,        \
                  nb - p < w ? nb - p : w, w);                               \
    return;
    HWT_PACK_CASE(4)
    HWT_PACK_CASE(6)
    HWT_PACK_CASE(8)
    HWT_PACK_CASE(12)
    HWT_PACK_CASE(16)
    HWT_PACK_CASE(32)
#undef HWT_PACK_CASE
    default:
      if (contiguous)
        pack_rows(dst, src, ld, kb, nb, W);
      else
        for (int p = 0; p < nb; p += W)
          pack_cols(dst + (size_t)p * kb, src + (size_t)p * ld, ld, kb, nb - p < W ? nb - p : W,
                    W);
  }
}

static inline void pack_a_body(const hwt_gemm_desc *d, const float *A, int i0, int mb, int p0,
                               int kb, int mr, float *dst) {
  if (d->trans_a) /* op(A)(i, k) = A[k][i]: k rows of mb contiguous floats */
    pack_block(dst, A + (size_t)p0 * d->lda + (size_t)i0, (size_t)d->lda, kb, mb, mr, 1);
  else /* row i of op(A) is contiguous in k: transpose mr rows at a time */
    pack_block(dst, A + (size_t)i0 * d->lda + p0, (size_t)d->lda, kb, mb, mr, 0);
}

static inline void pack_b_body(const hwt_gemm_desc *d, const float *B, int p0, int kb, int j0,
                               int nb, int nr, float *dst) {
  if (!d->trans_b)
    pack_block(dst, B + (size_t)p0 * d->ldb + (size_t)j0, (size_t)d->ldb, kb, nb, nr, 1);
  else /* op(B)(k, j) = B[j][k]: column j of the panel is row j of B */
    pack_block(dst, B + (size_t)j0 * d->ldb + p0, (size_t)d->ldb, kb, nb, nr, 0);
}

void HWT_VARIANT(hwt_gemm_pack_a)(const hwt_gemm_desc *d, const float *A, int i0, int mb, int p0,
                                  int kb, int mr, float *dst) {
  pack_a_body(d, A, i0, mb, p0, kb, mr, dst);
}

void HWT_VARIANT(hwt_gemm_pack_b)(const hwt_gemm_desc *d, const float *B, int p0, int kb, int j0,
                                  int nb, int nr, float *dst) {
  pack_b_body(d, B, p0, kb, j0, nb, nr, dst);
}
