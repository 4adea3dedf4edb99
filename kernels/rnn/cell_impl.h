/* Internal contract between the LSTM cell driver (lstm_cell.c) and its
 * per-ISA body (cell_body.c). Not installed. */
#ifndef HWTUNE_RNN_CELL_IMPL_H
#define HWTUNE_RNN_CELL_IMPL_H
#include <stddef.h>
#include "hwtune/isa.h"

/* n hidden units of one row, in one pass: gate k of unit u is g[k*H + u]
 * (+ xg[k*H + u] when xg, + bias[k*H + u] when bias); c_prev, h and c hold
 * the row's units from u = 0. */
typedef void (*hwt_lstm_units_fn)(const float *g, const float *xg, const float *bias,
                                  const float *c_prev, float *h, float *c, size_t n, size_t H);

typedef struct {
  hwt_lstm_units_fn units;
} hwt_lstm_variant;

extern const hwt_lstm_variant hwt_lstm_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_lstm_variant hwt_lstm_variant_avx2, hwt_lstm_variant_avx512;
#endif
/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_lstm_variant *hwt_lstm_variant_for(hwt_isa isa);

#endif
