/* FP32 depthwise 2-D convolution (MobileNet, EfficientNet, MnasNet,
 * ShuffleNet, ConvNeXt): every input channel c convolved with its own
 * `mult` filters into output channels c * mult .. c * mult + mult - 1, and
 * the plain-C reference of any grouped convolution (the oracle of the
 * depthwise kernel and of the engine's per-group dense template).
 *
 * Described by a hwt_conv_desc with K = C * mult (the weights
 * [K][1][R][S], ONNX's and PyTorch's layout for group = C), any kernel
 * size, stride, dilation and asymmetric zero padding; bias, residual and
 * ReLU in the epilogue as for the dense CONV (hwtune/conv.h).
 *
 * Layout: NCHW, x [N][C][H][W], y [N][K][OH][OW], two ways
 * (kernels/conv/dw_body.c, compiled per ISA):
 * - rows: each thread's share is a contiguous range of the N x K x OH
 *   output rows; it stages the input rows one chunk of output rows reads,
 *   zero-padded and split by column stride phase, into its workspace so
 *   that consecutive output columns read consecutive floats at every tap,
 *   a vector of output columns per FMA. Wide rows.
 * - blocked (multiplier 1, vector ISAs): shares of the N x C/vec x OH
 *   (image, channel block, output row) units; a chunk's input rows are
 *   transposed to [W][vec] (NCHW[vec]c) in the workspace (rows under 16
 *   columns by one transpose of the chunk's rows, contiguous in NCHW), a
 *   vector of channels per FMA, and groups of output rows (up to 256
 *   pixels) transposed back at once. Narrow rows (7x7 .. 28x28), where a
 *   row of columns fills few vectors.
 *
 * Roofline (3x3, stride 1): 18 FLOPs per output float against one input
 * and one output float streamed, 2.25 FLOP/byte, so a depthwise layer
 * whose activations come from DRAM is memory-bound on any x86 core; from
 * L2/L3 (MobileNet's are 0.2-5 MB) the FMA and load ports bound it. Zen 4,
 * one core, AVX-512 (two 256-bit FMA pipes: 32 FLOP/cycle, ~110 GFLOPS):
 * measured 37-39 GFLOPS, 16-17 GB/s in + out, on 32 ch 112x112 (0.195 ms)
 * and 144 ch 56x56 (0.21 ms), 3x3 stride 1 (medians of 100 runs of the
 * one-op model, activations L3-resident, machine under load). Per output
 * vector the blocked path issues 9 FMAs and 9 loads, plus its share of the
 * two transposes (in and out) and the staging copy: about a third of FMA
 * peak, and at 17 GB/s about half of what one Zen 4 core streams from L3,
 * so neither roof is reached yet. Between blocked dense CONVs the layout
 * pass gives a depthwise conv NCHW[x]c tensors (hwt_dwconv_plan_nchwc),
 * and the transposes become copies.
 */
#ifndef HWTUNE_DWCONV_H
#define HWTUNE_DWCONV_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/conv.h"
#include "hwtune/isa.h"

typedef struct {
  hwt_conv_desc d;  /* K = C * mult */
  int mult;
  int cg;           /* input (= output) channels per group: 1 depthwise, else
                       hwt_gconv_plan_make's small groups */
  hwt_isa isa;
  float relu_max;   /* with d.relu: the clamp after it (ReLU6: 6); INFINITY: none.
                       plan_make sets INFINITY, the caller may lower it */
  int OH, OW;
  int blocked;      /* 1: channel-blocked path (vec channels per vector), else rows */
  int bn;           /* activations: 0 NCHW; > 0 NCHW[bn]c (x and y, hwt_dwconv_plan_nchwc) */
  int vec;          /* channels per block of the blocked path */
  int phases;       /* column stride phases of a staged row (stride_w) */
  int wq;           /* floats per phase of a staged row */
  int chunk;        /* output rows per staging chunk */
  size_t ws_floats; /* workspace floats each thread needs (64-byte aligned) */
} hwt_dwconv_plan;

/* HWT_EINVAL: not depthwise (K not a multiple of C, shape invalid);
 * HWT_EISA: isa not supported here. */
HWT_API int hwt_dwconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_dwconv_plan *out);
/* Depthwise with multiplier 1 on NCHW[bn]c activations (x [N][C/bn][H][W]
 * [bn], y [N][C/bn][OH][OW][bn], bn dividing C; weights [C][1][R][S] as
 * given): the blocked path with each pixel's channels copied instead of
 * transposed, any bn on any ISA (the layout pass runs a depthwise conv in
 * the block its input has). */
HWT_API int hwt_dwconv_plan_nchwc(const hwt_conv_desc *d, int bn, hwt_isa isa,
                                  hwt_dwconv_plan *out);
/* A grouped conv of small groups on the blocked path: K == C, group
 * divides C, and the group width cg = C / group divides the vector width
 * of isa and is at most 8 (ResNeXt-50's first stages: 32 groups of 4 and
 * 8; RegNet's groups of 8), but not as wide as the vector at stride 1
 * (AVX2's groups of 8: the dense template per group is faster there).
 * Output lane k of a channel block sums its group's cg input lanes, each
 * broadcast to the group by a lane permute of
 * the staged input vector (one permute per FMA, no lane wasted).
 * HWT_EINVAL when not eligible (then the engine runs the dense template
 * once per group), HWT_EISA when isa is not supported. */
HWT_API int hwt_gconv_plan_make(const hwt_conv_desc *d, int group, hwt_isa isa,
                                hwt_dwconv_plan *out);
/* Thread tid's share of nth: w [K][C/group][R][S] (the weights as given), bias K
 * floats or NULL, res y's shape or NULL (may not alias y), ws this
 * thread's p->ws_floats floats, 64-byte aligned. No allocation. */
HWT_API void hwt_dwconv_run_part(const hwt_dwconv_plan *p, const float *x, const float *w,
                                 const float *bias, const float *res, float *y, float *ws,
                                 int tid, int nth);
/* Plain-C reference of a grouped convolution (group divides C and K; w
 * [K][C/group][R][S]), NCHW, double accumulation: + bias, + res, then the
 * ReLU when d->relu. group = C is depthwise, group = 1 hwt_conv_ref_res. */
HWT_API int hwt_conv_group_ref(const hwt_conv_desc *d, int group, const float *x,
                               const float *w, const float *bias, const float *res, float *y);

#endif
