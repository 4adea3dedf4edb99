/* Direct int8 conv variants vs the plain-C reference (hwt_qconv_ref):
 * every int8 variant this CPU runs (the AVX-512 row only with
 * AVX512-VNNI), 1x1 / 3x3 / 7x7 windows with stride, padding (the zero
 * point's pixel), asymmetric end padding, dilation, channel counts off the
 * k group (icp > ic) and off the tile (oc vs nr, pixels vs mr), outputs
 * as float, accumulator, requantised float, u8 and s8, NCHW (channel stride H*W) and
 * channels-last, ReLU, ORT's int32 bias; each case run as 1..3 pixel
 * shares whose input is the slab of rows their windows read (ih0 > 0), and
 * 1..2 channel parts. The int32 sums are exact in every variant and the
 * epilogue is the GEMM's, so outputs must match bit for bit. Small sizes:
 * this also runs under ASan/UBSan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/qconv.h"
#include "check.h"

static unsigned rnd_state = 4242u;
static int rnd(int lo, int hi) { /* inclusive */
  rnd_state = rnd_state * 1664525u + 1013904223u;
  return lo + (int)((rnd_state >> 8) % (unsigned)(hi - lo + 1));
}

typedef struct {
  int ic, oc, h, w, k, s, pad, pad_end, dil;
} shape;

static size_t out_size(hwt_qout_type t) {
  return t == HWT_QOUT_U8 || t == HWT_QOUT_S8 ? 1 : 4;
}

static void check_case(hwt_isa isa, shape sh, hwt_qout_type out, int relu, int nchw, int shares,
                       int cparts) {
  hwt_qconv_desc d = {sh.ic, sh.oc, sh.h, sh.w, 0, 0, sh.k, sh.k, sh.s, sh.s,
                      sh.pad, sh.pad, sh.dil, sh.dil};
  d.oh = (sh.h + sh.pad + sh.pad_end - (sh.k - 1) * sh.dil - 1) / sh.s + 1;
  d.ow = (sh.w + sh.pad + sh.pad_end - (sh.k - 1) * sh.dil - 1) / sh.s + 1;
  hwt_qconv_plan p;
  CHECK(hwt_qconv_plan_make(&d, isa, &p) == HWT_OK);
  const int icp = p.icp, P = d.oh * d.ow;
  CHECK(icp >= d.ic && icp % 4 == 0);
  const size_t nx = (size_t)d.h * d.w * icp;
  uint8_t *x = malloc(nx);
  for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd(0, 255);
  const size_t nw = (size_t)d.oc * d.ic * d.kh * d.kw;
  int8_t *w = malloc(nw);
  for (size_t i = 0; i < nw; i++) w[i] = (int8_t)rnd(-128, 127);
  float *scale = malloc((size_t)d.oc * 4), *bias = malloc((size_t)d.oc * 4);
  int32_t *bias_i = malloc((size_t)d.oc * 4);
  const int K = d.ic * d.kh * d.kw;
  for (int j = 0; j < d.oc; j++) {
    scale[j] = (float)rnd(1, 1000) / (1000.0f * 64.0f * (float)(K + 1));
    bias[j] = (float)rnd(-500, 500) / 100.0f;
    bias_i[j] = rnd(-3000, 3000);
  }
  hwt_qgemm_epi e = {0};
  e.za = rnd(0, 255);
  e.scale = scale;
  e.bias = d.oc % 2 ? NULL : bias;
  e.bias_i = d.oc % 2 ? bias_i : NULL;
  e.zy = rnd(-10, 10) + (out == HWT_QOUT_U8 ? 128 : 0);
  e.qmin = 0;
  e.qmax = 255;
  e.relu = relu;
  e.out = out;
  e.rs_c = nchw ? 1 : d.oc;
  e.cs_c = nchw ? P : 1;
  const size_t nc = (size_t)P * d.oc * out_size(out) + 1;
  void *C = malloc(nc), *R = malloc(nc);
  memset(C, 0xA5, nc);
  memset(R, 0xA5, nc);
  e.C = R;
  CHECK(hwt_qconv_ref(&d, icp, x, w, &e) == HWT_OK);

  void *pw = aligned_alloc(64, p.packed_w_bytes ? (p.packed_w_bytes + 63) / 64 * 64 : 64);
  int32_t *colsum = malloc((size_t)d.oc * 4);
  void *ws = aligned_alloc(64, (p.ws_bytes + 63) / 64 * 64);
  CHECK(hwt_qconv_pack_w(&p, w, pw, colsum) == HWT_OK);
  e.C = C;
  const int panels = (d.oc + p.g.nr - 1) / p.g.nr;
  for (int s = shares - 1; s >= 0; s--) {
    const int p0 = P * s / shares, p1 = P * (s + 1) / shares;
    if (p0 >= p1) continue;
    /* the slab of input rows this share reads, copied so that reads above
       or below it land outside the allocation (ASan) */
    int ih0 = (p0 / d.ow) * d.sh - d.pt, ih1 = ((p1 - 1) / d.ow) * d.sh - d.pt + (d.kh - 1) * d.dh;
    ih0 = ih0 < 0 ? 0 : ih0;
    ih1 = ih1 >= d.h ? d.h - 1 : ih1;
    const size_t rows = ih1 >= ih0 ? (size_t)(ih1 - ih0 + 1) : 0;
    uint8_t *slab = malloc(rows * d.w * icp + 1);
    memcpy(slab, x + (size_t)ih0 * d.w * icp, rows * d.w * icp);
    for (int c = cparts - 1; c >= 0; c--) {
      const int n0 = panels * c / cparts * p.g.nr;
      const int n1e = panels * (c + 1) / cparts * p.g.nr, n1 = n1e < d.oc ? n1e : d.oc;
      if (n0 < n1) hwt_qconv_compute(&p, slab, ih0, pw, colsum, &e, p0, p1, n0, n1, ws);
    }
    free(slab);
  }
  CHECK(memcmp(C, R, nc) == 0,
        "%s ic=%d oc=%d %dx%d k=%d s=%d pad=%d/%d dil=%d out=%d relu=%d nchw=%d shares=%d "
        "cparts=%d",
        hwt_qgemm_variant_name(isa), d.ic, d.oc, d.h, d.w, sh.k, sh.s, sh.pad, sh.pad_end,
        sh.dil, out, relu, nchw, shares, cparts);
  free(x), free(w), free(scale), free(bias), free(bias_i), free(C), free(R), free(pw),
      free(colsum), free(ws);
}

/* hwt_qconv_to_hwc against its definition (hwtune/qconv.h), per variant:
 * channel counts around the 8 / 16 channel blocks and the 4-byte pixel
 * padding, pixel counts around the 8 / 16 pixel steps and the 64-pixel
 * pass, values out of range and between integers, s8 (shift 128) and u8;
 * nothing written past the n pixels. */
static int check_hwc(hwt_isa isa) {
  const int ics[] = {1, 3, 4, 5, 8, 12, 15, 16, 17, 20, 33, 64};
  const int ns[] = {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130};
  int cases = 0;
  for (int a = 0; a < (int)(sizeof ics / sizeof ics[0]); a++)
    for (int b = 0; b < (int)(sizeof ns / sizeof ns[0]); b++) {
      const int ic = ics[a], n = ns[b], icp = (ic + 3) / 4 * 4, plane = n + 3;
      const float shift = (a + b) % 2 ? 128.0f : 0.0f;
      hwt_qconv_desc d = {ic, 4, 1, n, 1, n, 1, 1, 1, 1, 0, 0, 1, 1};
      hwt_qconv_plan p;
      CHECK(hwt_qconv_plan_make(&d, isa, &p) == HWT_OK);
      float *x = malloc((size_t)ic * plane * sizeof(float));
      for (int i = 0; i < ic * plane; i++) {
        const int r = rnd(0, 9);
        x[i] = r == 0   ? (float)rnd(-400, -1) - 0.25f
               : r == 1 ? (float)rnd(256, 500) + 0.5f
               : r == 2 ? (float)rnd(0, 254) + 0.75f
                        : (float)rnd(-128, 255);
      }
      const size_t nd = (size_t)n * icp;
      uint8_t *got = malloc(nd + 64), *want = malloc(nd + 64);
      memset(got, 0xA5, nd + 64);
      memset(want, 0xA5, nd + 64);
      for (int i = 0; i < n; i++)
        for (int c = 0; c < icp; c++) {
          float v = c < ic ? x[c * plane + i] + shift : 0.0f;
          v = v < 0.0f ? 0.0f : v;
          v = v > 255.0f ? 255.0f : v;
          want[(size_t)i * icp + c] = (uint8_t)(int)v;
        }
      hwt_qconv_to_hwc(&p, x, plane, n, shift, got);
      CHECK(memcmp(got, want, nd + 64) == 0, "to_hwc %s ic=%d n=%d shift=%g",
            hwt_qgemm_variant_name(isa), ic, n, shift);
      free(x), free(got), free(want);
      cases++;
    }
  return cases;
}

int main(void) {
  int cases = 0;
  const shape shapes[] = {
      {1, 1, 1, 1, 1, 1, 0, 0, 1},    {3, 5, 9, 7, 3, 1, 1, 1, 1},
      {16, 32, 6, 6, 1, 1, 0, 0, 1},  {8, 33, 10, 9, 3, 2, 1, 1, 1},
      {3, 16, 15, 13, 7, 2, 3, 3, 1}, {20, 17, 8, 8, 1, 2, 0, 0, 1},
      {13, 40, 7, 11, 3, 1, 2, 0, 2}, {64, 70, 5, 5, 3, 1, 1, 1, 1},
      {6, 9, 12, 5, 2, 1, 0, 1, 1},   {130, 64, 4, 4, 1, 1, 0, 0, 1},
  };
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  /* The float NCHW outputs every engine qconv2d writes take the variants'
     transposing epilogues (kernels/qconv/epi_*.c), u8 channels-last ones
     their byte rows: whole tiles (P and oc
     multiples of 8 x 32 and 6 x 16), partial ones in pixels or channels,
     odd widths, stride 2, 1x1 / 3x3 / 7x7, each with and without ReLU */
  const shape nchw_shapes[] = {
      {8, 64, 8, 8, 1, 1, 0, 0, 1},   {12, 48, 7, 12, 3, 1, 1, 1, 1},
      {4, 96, 11, 11, 7, 2, 3, 3, 1}, {24, 32, 9, 15, 3, 2, 1, 1, 1},
      {7, 19, 5, 7, 1, 1, 0, 0, 1},   {16, 40, 13, 13, 3, 1, 1, 1, 1},
  };
  const int nnchw = (int)(sizeof nchw_shapes / sizeof nchw_shapes[0]);
  const hwt_qout_type float_outs[] = {HWT_QOUT_F32, HWT_QOUT_ACC, HWT_QOUT_QF32};
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (hwt_qgemm_variant_for((hwt_isa)isa) != isa) {
      hwt_qconv_desc d = {4, 4, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1};
      hwt_qconv_plan p;
      CHECK(hwt_qconv_plan_make(&d, (hwt_isa)isa, &p) == HWT_EISA, "isa %d", isa);
      continue;
    }
    for (int s = 0; s < nshapes; s++)
      for (int out = 0; out < 5; out++) {
        check_case((hwt_isa)isa, shapes[s], (hwt_qout_type)out, (s + out) % 3 == 0,
                   (s + out) % 2, 1 + (s + out) % 3, 1 + s % 2);
        cases++;
      }
    cases += check_hwc((hwt_isa)isa);
    for (int s = 0; s < nnchw; s++)
      for (int out = 0; out < 3; out++)
        for (int relu = 0; relu < 2; relu++) {
          check_case((hwt_isa)isa, nchw_shapes[s], float_outs[out], relu, 1, 1 + (s + out) % 3,
                     1 + s % 2);
          cases++;
        }
    /* u8 channels-last rows (the byte links between the engine's convs) */
    for (int s = 0; s < nnchw; s++)
      for (int relu = 0; relu < 2; relu++) {
        check_case((hwt_isa)isa, nchw_shapes[s], HWT_QOUT_U8, relu, 0, 1 + s % 3, 1 + relu);
        cases++;
      }
  }
  hwt_qconv_desc bad = {0, 4, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1}; /* no input channels */
  hwt_qconv_plan p;
  CHECK(hwt_qconv_plan_make(&bad, HWT_ISA_GENERIC, &p) == HWT_EINVAL);
  return check_verdict("qconv: %d cases match the reference\n", cases);
}
