/* Internal contracts of the bf16 GEMM family (hwtune/bgemm.h). Only
 * kernels/bgemm/ includes it.
 *
 * Packed layout, every variant: one uint32 per (k pair q, row or column),
 * bf16 of k = 2q in the low half and of k = 2q + 1 in the high half (the
 * dword vdpbf16ps reads). A micro-panel: a[q][i] (mr per q); B micro-panel:
 * b[q][j] (nr per q); both zero-padded. */
#ifndef HWTUNE_BGEMM_INTERNAL_H
#define HWTUNE_BGEMM_INTERNAL_H
#include <stdint.h>
#include <string.h>
#include "hwtune/bgemm.h"

/* hwt_bf16_from_f32's body, inlined where A is packed per tile (a call per
 * element there cost about a third of the bf16 peak probe's time). */
static inline uint16_t hwt_bf16_rne(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* zero, denormal: DAZ */
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* nearest, ties to even; overflow rounds to inf */
  return (uint16_t)(u >> 16);
}

static inline float hwt_bf16_widen(uint32_t h16) {
  const uint32_t u = h16 << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* acc[mr][nr] (row-major, overwritten) = A micro-panel x B micro-panel. */
typedef void hwt_bgemm_ukr_fn(int kq, const uint32_t *a, const uint32_t *b, float *acc);

/* The bf16 CONV's B packing (bconv.c): for t < tiles and j < width,
 *   dst[t * stride + j] = bf16(lo[t * width + j]) | bf16(hi[t * width + j]) << 16
 * (lo, hi: two im2col rows, zero past their pixels up to tiles * width). */
typedef void hwt_bgemm_pair_fn(const float *lo, const float *hi, int tiles, int width,
                               size_t stride, uint32_t *dst);

typedef struct {
  int mr, nr;
  hwt_bgemm_ukr_fn *ukr;
  hwt_bgemm_pair_fn *pair;
} hwt_bgemm_variant;

const hwt_bgemm_variant *hwt_bgemm_variant_get(hwt_isa isa);

/* The pair step of the contract: acc + hi product, then + lo product, one
 * fp32 rounding each (the products are exact). DAZ/FTZ aside, this is one
 * vdpbf16ps lane. */
static inline float hwt_bf16_pair_step(float acc, uint32_t a, uint32_t b) {
  const float a1 = hwt_bf16_widen(a >> 16), b1 = hwt_bf16_widen(b >> 16);
  const float a0 = hwt_bf16_widen(a & 0xffffu), b0 = hwt_bf16_widen(b & 0xffffu);
  /* A bf16 product has at most 16 significant bits: exact in fp32, so a
   * contracted fma rounds the same as the separate add. */
  acc = acc + a1 * b1;
  return acc + a0 * b0;
}

hwt_bgemm_ukr_fn hwt_bgemm_ukr_generic_4x16;
hwt_bgemm_pair_fn hwt_bgemm_pair_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_bgemm_ukr_fn hwt_bgemm_ukr_avx512bf16_8x32;
/* width a multiple of 16 (nr 32, the panel it packs for). */
hwt_bgemm_pair_fn hwt_bgemm_pair_avx512bf16;
/* vcvtne2ps2bf16 of x[0:16] into out[0:16] (needs avx512_bf16). */
void hwt_bgemm_cvt16_avx512bf16(const float *x, uint16_t *out);
#endif

#endif
