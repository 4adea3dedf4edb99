/* Winograd F(2x2, 3x3) transforms (Lavin and Gray, 2016), compiled once per
 * SIMD ISA over kernels/common/vec.h (kernels.cmake), vectorised over
 * channels: every call transforms one tile for `lanes` consecutive
 * channels, HV_W at a time, the last vector masked.
 *
 *   input:  V = B^T d B, d the 4x4 input patch,
 *           B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   output: Y = A^T m A, m the 4x4 products summed over channels,
 *           A^T = [1 1 1 0; 0 1 -1 -1]
 * The weight transform U = G g G^T runs once, at packing (winograd.c). All
 * coefficients are 0 and +-1, so the transforms round no more than the sum
 * they replace. */
#include "../common/vec.h"
#include "conv_internal.h"
#include "act_vec.h"

/* One vector of the input transform: patch element (i, j) at
 * src + i * rs + j * cs; element xi of V at v[xi] + off (none where v[xi]
 * is NULL: no output of the tile needs it). */
HV_AI void in_vec(const float *src, long rs, long cs, float *const *v, long off, hv_mask m,
                  const int MT) {
  hv_f32 d[4][4], t[4][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
      d[i][j] = MT ? hv_load_mask(src + i * rs + j * cs, m) : hv_load(src + i * rs + j * cs);
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {  /* B^T d: rows */
    t[0][j] = hv_sub(d[0][j], d[2][j]);
    t[1][j] = hv_add(d[1][j], d[2][j]);
    t[2][j] = hv_sub(d[2][j], d[1][j]);
    t[3][j] = hv_sub(d[1][j], d[3][j]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {  /* (B^T d) B: columns */
    hv_f32 r[4] = {hv_sub(t[i][0], t[i][2]), hv_add(t[i][1], t[i][2]),
                   hv_sub(t[i][2], t[i][1]), hv_sub(t[i][1], t[i][3])};
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      float *dst = v[i * 4 + j];
      if (!dst) continue;
      if (MT)
        hv_store_mask(dst + off, m, r[j]);
      else
        hv_store(dst + off, r[j]);
    }
  }
}

static void in_tile(const float *src, long rs, long cs, int lanes, float *const *v, long off) {
  int l = 0;
  for (; l + HV_W <= lanes; l += HV_W) in_vec(src + l, rs, cs, v, off + l, hv_first(HV_W), 0);
  if (l < lanes) in_vec(src + l, rs, cs, v, off + l, hv_first(lanes - l), 1);
}

/* A tile's 2x2 outputs y (+ bias, + res[q] when res), ReLU if relu, then
 * the activation act in registers (act_vec.h), into dst[q] (q = row * 2 +
 * column; NULL: outside the output, skipped). */
HV_AI void store_tile(hv_f32 y[2][2], const float *bias, int relu, float relu_max, int act,
                      float *const dst[4], const float *const *res, long off, hv_mask mk,
                      const int MT) {
  const hv_f32 b = bias ? (MT ? hv_load_mask(bias, mk) : hv_load(bias)) : hv_zero();
  const hv_f32 zero = hv_zero(), hi = hv_set1(relu_max);
  const int clamp = relu && relu_max > 0.0f;
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    float *p = dst[q];
    if (!p) continue;
    hv_f32 r = hv_add(y[q / 2][q % 2], b);
    if (res) r = hv_add(r, MT ? hv_load_mask(res[q] + off, mk) : hv_load(res[q] + off));
    /* max(0, r) and min(hi, r) keep a NaN (their second operand wins), as
       ONNX Runtime's Relu and Clip and the other conv epilogues do */
    if (relu) r = hv_max(zero, r);
    if (clamp) r = hv_min(hi, r);
    r = hwt_conv_act_vec(r, act);
    if (MT)
      hv_store_mask(p + off, mk, r);
    else
      hv_store(p + off, r);
  }
}

/* One vector of the output transform: m[xi] at mp[xi] + moff; Y (2x2) +
 * bias (+ res[q], when res), ReLU if relu, the activation act, into dst[q]
 * (q = row * 2 + column; NULL: outside the output, skipped). */
HV_AI void out_vec(const float *const *mp, long moff, const float *bias, int relu,
                   float relu_max, int act, float *const dst[4], const float *const *res,
                   long off, hv_mask mk, const int MT) {
  hv_f32 x[4][4], s[2][4];
#pragma GCC unroll 16
  for (int q = 0; q < 16; q++)
    x[q / 4][q % 4] = MT ? hv_load_mask(mp[q] + moff, mk) : hv_load(mp[q] + moff);
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    s[0][j] = hv_add(hv_add(x[0][j], x[1][j]), x[2][j]);
    s[1][j] = hv_sub(hv_sub(x[1][j], x[2][j]), x[3][j]);
  }
  hv_f32 y[2][2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    y[i][0] = hv_add(hv_add(s[i][0], s[i][1]), s[i][2]);
    y[i][1] = hv_sub(hv_sub(s[i][1], s[i][2]), s[i][3]);
  }
  store_tile(y, bias, relu, relu_max, act, dst, res, off, mk, MT);
}

static void out_tile(const float *const *mp, long moff, int lanes, const float *bias, int relu,
                     float relu_max, int act, float *const dst[4], const float *const *res) {
  int l = 0;
  for (; l + HV_W <= lanes; l += HV_W)
    out_vec(mp, moff + l, bias ? bias + l : 0, relu, relu_max, act, dst, res, l, hv_first(HV_W), 0);
  if (l < lanes)
    out_vec(mp, moff + l, bias ? bias + l : 0, relu, relu_max, act, dst, res, l,
            hv_first(lanes - l), 1);
}

/* Stride 2 (winograd.c: F(2x2, 3x3) at stride 2): a 5x5 input patch per
 * 2x2 output tile, whose even columns (0, 2, 4) meet taps 0 and 2 -- a
 * 2-tap stride-1 convolution, Winograd F(2, 2) -- and odd ones (1, 3) tap 1:
 *   V = B^T d B, B^T = [1 0 -1 0 0; 0 0 1 0 0; 0 0 -1 0 1; 0 1 0 0 0;
 *                       0 0 0 1 0]
 *   Y = A^T m A, A^T = [1 1 0 1 0; 0 1 1 0 1]
 * 25 products per tile where the direct template has 36; coefficients 0
 * and +-1 again. */
HV_AI void in_vec5(const float *src, long rs, long cs, float *const *v, long off, hv_mask m,
                   const int MT) {
  hv_f32 t[5][5];
#pragma GCC unroll 5
  for (int i = 0; i < 5; i++) {  /* d B: each patch row's columns */
    hv_f32 d[5];
#pragma GCC unroll 5
    for (int j = 0; j < 5; j++)
      d[j] = MT ? hv_load_mask(src + i * rs + j * cs, m) : hv_load(src + i * rs + j * cs);
    t[i][0] = hv_sub(d[0], d[2]);
    t[i][1] = d[2];
    t[i][2] = hv_sub(d[4], d[2]);
    t[i][3] = d[1];
    t[i][4] = d[3];
  }
#pragma GCC unroll 5
  for (int j = 0; j < 5; j++) {  /* B^T (d B): rows */
    hv_f32 r[5] = {hv_sub(t[0][j], t[2][j]), t[2][j], hv_sub(t[4][j], t[2][j]), t[1][j],
                   t[3][j]};
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++) {
      float *dst = v[hwt_wino_s2_slot(i, j)];
      if (!dst) continue;
      if (MT)
        hv_store_mask(dst + off, m, r[i]);
      else
        hv_store(dst + off, r[i]);
    }
  }
}

static void in_tile_s2(const float *src, long rs, long cs, int lanes, float *const *v,
                       long off) {
  int l = 0;
  for (; l + HV_W <= lanes; l += HV_W) in_vec5(src + l, rs, cs, v, off + l, hv_first(HV_W), 0);
  if (l < lanes) in_vec5(src + l, rs, cs, v, off + l, hv_first(lanes - l), 1);
}

HV_AI void out_vec5(const float *const *mp, long moff, const float *bias, int relu,
                    float relu_max, int act, float *const dst[4], const float *const *res,
                    long off, hv_mask mk, const int MT) {
  hv_f32 s[2][5];
#pragma GCC unroll 5
  for (int j = 0; j < 5; j++) {  /* A^T m: two rows */
    hv_f32 x[5];
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++)
      x[i] = MT ? hv_load_mask(mp[hwt_wino_s2_slot(i, j)] + moff, mk)
                : hv_load(mp[hwt_wino_s2_slot(i, j)] + moff);
    s[0][j] = hv_add(hv_add(x[0], x[1]), x[3]);
    s[1][j] = hv_add(hv_add(x[1], x[2]), x[4]);
  }
  hv_f32 y[2][2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    y[i][0] = hv_add(hv_add(s[i][0], s[i][1]), s[i][3]);
    y[i][1] = hv_add(hv_add(s[i][1], s[i][2]), s[i][4]);
  }
  store_tile(y, bias, relu, relu_max, act, dst, res, off, mk, MT);
}

static void out_tile_s2(const float *const *mp, long moff, int lanes, const float *bias,
                        int relu, float relu_max, int act, float *const dst[4],
                        const float *const *res) {
  int l = 0;
  for (; l + HV_W <= lanes; l += HV_W)
    out_vec5(mp, moff + l, bias ? bias + l : 0, relu, relu_max, act, dst, res, l,
             hv_first(HV_W), 0);
  if (l < lanes)
    out_vec5(mp, moff + l, bias ? bias + l : 0, relu, relu_max, act, dst, res, l,
             hv_first(lanes - l), 1);
}

const hwt_wino_variant HWT_VARIANT(hwt_wino_variant) = {
    .vec = HV_W, .in_tile = in_tile, .out_tile = out_tile, .in_tile_s2 = in_tile_s2,
    .out_tile_s2 = out_tile_s2};
