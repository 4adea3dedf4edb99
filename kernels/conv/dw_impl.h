/* Internal to the depthwise kernels (not installed): the variant table the
 * driver (dw.c) dispatches through, and the staging geometry both share. */
#ifndef HWTUNE_DW_IMPL_H
#define HWTUNE_DW_IMPL_H
#include "hwtune/dwconv.h"

/* One variant, compiled from dw_body.c for one ISA. */
typedef struct {
  int vec; /* floats per vector: the channel block of the blocked path (1: none) */
  /* Output rows [oa, ob) of one output plane: x the input plane it reads,
   * w its R x S filter, res the residual plane (or NULL), y the output
   * plane; ws holds p->ws_floats floats. */
  void (*rows)(const hwt_dwconv_plan *p, const float *x, const float *w, float bias,
               const float *res, float *y, int oa, int ob, float *ws);
  /* The blocked path (p->blocked, multiplier 1): output rows [oa, ob) of
   * cbn <= vec channels from channel c0 on, x / w / bias / res / y all
   * pointing at channel c0 (of one image); ws holds p->ws_floats. */
  void (*blocked_rows)(const hwt_dwconv_plan *p, const float *x, const float *w,
                       const float *bias, const float *res, float *y, int cbn, int oa, int ob,
                       float *ws);
} hwt_dwconv_variant;

extern const hwt_dwconv_variant hwt_dwconv_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_dwconv_variant hwt_dwconv_variant_avx2, hwt_dwconv_variant_avx512;
#endif
/* The variant for isa when the CPU runs it, else the portable one
 * (kernels/common/variants.c). */
const hwt_dwconv_variant *hwt_dwconv_variant_for(hwt_isa isa);

/* Padded input columns the output row's windows read: (OW - 1) * sw +
 * (S - 1) * dw + 1. */
static inline long hwt_dwconv_cols(const hwt_dwconv_plan *p) {
  return (long)(p->OW - 1) * p->d.stride_w + (long)(p->d.S - 1) * p->d.dil_w + 1;
}

/* Input rows a chunk of `rows` output rows reads. */
static inline long hwt_dwconv_span(const hwt_dwconv_plan *p, int rows) {
  return (long)(rows - 1) * p->d.stride_h + (long)(p->d.R - 1) * p->d.dil_h + 1;
}

/* The blocked path's output rows per NCHW transpose: rows of one plane
 * are contiguous in NCHW, so a group of them leaves in one transpose of
 * rows x OW pixels, up to 256 pixels ([256][16] floats, 16 KiB, in L1):
 * a 7x7 plane in one, where a row at a time left 7 pixels a transpose,
 * masked stores on every one of them. */
#define HWT_DW_OUT_PIXELS 256
static inline int hwt_dwconv_out_rows(const hwt_dwconv_plan *p) {
  const int r = HWT_DW_OUT_PIXELS / p->OW;
  return r < 1 ? 1 : r > p->chunk ? p->chunk : r;
}

/* Input rows narrower than this are staged, on the NCHW blocked path, by
 * one transpose of the chunk's rows (contiguous in NCHW) into a scratch
 * [rows * W][vec], then copied row by row into the padded staged rows: a
 * row at a time, a 7-column row was 7 gathers of 16 lanes (fewer than 8
 * columns have no shuffle transpose). */
#define HWT_DW_NARROW_W 16
static inline int hwt_dwconv_narrow(const hwt_dwconv_plan *p) {
  return !p->bn && p->d.W < HWT_DW_NARROW_W;
}

#endif
