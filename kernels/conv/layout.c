/* Layout transforms: NCHW <-> NCHW[x]c <-> NCHW[y]c for activations and
 * OIHW <-> OIHW[x]i[y]o for weights (NeoCPU Section 3.2). */
#include <string.h>
#include "hwtune/conv.h"

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

/* Work unit: (n, group of channels), the group being the destination block so
 * each thread writes whole blocks. Within a unit, spatial tiles of 64 keep
 * the strided side of the copy inside L1 (64 positions x a block <= 64 KiB
 * for blocks up to 256). */
void hwt_layout_run_part(int N, int C, long HW, int src_bn, int dst_bn, const float *src,
                         float *dst, int tid, int nth) {
  int G = dst_bn ? dst_bn : (src_bn ? src_bn : C);
  long groups = (long)N * (C / G);
  long lo = groups * tid / nth, hi = groups * (tid + 1) / nth;
  if (src_bn == dst_bn) {
    /* Same layout: units are contiguous in both tensors. */
    size_t per = (size_t)G * HW;
    memcpy(dst + per * lo, src + per * lo, per * (size_t)(hi - lo) * sizeof(float));
    return;
  }
  const long TILE = 64;
  for (long u = lo; u < hi; u++) {
    int n = (int)(u / (C / G)), c0 = (int)(u % (C / G)) * G;
    for (long t0 = 0; t0 < HW; t0 += TILE) {
      long t1 = t0 + TILE < HW ? t0 + TILE : HW;
      for (int c = c0; c < c0 + G; c++) {
        const float *s = src + offset(C, HW, src_bn, n, c, 0);
        float *o = dst + offset(C, HW, dst_bn, n, c, 0);
        long ss = src_bn ? src_bn : 1, ds = dst_bn ? dst_bn : 1;
        for (long hw = t0; hw < t1; hw++) o[hw * ds] = s[hw * ss];
      }
    }
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
