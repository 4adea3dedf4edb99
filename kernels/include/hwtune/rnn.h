/* Recurrent-cell kernels. The LSTM cell: from the gate pre-activations of B
 * rows (four blocks of H columns, in the order i, f, g, o of torch.nn.LSTM),
 * optionally plus rows of a second pre-activation matrix (a hoisted input
 * projection) and a bias,
 *     z = gates + x_gates + bias
 *     c = sigmoid(z_f) * c_prev + sigmoid(z_i) * tanh(z_g)
 *     h = sigmoid(z_o) * tanh(c)
 * in one pass over the gates. Plan, then run: hwt_lstm_cell_plan_make()
 * fixes the work items (a row, or a chunk of its hidden units when rows
 * alone leave threads idle) and the per-thread workspace (none today);
 * hwt_lstm_cell_run_part() computes thread tid's items out of nth (disjoint
 * outputs, no synchronisation). The activations are the element-wise
 * kernels' (hwtune/eltwise.h) for the plan's ISA, with their documented
 * error bounds. */
#ifndef HWTUNE_RNN_H
#define HWTUNE_RNN_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef struct {
  int batch, hidden;  /* B >= 1 rows, H >= 1 units: gates [B, 4H], c_prev/h/c [B, H] */
  int has_x_gates;    /* 1: x_gates [B, 4H] (row stride 4H) is added */
  int has_bias;       /* 1: bias [4H] is added */
  hwt_isa isa;
} hwt_lstm_cell_desc;

typedef struct {
  hwt_lstm_cell_desc d;
  int chunk;          /* hidden units per work item (a multiple of 16, or H) */
  size_t ws_floats;   /* workspace floats each thread needs (64-byte aligned) */
} hwt_lstm_cell_plan;

/* nth: the largest thread count run_part will be called with (the chunk is
 * cut finer when B rows alone would leave threads idle). Returns HWT_OK,
 * HWT_EINVAL or HWT_EISA. */
HWT_API int hwt_lstm_cell_plan_make(const hwt_lstm_cell_desc *d, int nth,
                                    hwt_lstm_cell_plan *out);
/* x_gates / bias are ignored (may be NULL) unless the descriptor has them.
 * h and c must not overlap any input. */
HWT_API void hwt_lstm_cell_run_part(const hwt_lstm_cell_plan *p, const float *gates,
                                    const float *x_gates, const float *bias,
                                    const float *c_prev, float *h, float *c, float *ws, int tid,
                                    int nth);
/* Plain-C reference (the test oracle): double precision, libm. */
HWT_API int hwt_lstm_cell_ref(const hwt_lstm_cell_desc *d, const float *gates,
                              const float *x_gates, const float *bias, const float *c_prev,
                              float *h, float *c);

#endif
