/* The per-variant rows of hwt_qadd (hwtune/qadd.h): kernels/qadd/body.c
 * compiled once per ISA. Only kernels/qadd/ includes it. */
#ifndef HWTUNE_QADD_INTERNAL_H
#define HWTUNE_QADD_INTERNAL_H
#include "hwtune/qadd.h"

typedef void hwt_qadd_fn(const hwt_qadd_params *p, const float *a, const float *b, float *y,
                         int64_t n);

typedef void hwt_qadd_u8_fn(const hwt_qadd_params *p, const uint8_t *a, const uint8_t *b,
                            uint8_t *y, int64_t n);

hwt_qadd_fn hwt_qadd_run_generic;
hwt_qadd_u8_fn hwt_qadd_u8_run_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_qadd_fn hwt_qadd_run_avx2, hwt_qadd_run_avx512;
hwt_qadd_u8_fn hwt_qadd_u8_run_avx2, hwt_qadd_u8_run_avx512;
#endif

#endif
