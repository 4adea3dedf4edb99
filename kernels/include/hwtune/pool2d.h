/* Windowed max/avg pooling (model op pool2d) on planes of h x w pixels, each
 * pixel b adjacent floats: b = 1 is NCHW (a plane per channel), b = x is
 * NCHW[x]c (a plane per channel block). Channels never mix, so both layouts
 * are one kernel whose vectors run along the output row (b = 1) or over the
 * channel block (b > 1).
 *
 * Semantics are model.json's (src/hwtune/graph/ops/pool.py): windows of
 * kh x kw at strides sh, sw over the input padded with ph, pw before and eh,
 * ew after; padding never wins a max; an average divides by the window's
 * positions inside the input, or (include_pad) inside the padded input. A
 * NaN in a window makes its max NaN, as np.maximum does. */
#ifndef HWTUNE_POOL2D_H
#define HWTUNE_POOL2D_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef struct {
  int is_max, include_pad;
  int64_t planes, h, w, b;        /* input: planes x h x w x b floats */
  int64_t kh, kw, sh, sw;
  int64_t ph, pw, eh, ew;         /* padding before (top, left), after (bottom, right) */
  int64_t oh, ow;                 /* output: planes x oh x ow x b floats */
  hwt_isa isa;
} hwt_pool2d_desc;

/* Windows along one axis of `size` with p zeros before, e after, in ceil
 * mode or not (a ceil-mode window must start inside the input or its left
 * padding: PyTorch's rule). */
HWT_API int64_t hwt_pool2d_out_len(int64_t size, int64_t k, int64_t s, int64_t p, int64_t e,
                                 int ceil_mode);
/* HWT_OK, HWT_EINVAL (bad geometry: a window larger than the padded input,
 * padding over half a window, oh/ow not a window count) or HWT_EISA. */
HWT_API int hwt_pool2d_check(const hwt_pool2d_desc *d);
/* Floats of workspace each thread passes to hwt_pool2d_run_part. */
HWT_API size_t hwt_pool2d_ws_floats(const hwt_pool2d_desc *d);
/* Thread tid's share of nth: whole output rows of (plane, row) pairs, so
 * two threads split channel blocks x rows; no synchronisation needed. ws:
 * hwt_pool2d_ws_floats floats of this thread's own. */
HWT_API void hwt_pool2d_run_part(const hwt_pool2d_desc *d, const float *x, float *y, float *ws,
                               int tid, int nth);
/* Global average pooling of NCHW planes (global_pool2d's mean): y[p] =
 * the mean of x[p * n .. p * n + n), for p < planes, summed in double (as
 * the reference is) with isa's vectors converting floats to doubles. */
HWT_API void hwt_global_avg_planes(const float *x, int64_t n, int64_t planes, hwt_isa isa,
                                   float *y);
/* Max pooling of u8 channels-last images (the int8 byte links, issue #43):
 * d->planes images of h x w pixels of d->b channel bytes (is_max, the
 * geometry as above), image i at x + i * x_image and y + i * y_image bytes;
 * thread tid's share of nth: whole (image, output row) pairs. */
HWT_API void hwt_pool2d_u8_hwc_max_part(const hwt_pool2d_desc *d, const uint8_t *x,
                                        int64_t x_image, uint8_t *y, int64_t y_image, int tid,
                                        int nth);
/* Plain-C reference (the test oracle): every window summed in double. */
HWT_API int hwt_pool2d_ref(const hwt_pool2d_desc *d, const float *x, float *y);

#endif
