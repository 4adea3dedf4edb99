/* Internal contracts of the direct int8 conv (hwtune/qconv.h): one
 * micro-kernel per int8 GEMM variant, with that variant's register tile,
 * k group and packed weight layout (kernels/qgemm). Only kernels/qconv/
 * includes it. */
#ifndef HWTUNE_QCONV_INTERNAL_H
#define HWTUNE_QCONV_INTERNAL_H
#include <stdint.h>
#include "hwtune/qconv.h"

/* acc[mr][nr] (int32, overwritten) = sum over taps t and k groups q of
 * rows[t * mr + i][q * kg .. q * kg + kg) (u8) times the packed weight
 * micro-panel b (the GEMM's layout, k = t * kq * kg + q * kg + u). */
typedef void hwt_qconv_ukr_fn(int taps, int kq, const uint8_t *const *rows, const void *b,
                              int32_t *acc);

/* The tile's epilogue into a float NCHW output (e->out F32, ACC or QF32,
 * e->rs_c 1, e->zb NULL) or u8 channels-last rows (e->out U8, e->cs_c 1,
 * e->zb NULL): output pixels [i0, i0 + mb), channels
 * [j0, j0 + nb) from acc (row stride nr), the same values as the GEMM's
 * epilogue bit for bit, written a channel's adjacent pixels at a time. */
typedef void hwt_qconv_epi_fn(const hwt_qgemm_epi *e, const int32_t *acc,
                              const int32_t *colsum, int i0, int mb, int j0, int nb);

/* hwt_qconv_to_hwc's work with the plan's ic and icp (hwtune/qconv.h). */
typedef void hwt_qconv_hwc_fn(int ic, int icp, const float *x, ptrdiff_t plane, int n,
                              float shift, uint8_t *dst);

typedef struct {
  int mr, nr, kg;
  hwt_qconv_ukr_fn *ukr;
  hwt_qconv_ukr_fn *ukr_half; /* tiles of at most mr / 2 pixels (same table and acc
                                 layout, rows mr / 2 .. mr - 1 untouched); NULL: ukr */
  hwt_qconv_epi_fn *epi; /* NULL: the GEMM variant's epilogue for every output */
  hwt_qconv_hwc_fn *hwc;
} hwt_qconv_variant;

hwt_qconv_ukr_fn hwt_qconv_ukr_generic_4x8;
hwt_qconv_hwc_fn hwt_qconv_hwc_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_qconv_ukr_fn hwt_qconv_ukr_avx2_6x16, hwt_qconv_ukr_avx512vnni_8x32,
    hwt_qconv_ukr_avx512vnni_4x32;
hwt_qconv_epi_fn hwt_qconv_epi_avx2, hwt_qconv_epi_avx512;
hwt_qconv_hwc_fn hwt_qconv_hwc_avx2, hwt_qconv_hwc_avx512;
#endif

#endif
