/* bf16 convolution (issue #43): a dense (group 1) NCHW conv2d through the
 * bf16 GEMM's micro-kernels (hwtune/bgemm.h), computing Y^T: the output
 * channels are the GEMM's rows (M = K), the taps (c, r, s) its reduction
 * (k = (c * R + r) * S + s, C * R * S of them) and the output pixels of all
 * images its columns (N * OH * OW). The weights, OIHW, are A: rounded to
 * bf16 and packed once (hwt_bconv_pack_w). At run time each thread gathers
 * chunks of im2col rows straight into bf16 pair panels of nr pixels (B; no
 * fp32 im2col matrix), the micro-kernel sums in fp32 into a tile of mr
 * channels x nr pixels, and the epilogue writes each channel's pixels
 * contiguously into NCHW: + bias[k], + residual, ReLU, min(., relu_max), as
 * the fp32 CONV's epilogue (hwtune/conv.h).
 *
 * Numerics: exactly hwt_bgemm_ref's contract on that im2col matrix (x and w
 * rounded to bf16, k in pairs, fp32 sums; a product is the same whichever
 * operand is A), then the epilogue in fp32; the portable variant equals
 * hwt_bconv_ref bit for bit. */
#ifndef HWTUNE_BCONV_H
#define HWTUNE_BCONV_H
#include <stddef.h>
#include "hwtune/bgemm.h"
#include "hwtune/conv.h"

typedef struct {
  hwt_conv_desc d;
  hwt_bgemm_plan g;    /* M = K, N = N*OH*OW, K = C*R*S; g.isa is the variant row */
  int OH, OW;
  int nc;              /* output pixels per gathered B chunk (a multiple of g.nr) */
  size_t packed_w_bytes;
  size_t ws_bytes;     /* per-thread workspace */
} hwt_bconv_plan;

/* HWT_OK, HWT_EINVAL (bad geometry), HWT_EISA as hwt_bgemm_plan_make: the
 * caller picks the row with hwt_bgemm_variant_for. */
HWT_API int hwt_bconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_bconv_plan *out);
/* OIHW fp32 weights rounded and packed into `packed` (p->packed_w_bytes,
 * 64-byte aligned). */
HWT_API int hwt_bconv_pack_w(const hwt_bconv_plan *p, const float *w, void *packed);
/* Thread tid's share of nth (disjoint outputs). bias, residual may be NULL;
 * ws: p->ws_bytes, 64-byte aligned. */
HWT_API void hwt_bconv_run_part(const hwt_bconv_plan *p, const float *x, const void *packed_w,
                                const float *bias, const float *residual, float *y, void *ws,
                                int tid, int nth);
/* Plain-C reference (the oracle): im2col in fp32, hwt_bgemm_ref, the
 * epilogue. Allocates; HWT_ENOMEM when it cannot. */
HWT_API int hwt_bconv_ref(const hwt_conv_desc *d, const float *x, const float *w,
                          const float *bias, const float *residual, float *y);

#endif
