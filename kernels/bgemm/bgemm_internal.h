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
#include "hwtune/bgemm.h"

/* acc[mr][nr] (row-major, overwritten) = A micro-panel x B micro-panel. */
typedef void hwt_bgemm_ukr_fn(int kq, const uint32_t *a, const uint32_t *b, float *acc);

typedef struct {
  int mr, nr;
  hwt_bgemm_ukr_fn *ukr;
} hwt_bgemm_variant;

const hwt_bgemm_variant *hwt_bgemm_variant_get(hwt_isa isa);

/* The pair step of the contract: acc + hi product, then + lo product, one
 * fp32 rounding each (the products are exact). DAZ/FTZ aside, this is one
 * vdpbf16ps lane. */
static inline float hwt_bf16_pair_step(float acc, uint32_t a, uint32_t b) {
  const float a1 = hwt_bf16_to_f32((uint16_t)(a >> 16)), b1 = hwt_bf16_to_f32((uint16_t)(b >> 16));
  const float a0 = hwt_bf16_to_f32((uint16_t)a), b0 = hwt_bf16_to_f32((uint16_t)b);
  /* A bf16 product has at most 16 significant bits: exact in fp32, so a
   * contracted fma rounds the same as the separate add. */
  acc = acc + a1 * b1;
  return acc + a0 * b0;
}

hwt_bgemm_ukr_fn hwt_bgemm_ukr_generic_4x16;
#if defined(HWTUNE_HAVE_X86)
hwt_bgemm_ukr_fn hwt_bgemm_ukr_avx512bf16_8x32;
/* vcvtne2ps2bf16 of x[0:16] into out[0:16] (needs avx512_bf16). */
void hwt_bgemm_cvt16_avx512bf16(const float *x, uint16_t *out);
#endif

#endif
