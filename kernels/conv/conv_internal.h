/* Internal contract between the CONV driver (conv.c) and its per-ISA row
 * kernels (nchwc_body.c compiled per SIMD ISA, nchwc_generic.c). Not
 * installed. */
#ifndef HWTUNE_CONV_INTERNAL_H
#define HWTUNE_CONV_INTERNAL_H
#include "hwtune/conv.h"

/* `rows` (1 or 2) NCHW[x]c output rows: out[h][ow][oc_bn] for ow in [0, OW)
 * of one output channel block, reduced over the CB input channel blocks
 * `in` and `w` point at (one pass of the reduction: the first pass starts
 * from the bias, later ones add to what out holds, the last applies the
 * epilogue: + residual, then ReLU). The input is the driver's staged copy:
 * zero-padded, each row block transposed from [Wp][ic_bn] to
 * [ic_bn][sw][Wp/sw] (columns split by stride phase), so consecutive output
 * pixels read consecutive floats at every tap -- a compile-time 4-byte pixel
 * stride for the kernels. An unpadded NCHW input with stride_w 1 has that
 * property already and is read in place (other strides, same kernels). */
#define HWT_CONV_MAX_S 64
typedef struct {
  const float *in;     /* input (staged or in place), channel block 0, first row read */
  const float *w;      /* this oc block's weights [CB][R][S][ic_bn][oc_bn] */
  const float *bias;   /* oc_bn floats of this block, or NULL */
  float *out;          /* [OW][oc_bn] */
  const float *res;    /* residual added before the ReLU, laid out as out; or NULL */
  float *scratch;      /* reg_n * oc_bn floats (generic kernel's accumulators) */
  long in_cb_stride;   /* floats between input channel blocks */
  long in_row_stride;  /* floats between the input rows of consecutive kernel rows
                          (dil_h input rows apart) */
  long in_ic_stride;   /* floats between channels of one input row */
  long in_oh_stride;   /* floats between the input rows of consecutive output rows */
  long out_row_stride; /* floats between output rows */
  int rows;            /* output rows in this call: 1 or 2 (reg_h) */
  int first, last;     /* this pass starts the reduction / ends it (epilogue) */
  int CB, R, S, ic_bn, oc_bn, OW, reg_n, unroll_ker, relu;
  float relu_max;      /* with relu, > 0: the clamp's upper bound (ReLU6); 0: none */
  int koff[HWT_CONV_MAX_S]; /* offset of tap kw (column kw * dil_w) for output pixel 0 */
} hwt_conv_row_args;

/* Staging transpose of one tile of n columns (the CONV driver stages at most
 * 16, the layout transform a whole channel block):
 * dst[i * dst_stride + pos] = src[pos * src_stride + i] for i < bn, pos < n. */
typedef void (*hwt_conv_stage_fn)(const float *src, long src_stride, int n, int bn, float *dst,
                                  long dst_stride);

/* The stem kernel of one variant (stem_body.c): NCHW CONVs of few input
 * channels (a CNN's first, on the image's 3), vectorised along the output
 * row rather than over output channels, so its blocks store NCHW rows
 * directly. rows() computes output rows [lo, hi) of the N x OH rows of
 * the plan (every output channel), ws holding hwt_conv_stem_ws_floats(). */
typedef struct {
  int vec; /* floats per vector (the staged rows' geometry: hwt_conv_stem_pl) */
  int oc;  /* output channels per register block: the packed weights' block */
  int pv;  /* vectors of output pixels per register block, at most */
  void (*rows)(const hwt_conv_plan *p, const float *x, const float *w, const float *bias,
               const float *res, float *y, float *ws, long lo, long hi);
} hwt_conv_stem_variant;

extern const hwt_conv_stem_variant hwt_conv_stem_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_conv_stem_variant hwt_conv_stem_variant_avx2, hwt_conv_stem_variant_avx512;
#endif

/* The stem kernel's reach: input channels, and input rows a window spans
 * ((R - 1) * dil_h + 1), columns likewise. Output rows go in bands of
 * HWT_CONV_STEM_BAND, oc blocks outer (stem_body.c), the ring holding the
 * band's input rows, at most HWT_CONV_STEM_MAX_SLOTS of them. Bands of 8
 * against one row at a time (every oc block of a row before the next),
 * Zen 4, 1 thread, medians of 15 interleaved thread-time samples, under
 * load: with the input and output out of cache (rotating over 53 MB, as a
 * model's first conv finds them) 3 -> 32 3x3 at 224x224 437 vs 562 us
 * (AVX-512), 486 vs 582 (AVX2), 3 -> 64 7x7 2484 vs 2724 (AVX-512); in
 * cache 370 vs 378, 2447 vs 2569 (AVX-512); bands of 16 measured the
 * same as 8 (out of cache 510 vs 514 us, 2760 vs 2720). A row at a time
 * wrote all K output planes a row each; a band writes OC planes 8 rows
 * (contiguous) each at a time. */
#define HWT_CONV_STEM_MAX_C 4
#define HWT_CONV_STEM_MAX_SPAN 16
#define HWT_CONV_STEM_BAND 8
#define HWT_CONV_STEM_MAX_SLOTS 64

/* Floats of one stride phase of a staged input row: the output row rounded
 * up to whole vectors, plus the taps' reach past it (loads never need a
 * mask), rounded to 16 floats (64-byte rows). */
static inline long hwt_conv_stem_pl(const hwt_conv_plan *p, int vec) {
  const long ow = ((long)p->OW + vec - 1) / vec * vec;
  return (ow + (long)(p->d.S - 1) * p->d.dil_w / p->d.stride_w + 15) / 16 * 16;
}

/* Staged input rows the ring holds: a band's span. */
static inline long hwt_conv_stem_slots(const hwt_conv_desc *d) {
  return (long)(HWT_CONV_STEM_BAND - 1) * d->stride_h + (long)(d->R - 1) * d->dil_h + 1;
}

/* Workspace of one thread: the ring of staged rows plus one zero row (the
 * padding rows' stand-in), each C channels x stride_w phases x pl floats. */
static inline size_t hwt_conv_stem_ws_floats(const hwt_conv_plan *p, int vec) {
  return (size_t)(hwt_conv_stem_slots(&p->d) + 1) * p->d.C * p->d.stride_w *
         hwt_conv_stem_pl(p, vec);
}

/* One variant of the NCHW[x]c template: its kernels and the register-file
 * facts the knob defaults are derived from. */
typedef struct {
  int vec;           /* floats per vector */
  int nv_max;        /* vectors per pixel a register block holds at most (<= 4) */
  int caps[5];       /* caps[nv]: largest register block, in pixels, of nv vectors per pixel */
  int block_scratch; /* 1: row() keeps its accumulators in a->scratch (reg_n x oc_bn floats) */
  /* 1x1 CONVs (stride 1, unpadded, NCHW, default params) of at most this
   * many output pixels per image, or of fewer than pw_min_k output
   * channels, run on this template rather than as GEMMs (conv.c): measured
   * per variant. */
  int pw_max_hw;
  int pw_min_k;
  void (*row)(const hwt_conv_row_args *a);
  hwt_conv_stage_fn stage;
  /* dst[pos] = src[pos * step] for pos < n (a stride phase of a row). */
  void (*phase)(const float *src, int step, int n, float *dst);
  /* Both phases of a stride-2 row in one pass: even[pos] = src[2 * pos],
   * odd[pos] = src[2 * pos + 1] for pos < n. */
  void (*deint2)(const float *src, int n, float *even, float *odd);
  /* The NCHW GEMM path's epilogue on n floats of one output channel, in
   * place: y + bias (+ res[i] when res), then the ReLU (clamped to
   * relu_max when > 0) when relu, or the activation act (hwtune/conv.h),
   * in one pass (conv.c's gemm_units). */
  void (*epilogue)(float *y, const float *res, long n, float bias, int relu, float relu_max,
                   int act);
  /* 1x1 CONVs the NCHW GEMM path runs (above) of at most this many output
   * pixels per image run as the transposed product instead (pw_t.c). */
  int pw_t_max_hw;
  /* pw_t.c's epilogue: c (pixels x channels, rows ldc apart, bias added)
   * written transposed into the NCHW y (channels x pixels, rows ldy apart),
   * + res (laid out as y) when res, then the ReLU (clamped to relu_max
   * when > 0) when relu, or the activation act. */
  void (*epilogue_t)(float *y, long ldy, const float *c, long ldc, const float *res,
                     int pixels, int channels, int relu, float relu_max, int act);
  const hwt_conv_stem_variant *stem; /* the same ISA's stem kernel */
} hwt_conv_variant;

extern const hwt_conv_variant hwt_conv_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_conv_variant hwt_conv_variant_avx2, hwt_conv_variant_avx512;
#endif
/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_conv_variant *hwt_conv_variant_for(hwt_isa isa);

/* Winograd F(2x2, 3x3) tile transforms of one variant (winograd_body.c),
 * vectorised over `lanes` consecutive channels:
 *   in_tile:  patch element (i, j) of lane l at src[i*rs + j*cs + l] ->
 *             V element xi = 4i + j of lane l at v[xi][off + l] (not
 *             stored where v[xi] is NULL: no output of the tile needs it);
 *   out_tile: m element xi of lane l at m[xi][moff + l] -> the 2x2 outputs
 *             (+ bias[l], + res[q][l] when res is not NULL, then ReLU if
 *             relu, clamped to relu_max when > 0, then the activation act:
 *             hwtune/conv.h's hwt_conv_activation) of lane l at dst[q][l],
 *             q = 2*row + column; a NULL
 *             dst[q] (outside the output) is skipped, and the elements only
 *             skipped outputs need may point at zeros. */
typedef struct {
  int vec;
  void (*in_tile)(const float *src, long rs, long cs, int lanes, float *const *v, long off);
  void (*out_tile)(const float *const *m, long moff, int lanes, const float *bias, int relu,
                   float relu_max, int act, float *const dst[4], const float *const *res);
  /* The same for stride 2: a 5x5 patch, 25 elements (xi = hwt_wino_s2_slot). */
  void (*in_tile_s2)(const float *src, long rs, long cs, int lanes, float *const *v, long off);
  void (*out_tile_s2)(const float *const *m, long moff, int lanes, const float *bias, int relu,
                      float relu_max, int act, float *const dst[4], const float *const *res);
} hwt_wino_variant;

/* Stride 2: the V/M slot of transform element (i, j) of the 5x5 patch.
 * Elements whose weights are one slice (rows and columns 3 and 4 both meet
 * the middle tap) sit next to each other, slice (a, b) = (min(i, 3),
 * min(j, 3)) first at slot(a, b), so one GEMM computes them all. */
static inline int hwt_wino_s2_slot(int i, int j) {
  const int a = i < 4 ? i : 3, b = j < 4 ? j : 3;
  const int zi = a == 3 ? 2 : 1, zj = b == 3 ? 2 : 1;
  return a * 5 + b * zi + (i - a) * zj + (j - b);
}

extern const hwt_wino_variant hwt_wino_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_wino_variant hwt_wino_variant_avx2, hwt_wino_variant_avx512;
#endif
const hwt_wino_variant *hwt_wino_variant_for(hwt_isa isa);

/* The Winograd template (winograd.c): eligibility, plan sizing, weight
 * transform and packing, and thread tid's share of the units. */
int hwt_conv_wino_ok(const hwt_conv_desc *d);
int hwt_conv_wino_plan(hwt_conv_plan *p);
int hwt_conv_wino_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed);
/* res: a residual of y's layout added before the ReLU, or NULL. */
void hwt_conv_wino_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth);

/* Direct NCHW convolution of work units [lo, hi) of N x ceil(K/HWT_CONV_DIRECT_OCG) x OH
 * (direct.c); ws holds HWT_CONV_DIRECT_OCG * OW floats. Weights packed
 * [ceil(K/G)][C][R][S][G] by hwt_conv_direct_pack, zero past K. */
#define HWT_CONV_DIRECT_OCG 4
void hwt_conv_direct_pack(const hwt_conv_desc *d, const float *w_oihw, float *w_packed);
void hwt_conv_direct_units(const hwt_conv_plan *p, const float *x, const float *w,
                           const float *bias, const float *res, float *y, float *ws, long lo,
                           long hi);
/* The stem kernel's driver (stem.c): whether it runs d (its reach above), whether the
 * default NCHW plan takes it (measured: stem.c), the plan, the weights
 * packed [ceil(K/oc)][C][R][S][oc] (zero past K), thread tid's share. */
int hwt_conv_stem_ok(const hwt_conv_desc *d);
int hwt_conv_stem_default(const hwt_conv_desc *d, hwt_isa isa);
int hwt_conv_stem_plan(hwt_conv_plan *p);
void hwt_conv_stem_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed);
void hwt_conv_stem_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth);
/* Strided 1x1 unpadded CONVs (pw_stride.c): whether d is one; its
 * stride-1 CONV of one subsampled image; the plan (HWT_OK with out->sub
 * set, or an error), and thread tid's share of a run. */
int hwt_conv_pw_strided(const hwt_conv_desc *d);
hwt_conv_desc hwt_conv_pw_sub_desc(const hwt_conv_desc *d);
int hwt_conv_pw_plan(const hwt_conv_desc *d, hwt_isa isa, int nth, hwt_conv_plan *out);
void hwt_conv_pw_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                          const float *bias, const float *res, float *y, float *ws, int tid,
                          int nth);
/* NCHWc 1x1 CONVs held in one block of channels (nhwc_gemm.c): whether
 * params make d one, the plan (out's d, isa, nth, OH, OW set), the weights
 * packed from the blocked ones, thread tid's share of a run. */
int hwt_conv_nhwc_gemm_ok(const hwt_conv_desc *d, const hwt_conv_params *p);
int hwt_conv_nhwc_gemm_plan(hwt_conv_plan *out);
int hwt_conv_nhwc_gemm_pack(const hwt_conv_plan *p, const float *w_blocked, float *w_packed);
void hwt_conv_nhwc_gemm_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                                 const float *bias, const float *res, float *y, float *ws,
                                 int tid, int nth);
/* 1x1 stride-1 unpadded NCHW CONVs of small images as the transposed GEMM
 * (pw_t.c): whether an NCHW GEMM plan of OH*OW = hw pixels runs so on isa,
 * the plan (out's NCHW_GEMM fields set), the weights packed, thread tid's
 * share of a run. */
int hwt_conv_pw_t_ok(int hw, hwt_isa isa);
int hwt_conv_pw_t_plan(hwt_conv_plan *out);
int hwt_conv_pw_t_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed);
void hwt_conv_pw_t_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth);
/* Workspace pieces start on 64-byte lines: floats rounded up to 16. */
#define ALIGN_FLOATS(n) (((n) + 15) & ~(size_t)15)

/* The NCHW epilogue with a residual, applied after an output row segment
 * is transposed into place: y[o * stride + i] += res[o * stride + i], then
 * the ReLU when relu, for o < channels, i < n (y and res point at the same
 * element of their tensors). */
static inline float hwt_conv_act(float v, int relu, float relu_max) {
  if (relu && v < 0.0f) v = 0.0f;
  if (relu && relu_max > 0.0f && v > relu_max) v = relu_max;
  return v;
}

static inline void hwt_conv_residual_rows(float *y, const float *res, long stride, int channels,
                                          int n, int relu, float relu_max) {
  for (int o = 0; o < channels; o++) {
    float *yr = y + (long)o * stride;
    const float *rr = res + (long)o * stride;
    for (int i = 0; i < n; i++) yr[i] = hwt_conv_act(yr[i] + rr[i], relu, relu_max);
  }
}

/* The activation d.act (act.c) over `rows` spans of n floats, stride floats
 * apart, in place: the element-wise kernel of isa (the separate op's own
 * code), called on spans a kernel has just written. act 0: nothing. */
void hwt_conv_act_rows(hwt_isa isa, int act, float *y, long stride, int rows, long n);
/* The scalar reference of d.act on one float (the element-wise references). */
float hwt_conv_act_ref(float v, int act);

/* Split `n` pixels into ceil(n / cap) nearly equal pieces; returns the size
 * of piece `i` of `pieces`. Equal pieces keep every piece near the cap. */
static inline int hwt_conv_piece(int n, int pieces, int i) {
  return n / pieces + (i < n % pieces ? 1 : 0);
}

#endif
