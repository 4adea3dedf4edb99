/* FP32 2-D convolution: direct NCHW and the NeoCPU NCHW[x]c template.
 *
 * Plan, then run (as in gemm.h): hwt_conv_plan_make() validates the shape and
 * the template parameters and sizes the per-thread workspace; the weights are
 * packed once (hwt_conv_pack_weights); hwt_conv_run_part() then computes the
 * share of thread `tid` out of `nth` -- a contiguous range of output rows
 * over (batch, output-channel block, output row, in groups of reg_h) -- with no synchronisation
 * and no allocation, so any fork-join can drive it.
 *
 * Layouts (N batch, C/K in/out channels, H/W spatial, R/S kernel):
 *   HWT_CONV_NCHW   x [N][C][H][W], y [N][K][OH][OW], computed by the
 *                   NCHW[x]c template: each thread stages the NCHW rows it
 *                   reads straight into the template's blocked row layout
 *                   and transposes its output rows back, so no separate
 *                   layout pass (and no barrier) is needed; weights packed
 *                   as for NCHWC. Shapes the template refuses (S > 64) with
 *                   default params fall back to HWT_CONV_NCHW_DIRECT, and
 *                   the plan's layout says so.
 *   HWT_CONV_NCHW_DIRECT  the same tensors by the portable direct kernel;
 *                   packed weights [ceil(K/4)][C][R][S][4]
 *   HWT_CONV_NCHW_GEMM  the same tensors, a 1x1 stride-1 unpadded CONV as
 *                   one GEMM per image (y[n] = W x[n], K x C times C x
 *                   OH*OW): what NCHW with default params becomes for
 *                   such shapes (conv.c says which); weights packed once
 *                   as the GEMM's A micro-panels (hwt_gemm_pack_a). A
 *                   strided 1x1 unpadded CONV with default params runs the
 *                   plan of its stride-1 CONV over each thread's copy of
 *                   the subsampled input (plan.sub; pw_stride.c)
 *   HWT_CONV_NCHW_STEM  the same tensors, a CONV of few input channels (a
 *                   CNN's first: the image's 3) by the stem kernel
 *                   (stem.c, stem_body.c): vectorised along each output
 *                   row, written straight into NCHW; what NCHW with
 *                   default params becomes for such shapes (conv.c says
 *                   which); weights packed [ceil(K/b)][C][R][S][b], b the
 *                   variant's block of output channels
 *   HWT_CONV_NCHWC  x NCHW[ic_bn]c  [N][C/ic_bn][H][W][ic_bn]
 *                   y NCHW[oc_bn]c  [N][K/oc_bn][OH][OW][oc_bn]
 *                   weights OIHW[ic_bn]i[oc_bn]o [K/oc_bn][C/ic_bn][R][S][ic_bn][oc_bn]
 * The NCHW[x]c template's knobs (ic_bn, oc_bn, reg_n, unroll_ker, reg_h) are
 * declared by hwt_conv_knobs(), next to the template; the tuner reads that
 * declaration, and hwt_conv_default_params() is the untuned fallback.
 */
#ifndef HWTUNE_CONV_H
#define HWTUNE_CONV_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef enum {
  HWT_CONV_NCHW = 0,
  HWT_CONV_NCHWC = 1,
  HWT_CONV_NCHW_DIRECT = 2,
  HWT_CONV_NCHW_GEMM = 3,
  HWT_CONV_NCHW_STEM = 4
} hwt_conv_layout;

typedef struct {
  int N, C, H, W;       /* input */
  int K, R, S;          /* output channels, kernel height and width */
  int stride_h, stride_w;
  int pad_h, pad_w;     /* zero padding before the first row / column (top, left) */
  int relu;             /* 1: y = max(conv + bias, 0) */
  int dil_h, dil_w;     /* dilation (>= 1): kernel taps dil apart, extent (R-1)*dil_h+1 */
  int pad_h_end, pad_w_end; /* zero padding after the last row / column (bottom, right);
                               equal to pad_h / pad_w unless the padding is asymmetric */
  float relu_max;       /* with relu, > 0: y = min(max(conv + bias, 0), relu_max) (ReLU6's 6,
                           clip(0, max) fused); 0: no upper bound */
  int act;              /* hwt_conv_activation applied after bias and residual (not with relu):
                           the element-wise kernel's own silu / hard_swish */
} hwt_conv_desc;

/* The activation of a conv's epilogue besides ReLU (EfficientNet's SiLU,
 * MobileNetV3's HardSwish), computed as the element-wise ops of the same
 * name compute it (kernels/eltwise/ops.h), so a fused conv matches the
 * conv followed by the op. */
typedef enum {
  HWT_CONV_ACT_NONE = 0,
  HWT_CONV_ACT_SILU = 1,       /* x * sigmoid(x) */
  HWT_CONV_ACT_HARD_SWISH = 2  /* x * clamp(x / 6 + 1/2, 0, 1) */
} hwt_conv_activation;

/* NCHW[x]c template parameters (NeoCPU Section 3.1.1). */
typedef struct {
  int ic_bn;       /* input-channel block: divides C */
  int oc_bn;       /* output-channel block: divides K */
  int reg_n;       /* output pixels along W held in registers per block */
  int unroll_ker;  /* 1: kernel-width loop innermost and unrolled (ic inside kh) */
  int reg_h;       /* output rows per register block (1 or 2): two rows share every
                      weight load, for narrow outputs (7x7, 14x14) */
  int winograd;    /* 0: the direct NCHW[x]c template above; 2: Winograd F(2x2, 3x3)
                      (3x3, stride 1 or 2, no dilation), the other knobs then unused
                      except ic_bn / oc_bn, which still name the NCHWC tensors' blocks */
} hwt_conv_params;

#define HWT_CONV_KNOB_MAX 128
typedef struct {
  int n;
  int v[HWT_CONV_KNOB_MAX];  /* legal values, ascending */
} hwt_conv_knob;

/* The NCHW[x]c search space: every legal value of each knob. Any combination
 * of listed values is accepted by hwt_conv_plan_make(): ic_bn / oc_bn are
 * the divisors of C / K (the first HWT_CONV_KNOB_MAX), reg_n the values up
 * to min(32, OW) that divide OW or are powers of two, unroll_ker 0 and 1,
 * reg_h 1 and (when OH > 1) 2, winograd 0 and (3x3 stride 1 or 2 undilated) 2. */
typedef struct {
  hwt_conv_knob ic_bn, oc_bn, reg_n, unroll_ker, reg_h, winograd;
} hwt_conv_knobs_t;

typedef struct {
  hwt_conv_desc d;
  hwt_conv_layout layout;
  hwt_conv_params p;  /* template parameters (zeroed for NCHW_DIRECT, _GEMM and _STEM) */
  hwt_isa isa;
  int nth;            /* thread count the plan was made for */
  int OH, OW;
  int Hp, Wp;         /* input extent the kernel reads (padded copy, or H/W) */
  int copy_input;     /* 1: run_part stages a zero-padded input copy in ws (template) */
  int rows_outer;     /* 1: shares are bands of output rows over every oc block (template) */
  size_t x_floats, y_floats, w_floats;  /* tensor sizes in this layout */
  size_t ws_floats;   /* workspace floats each thread needs (64-byte aligned) */
  /* Winograd (p.winograd == 2; winograd.c): tiles of 2x2 outputs, tw x th
   * of them per image, worked in blocks of tb tiles x kb output channels;
   * the input staged in channel blocks of bs lanes, cpad channels (C
   * rounded up to bs); packed weights per channel block: pack_full floats
   * per transform element (pack_tail for the last, narrower block). */
  int wino_th, wino_tw, wino_tb, wino_kb, wino_bs, wino_cpad;
  size_t wino_pack_full, wino_pack_tail;
  int flat; /* 1: a 1x1 stride-1 unpadded NCHW CONV whose H x W image the template runs
               as one row of H*W pixels (d, OH, OW stay the real ones; conv.c) */
  int sub;  /* 1: a strided 1x1 unpadded NCHW CONV run as the stride-1 plan above (GEMM or
               flat template) over each thread's copy of the subsampled input (d, OH, OW
               stay the real ones; pw_stride.c) */
  int nhwc_gemm; /* 1: a 1x1 stride-1 unpadded NCHWc CONV with ic_bn = C and oc_bn = K
                    (channels-last tensors) run as one GEMM per image; its packed weights
                    come from the blocked ones (OIHW[C]i[K]o), see nhwc_gemm.c */
  int gemm_t;    /* 1 (NCHW_GEMM): a small image's 1x1 CONV run as the transposed product
                    x^T . W^T into each thread's workspace, the weights packed as the GEMM's
                    B, written back as NCHW by the epilogue (pw_t.c) */
} hwt_conv_plan;

/* Output size; HWT_EINVAL if the shape is invalid (empty output, bad stride). */
HWT_API int hwt_conv_out_dims(const hwt_conv_desc *d, int *oh, int *ow);
HWT_API int hwt_conv_knobs(const hwt_conv_desc *d, hwt_isa isa, hwt_conv_knobs_t *out);
/* Untuned fallback from the SIMD width of `isa` (HWT_EISA if unsupported). */
HWT_API int hwt_conv_default_params(const hwt_conv_desc *d, hwt_isa isa, hwt_conv_params *out);
/* params: NULL = defaults; ignored for NCHW_DIRECT. Returns HWT_OK, or
 * HWT_EINVAL (bad shape, a knob value not in hwt_conv_knobs, or S > 64 for
 * NCHWC or NCHW with params) / HWT_EISA. */
HWT_API int hwt_conv_plan_make(const hwt_conv_desc *d, hwt_conv_layout layout,
                               const hwt_conv_params *params, hwt_isa isa, int nth,
                               hwt_conv_plan *out);
/* OIHW [K][C][R][S] weights -> the plan's layout (p->w_floats floats). Done once. */
HWT_API int hwt_conv_pack_weights(const hwt_conv_plan *p, const float *w_oihw, float *w_packed);
/* NCHWc plans: the blocked weights [K/oc_bn][C/ic_bn][R][S][ic_bn][oc_bn]
 * -> what run_part reads (p->w_floats floats): the GEMM's packed B for an
 * nhwc_gemm plan; the template and Winograd read the blocked weights in
 * place or pack from OIHW, so any other plan is HWT_EINVAL. */
HWT_API int hwt_conv_pack_blocked_weights(const hwt_conv_plan *p, const float *w_blocked,
                                          float *w_packed);
/* bias: K floats or NULL. ws: this thread's workspace (p->ws_floats floats,
 * 64-byte aligned; may be NULL if ws_floats is 0). */
HWT_API void hwt_conv_run_part(const hwt_conv_plan *p, const float *x, const float *w_packed,
                               const float *bias, float *y, float *ws, int tid, int nth);
/* hwt_conv_run_part with a residual: y = conv + bias + res, then the ReLU
 * when d.relu (ResNet's block ending in the CONV's epilogue). res has y's
 * layout and size, or is NULL; it may not alias y. */
HWT_API void hwt_conv_run_part_res(const hwt_conv_plan *p, const float *x,
                                   const float *w_packed, const float *bias, const float *res,
                                   float *y, float *ws, int tid, int nth);
/* Plain-C reference (the test oracle): NCHW/OIHW, double accumulation. */
HWT_API int hwt_conv_ref(const hwt_conv_desc *d, const float *x, const float *w,
                         const float *bias, float *y);
/* hwt_conv_ref with a residual res (NCHW, y's shape; NULL: none) added
 * before the ReLU. */
HWT_API int hwt_conv_ref_res(const hwt_conv_desc *d, const float *x, const float *w,
                             const float *bias, const float *res, float *y);
/* Plain-C reference of the transposed convolution (ConvTranspose), the
 * adjoint of the conv d describes: x has that conv's output shape
 * [N][K][OH][OW], y its input shape [N][C][H][W], w is [K][C][R][S] (ONNX's
 * and PyTorch's ConvTranspose weight layout), bias C floats or NULL:
 * y[n][c][oh*sh - pad_h + r*dil_h][...] += x[n][k][oh][ow] * w[k][c][r][s].
 * relu is ignored. An output_padding of ConvTranspose is a conv input H
 * larger than the windows reach (pad_h_end then 0). Double accumulation. */
HWT_API int hwt_conv_transpose_ref(const hwt_conv_desc *d, const float *x, const float *w,
                                   const float *bias, float *y);

/* Layout transforms. An activation [N][C][HW] is plain NCHW when its block
 * is 0, NCHW[bn]c when bn > 0 (bn divides C). Converts src_bn -> dst_bn
 * (covers NCHW -> NCHW[x]c, back, and NCHW[x]c -> NCHW[y]c between CONVs);
 * run_part converts thread tid's share of the (n, channel block) pairs with
 * isa's transposes (the portable copy when the CPU lacks isa). */
HWT_API int hwt_layout_check(int N, int C, long HW, int src_bn, int dst_bn);
HWT_API void hwt_layout_run_part(int N, int C, long HW, int src_bn, int dst_bn,
                                 const float *src, float *dst, int tid, int nth, hwt_isa isa);
/* A batch of matrix transposes, y[b][c][r] = x[b][r][c] for matrices of
 * rows x cols floats (NCHW <-> NHWC is one: (N, C, HW) <-> (N, HW, C)),
 * through the same per-ISA transposes in square tiles; thread tid of nth
 * writes its share of strips of output rows. */
HWT_API void hwt_transpose_run_part(long batch, long rows, long cols, const float *x, float *y,
                                    int tid, int nth, hwt_isa isa);
/* OIHW [K][C][R][S] <-> OIHW[ic_bn]i[oc_bn]o; HWT_EINVAL if blocks don't divide. */
HWT_API int hwt_layout_oihw_to_blocked(int K, int C, int R, int S, int ic_bn, int oc_bn,
                                       const float *src, float *dst);
HWT_API int hwt_layout_blocked_to_oihw(int K, int C, int R, int S, int ic_bn, int oc_bn,
                                       const float *src, float *dst);

#endif
