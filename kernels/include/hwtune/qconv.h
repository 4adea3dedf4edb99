/* Direct int8 convolution (issue #43): the int8 GEMM's register tiles and
 * packed weights (hwtune/qgemm.h) fed straight from a u8 image in
 * channels-last layout, with no im2col copy and no A packing.
 *
 * x holds pixels of icp bytes (icp: the input channels rounded up to the
 * k group of every variant, 4; the extra channels meet zero weights), row
 * by row: x[(ih - ih0) * iw + w][c]. The conv's reduction runs tap by tap
 * (kh x kw), each tap over the icp channels of one input pixel: 4 of them
 * are one dword that vpdpbusd multiplies by 4 s8 weights of 16 output
 * channels (the layout of ORT's MLAS QLinearConv "indirection" kernels and
 * oneDNN's channel-blocked int8 convs). The micro-kernel walks a table of
 * pixel addresses, mr per tap; padded taps point at a pixel of the zero
 * point's bytes, so (x - za) is zero there, as in ONNX.
 *
 * Weights are symmetric here (hwt_qgemm_epi.zb NULL: no row sums): the
 * compensation is za * colsum[j] alone. hwt_qconv_ref is the oracle; every
 * variant's int32 sums are exact, so outputs match it bit for bit.
 */
#ifndef HWTUNE_QCONV_H
#define HWTUNE_QCONV_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"
#include "hwtune/qgemm.h"

typedef struct {
  int ic, oc;           /* channels (one group) */
  int h, w;             /* the full input's size (padding is against it) */
  int oh, ow;
  int kh, kw, sh, sw, pt, pl, dh, dw;
} hwt_qconv_desc;

typedef struct {
  hwt_qconv_desc d;
  int icp;              /* bytes per pixel of x: ic rounded up to 4 */
  int taps;             /* kh * kw */
  hwt_qgemm_plan g;     /* the GEMM plan whose tiles, packing and epilogue run it:
                           M unused, N oc, K taps * icp */
  size_t packed_w_bytes;
  size_t ws_bytes;      /* per thread: address table, accumulator tile, pad pixel */
} hwt_qconv_plan;

/* HWT_OK, HWT_EINVAL or HWT_EISA (as hwt_qgemm_plan_make: isa's int8 row
 * must run here; hwt_qgemm_variant_for picks it). */
HWT_API int hwt_qconv_plan_make(const hwt_qconv_desc *d, hwt_isa isa, hwt_qconv_plan *out);
/* s8 weights OIHW [oc][ic][kh][kw] into `packed` (packed_w_bytes, 64-byte
 * aligned) and colsum[oc]. */
HWT_API int hwt_qconv_pack_w(const hwt_qconv_plan *p, const int8_t *w, void *packed,
                             int32_t *colsum);
/* Output pixels [p0, p1) (row-major over oh x ow) and channels [n0, n1)
 * (n0 a multiple of plan.g.nr) of one image, one thread. x holds input
 * rows ih0 .. (as many as the pixels' windows read) of icp bytes per
 * pixel. e->za: x's zero point (u8); e->zb must be NULL; e->C points at
 * output pixel 0, channel 0 (rs_c: pixel stride, cs_c: channel stride).
 * ws: plan.ws_bytes, 64-byte aligned. */
HWT_API void hwt_qconv_compute(const hwt_qconv_plan *p, const uint8_t *x, int ih0,
                               const void *packed, const int32_t *colsum,
                               const hwt_qgemm_epi *e, int p0, int p1, int n0, int n1,
                               void *ws);
/* n pixels of float NCHW activations (channel c's at x + c * plane,
 * holding integers) as the u8 channels-last pixels hwt_qconv_compute
 * reads: dst[i * icp + c] = (int)min(max(x[c * plane + i] + shift, 0), 255)
 * (the clamps as `v < 0 ? 0 : v`, then `v > 255 ? 255 : v`; shift 128
 * moves s8 values into u8), channels ic .. icp - 1 zero. Vectorised by the
 * plan's variant; one thread. */
HWT_API void hwt_qconv_to_hwc(const hwt_qconv_plan *p, const float *x, ptrdiff_t plane, int n,
                              float shift, uint8_t *dst);
/* Plain-C reference (the oracle): x the whole image [h][w][icp], w OIHW. */
HWT_API int hwt_qconv_ref(const hwt_qconv_desc *d, int icp, const uint8_t *x, const int8_t *w,
                          const hwt_qgemm_epi *e);

#endif
