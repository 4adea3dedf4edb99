/* Layout transforms: NCHW <-> NCHW[x]c <-> NCHW[y]c for activations and
 * OIHW <-> OIHW[x]i[y]o for weights (NeoCPU Section 3.2). */
#include <string.h>
#include "hwtune/conv.h"
#include "conv_internal.h"

int hwt_layout_check(int N, int C, long HW, int src_bn, int dst_bn) {
  if (N < 1 || C < 1 || HW < 1 || src_bn < 0 || dst_bn < 0) return HWT_EINVAL;
  if ((src_bn && C % src_bn) || (dst_bn && C % dst_bn)) return HWT_EINVAL;
  return HWT_OK;
}

/* Offset of (n, c, hw) in a [N][C][HW] tensor with channel block bn (0: none). */
static size_t offset(int C, long HW, int bn, int n, int c, long hw) {
  if (!bn) return ((size_t)n * C + c) * HW + hw;
  return (((size_t)n * (C / bn) + c / bn) * HW + hw) * bn + c % bn;
}

/* Positions per spatial tile: a tile's strided side (tile x block floats,
 * 16 KiB at a block of 64) stays in L1 while it is transposed. */
#define LAYOUT_TILE 64

/* Columns [c0, c0 + bn) of x (rows x cols, row-major) into rows c0.. of
 * its transpose y (cols x rows): y[c * rows + r] = x[r * cols + c], by the
 * variant's staging transpose over tiles of row_tile rows. The layout
 * transforms and hwt_transpose_run_part both run on it. */
static void transpose_strip(const hwt_conv_variant *v, const float *x, long rows, long cols,
                            long c0, int bn, float *y, long row_tile) {
  for (long r0 = 0; r0 < rows; r0 += row_tile) {
    const int n = (int)(rows - r0 < row_tile ? rows - r0 : row_tile);
    v->stage(x + (size_t)r0 * cols + c0, cols, n, bn, y + (size_t)c0 * rows + r0, rows);
  }
}

/* Work unit: (n, group of channels), the group being the destination block so
 * each thread writes whole blocks (the source block when the destination is
 * plain). Plain <-> blocked runs through the CONV variant's staging transpose
 * (8x8 shuffles on x86) over spatial tiles; blocked -> blocked copies runs of
 * min(src_bn, dst_bn) channels. Before, every case was a scalar strided copy:
 * ResNet-18 conv3_1 (64x56x56, NCHW -> NCHW32c, 1 thread) spent 121 us of
 * its 1068 us there, its output back to NCHW 60 us (Zen 4, avx512,
 * 2026-11-28). */
void hwt_layout_run_part(int N, int C, long HW, int src_bn, int dst_bn, const float *src,
                         float *dst, int tid, int nth, hwt_isa isa) {
  int G = dst_bn ? dst_bn : (src_bn ? src_bn : C);
  long groups = (long)N * (C / G);
  long lo = groups * tid / nth, hi = groups * (tid + 1) / nth;
  if (src_bn == dst_bn) {
    /* Same layout: units are contiguous in both tensors. */
    size_t per = (size_t)G * HW;
    memcpy(dst + per * lo, src + per * lo, per * (size_t)(hi - lo) * sizeof(float));
    return;
  }
  const hwt_conv_variant *v = hwt_conv_variant_for(isa);
  for (long u = lo; u < hi; u++) {
    int n = (int)(u / (C / G)), c0 = (int)(u % (C / G)) * G;
    if (!src_bn || !dst_bn) {
      /* One side plain: [G][HW] rows <-> [HW][G] block, tile by tile. */
      const float *s = src + offset(C, HW, src_bn, n, c0, 0);
      float *o = dst + offset(C, HW, dst_bn, n, c0, 0);
      if (!src_bn) /* dst[hw][c] = src[c][hw]: strips of pixels, all G channels */
        for (long t0 = 0; t0 < HW; t0 += LAYOUT_TILE) {
          const int tn = (int)(HW - t0 < LAYOUT_TILE ? HW - t0 : LAYOUT_TILE);
          transpose_strip(v, s, G, HW, t0, tn, o, G);
        }
      else /* dst[c][hw] = src[hw][c]: the G channels, pixels in tiles */
        transpose_strip(v, s, HW, G, 0, G, o, LAYOUT_TILE);
      continue;
    }
    /* Both blocked: per pixel, runs of channels inside one block of each. */
    for (long hw = 0; hw < HW; hw++)
      for (int c = c0; c < c0 + G;) {
        int run = src_bn - c % src_bn;
        if (run > c0 + G - c) run = c0 + G - c;
        memcpy(dst + offset(C, HW, dst_bn, n, c, hw), src + offset(C, HW, src_bn, n, c, hw),
               (size_t)run * sizeof(float));
        c += run;
      }
  }
}

/* Output rows per strip (a thread's unit) and input rows per tile: the
 * tile's strided side, 32 x 32 floats (4 KiB), stays in L1 while the
 * transposes read it. */
#define TRANSPOSE_TILE 32

void hwt_transpose_run_part(long batch, long rows, long cols, const float *x, float *y,
                            int tid, int nth, hwt_isa isa) {
  const hwt_conv_variant *v = hwt_conv_variant_for(isa);
  const long strips = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE, units = batch * strips;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  for (long u = lo; u < hi; u++) {
    const long b = u / strips, c0 = (u % strips) * TRANSPOSE_TILE;
    const int bn = (int)(cols - c0 < TRANSPOSE_TILE ? cols - c0 : TRANSPOSE_TILE);
    const size_t m = (size_t)b * rows * cols;
    transpose_strip(v, x + m, rows, cols, c0, bn, y + m, TRANSPOSE_TILE);
  }
}

static int weights_check(int K, int C, int R, int S, int ic_bn, int oc_bn, const void *src,
                         const void *dst) {
  if (!src || !dst || K < 1 || C < 1 || R < 1 || S < 1 || ic_bn < 1 || oc_bn < 1) return 0;
  return C % ic_bn == 0 && K % oc_bn == 0;
}

/* Offset of weight (k, c, r, s) in OIHW[ic_bn]i[oc_bn]o. */
static size_t blocked_offset(int C, int R, int S, int ic_bn, int oc_bn, int k, int c, int r,
                             int s) {
  size_t blk = ((((size_t)(k / oc_bn) * (C / ic_bn) + c / ic_bn) * R + r) * S + s);
  return (blk * ic_bn + c % ic_bn) * oc_bn + k % oc_bn;
}

/* OIHW <-> OIHW[ic_bn]i[oc_bn]o, one direction or the other. */
static int copy_weights(int K, int C, int R, int S, int ic_bn, int oc_bn, const float *src,
                        float *dst, int to_blocked) {
  if (!weights_check(K, C, R, S, ic_bn, oc_bn, src, dst)) return HWT_EINVAL;
  for (int k = 0; k < K; k++)
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) {
          size_t plain = (((size_t)k * C + c) * R + r) * S + s;
          size_t blocked = blocked_offset(C, R, S, ic_bn, oc_bn, k, c, r, s);
          if (to_blocked)
            dst[blocked] = src[plain];
          else
            dst[plain] = src[blocked];
        }
  return HWT_OK;
}

int hwt_layout_oihw_to_blocked(int K, int C, int R, int S, int ic_bn, int oc_bn,
                               const float *src, float *dst) {
  return copy_weights(K, C, R, S, ic_bn, oc_bn, src, dst, 1);
}

int hwt_layout_blocked_to_oihw(int K, int C, int R, int S, int ic_bn, int oc_bn,
                               const float *src, float *dst) {
  return copy_weights(K, C, R, S, ic_bn, oc_bn, src, dst, 0);
}
