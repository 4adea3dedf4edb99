/* The per-variant rows of hwt_qdw_rows (hwtune/qdw.h): kernels/qdw/body.c
 * compiled once per ISA. Only kernels/qdw/ includes it. */
#ifndef HWTUNE_QDW_INTERNAL_H
#define HWTUNE_QDW_INTERNAL_H
#include "hwtune/qdw.h"

typedef void hwt_qdw_fn(const hwt_qdw_desc *d, const uint8_t *x, int x_row0, void *y, int oh0,
                        int oh1, float *ws);

hwt_qdw_fn hwt_qdw_run_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_qdw_fn hwt_qdw_run_avx2, hwt_qdw_run_avx512;
#endif

#endif
