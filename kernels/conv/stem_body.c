/* The stem kernel body, compiled once per ISA over kernels/common/vec.h
 * (kernels.cmake): NCHW CONVs of few input channels, a CNN's first conv on
 * the image (3 -> 32, 3x3, stride 2 in MobileNetV2; 3 -> 64, 7x7, stride 2
 * in ResNet-50).
 *
 * With 3 input channels the NCHW[x]c template's reduction is 27 (3x3) or
 * 147 (7x7) steps a register block, and its blocks hold output channels
 * in the vectors, so each output row left as [OW][oc_bn] to be transposed
 * into NCHW: a fifth of the 3x3 stem's time (Zen 4, AVX-512, 1 thread,
 * perf: 52.6% tile, 18.7% the transposes, 7.4% the staging). Here a
 * vector holds output pixels of one output row instead: each thread
 * stages the input rows its output rows read (zero-padded, split into
 * stride phases: padded column c at phase c % sw, position c / sw, so the
 * pixels of a vector read consecutive floats at every tap) into a ring
 * holding a band of output rows' input rows, and per band a register block
 * of OC output channels x PV vectors of pixels reduces over C x R x S taps
 * with one broadcast weight per PV FMAs; the epilogue (bias as the start,
 * residual, ReLU / ReLU6, SiLU / HardSwish: act_vec.h) runs in registers
 * and the vectors are stored straight into the NCHW output rows, the last
 * one masked. */
#include <string.h>
#include "../common/vec.h"
#include "conv_internal.h"
#include "act_vec.h"

/* Register block: OC output channels x PV vectors of pixels, OC * PV
 * accumulators. Each step (one input channel at one tap) loads PV input
 * vectors and broadcasts OC weights. Measured on Zen 4 (1 thread, least of
 * 11-21 interleaved thread-time samples, ctypes plans, under load 2-7),
 * 3 -> 32 3x3 and 3 -> 64 7x7 stride 2 at 224x224, against the template's
 * default (rows one at a time then): AVX-512 4 x 6 (a 112-pixel row in
 * blocks of 4 and 3 vectors) 1.27-1.54x and 1.00-1.10x; 4 x 7 (pixel-outer:
 * 28 accumulators, 4 weights and an input overflow the 32 registers)
 * 1.10-1.18x and 0.96-0.97x; 8 x 3 1.34-1.44x and 1.00-1.04x; 5 x 5 0.88x /
 * 0.94x of 4 x 6, 3 x 7 0.73x / 0.67x of it. AVX2 4 x 2: 1.83x and 1.13x;
 * 4 x 3 (16 registers, no spare) 1.66x and 1.06x, 2 x 6 1.28x and 0.81x,
 * 3 x 4 1.32x and 0.91x. */
#define OC HV_BY_ISA(4, 4, 4)
#define PV HV_BY_ISA(4, 2, 6)
_Static_assert(OC * PV <= 28, "block() keeps at most 28 accumulators");

/* One staged input row of one channel, xr the input row or NULL (a padding
 * row: all zeros): sw phases of pl floats, phase q's position j holding
 * padded column q + j * sw, i.e. input column q + j * sw - pad_w where it
 * exists and 0 elsewhere. Stride 2 by the template's deinterleave (both
 * phases in one pass), other strides its phase copy. */
static void stage_row(const hwt_conv_desc *d, const hwt_conv_variant *cv, long pl,
                      const float *xr, float *dst) {
  const int sw = d->stride_w, pw = d->pad_w, W = d->W;
  if (!xr) {
    memset(dst, 0, sizeof(float) * (size_t)(sw * pl));
    return;
  }
  long j0[2] = {0, 0}, j1[2] = {0, 0};
  for (int q = 0; q < sw; q++) {
    float *o = dst + q * pl;
    long a = pw > q ? (pw - q + sw - 1) / sw : 0;
    long b = (long)W - 1 + pw - q < 0 ? 0 : ((long)W - 1 + pw - q) / sw + 1;
    if (a > pl) a = pl;
    if (b > pl) b = pl;
    if (b < a) b = a;
    memset(o, 0, sizeof(float) * (size_t)a);
    memset(o + b, 0, sizeof(float) * (size_t)(pl - b));
    if (sw == 1)
      memcpy(o + a, xr + a - pw, sizeof(float) * (size_t)(b - a));
    else if (sw == 2)
      j0[q] = a, j1[q] = b;
    else if (b > a)
      cv->phase(xr + (q + a * sw - pw), sw, (int)(b - a), o + a);
  }
  if (sw != 2) return;
  /* The positions both phases hold in one pass, the few others (next to
   * the padding) one float at a time. */
  const long a = j0[0] > j0[1] ? j0[0] : j0[1];
  long b = j1[0] < j1[1] ? j1[0] : j1[1];
  if (b < a) b = a;
  for (int q = 0; q < 2; q++) {
    float *o = dst + q * pl;
    for (long j = j0[q]; j < a && j < j1[q]; j++) o[j] = xr[q + 2 * j - pw];
    for (long j = b > j0[q] ? b : j0[q]; j < j1[q]; j++) o[j] = xr[q + 2 * j - pw];
  }
  if (b > a) cv->deint2(xr + (2 * a - pw), (int)(b - a), dst + a, dst + pl + a);
}

/* The arguments one output row's blocks share. */
typedef struct {
  /* The staged row of input channel ic at kernel row kh: rows[ic * R + kh]. */
  const float *rows[HWT_CONV_STEM_MAX_C * HWT_CONV_STEM_MAX_SPAN];
  long cs;                           /* floats between channels of a staged row */
  long koff[HWT_CONV_STEM_MAX_SPAN]; /* tap kw's offset in a staged row */
  long ohw;                          /* floats between output channel planes */
  int C, OW, K, relu, act;
  float relu_max;
} row_args;

/* One register block: output channels [k0, k0 + nk) of the row (nk <= OC;
 * w their packed weights [C][R][S][OC]) at pixels [ow, ow + NV * HV_W)
 * clipped to OW. R and S fixed at compile time (0: the run-time ones) so
 * the tap loop is unrolled; NV the block's vectors. The step loads the NV
 * input vectors first and then one weight at a time when they and the
 * accumulators fit the register file, else holds the OC weights and loads
 * one input vector at a time. */
HV_AI void block(const row_args *a, const float *w, const float *bias, const float *res,
                 float *y, int ow, int nk, int Rr, int Sr, const int R0, const int S0,
                 const int SW2, const int NV) {
  const int R = R0 ? R0 : Rr, S = S0 ? S0 : Sr;
  const long ph1 = a->cs / 2; /* SW2: phase 1 of a staged row */
  const int held_inputs = OC * NV + NV + 1 <= HV_REGS;
  hv_f32 acc[OC * PV];
#pragma GCC unroll 8
  for (int o = 0; o < OC; o++) {
    const hv_f32 b = bias && o < nk ? hv_set1(bias[o]) : hv_zero();
#pragma GCC unroll 8
    for (int j = 0; j < NV; j++) acc[o * NV + j] = b;
  }
  const float *wr = w;
  for (int t = 0; t < a->C * R; t++, wr += S * OC) {
    /* Stride 2, no dilation: tap kw at phase kw % 2, position kw / 2, two
     * base pointers and offsets the compiler folds into the loads (with the
     * offsets read from koff[], the 7x7 blocks ran out of registers for
     * the addresses). */
    const float *p0 = a->rows[t] + ow, *p1 = p0 + ph1;
#pragma GCC unroll 16
    for (int kw = 0; kw < S; kw++) {
      const float *ip = SW2 ? (kw & 1 ? p1 : p0) + kw / 2 : p0 + a->koff[kw];
      const float *wq = wr + kw * OC;
      if (held_inputs) {
        hv_f32 xv[PV];
#pragma GCC unroll 8
        for (int j = 0; j < NV; j++) xv[j] = hv_load(ip + j * HV_W);
#pragma GCC unroll 8
        for (int o = 0; o < OC; o++) {
          const hv_f32 wv = hv_set1(wq[o]);
#pragma GCC unroll 8
          for (int j = 0; j < NV; j++) acc[o * NV + j] = hv_fmadd(xv[j], wv, acc[o * NV + j]);
        }
      } else {
        hv_f32 wv[OC];
#pragma GCC unroll 8
        for (int o = 0; o < OC; o++) wv[o] = hv_set1(wq[o]);
#pragma GCC unroll 8
        for (int j = 0; j < NV; j++) {
          const hv_f32 xv = hv_load(ip + j * HV_W);
#pragma GCC unroll 8
          for (int o = 0; o < OC; o++) acc[o * NV + j] = hv_fmadd(xv, wv[o], acc[o * NV + j]);
        }
      }
    }
  }
  /* Epilogue in registers: + residual, ReLU (NaN kept, as max(0, x) of the
   * references), the clamp, then the activation four vectors at a time. */
  const int left = a->OW - ow;
  const hv_f32 zero = hv_zero(), hi = hv_set1(a->relu_max);
  const int clamp = a->relu && a->relu_max > 0.0f;
#pragma GCC unroll 8
  for (int o = 0; o < OC; o++)
#pragma GCC unroll 8
    for (int j = 0; j < NV; j++) {
      hv_f32 v = acc[o * NV + j];
      if (res && o < nk) v = hv_add(v, hv_load_mask(res + o * a->ohw + j * HV_W,
                                                    hv_first(left - j * HV_W)));
      if (a->relu) v = hv_max(zero, v);
      if (clamp) v = hv_min(hi, v);
      acc[o * NV + j] = v;
    }
  if (a->act) {
    hv_f32 g[4];
    /* Unrolled, so acc[] is never indexed at run time (that kept it in
     * memory through the whole reduction). */
#pragma GCC unroll 8
    for (int q = 0; q < OC * NV; q += 4) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) g[i] = q + i < OC * NV ? acc[q + i] : zero;
      hwt_conv_act_vec4(g, a->act);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++)
        if (q + i < OC * NV) acc[q + i] = g[i];
    }
  }
#pragma GCC unroll 8
  for (int o = 0; o < OC; o++) {
    if (o >= nk) break;
#pragma GCC unroll 8
    for (int j = 0; j < NV; j++) {
      float *yo = y + o * a->ohw + j * HV_W;
      if (left - j * HV_W >= HV_W)
        hv_store(yo, acc[o * NV + j]);
      else
        hv_store_mask(yo, hv_first(left - j * HV_W), acc[o * NV + j]);
    }
  }
}

/* A band of nb output rows (row b's staged rows in a[b], its output and
 * residual rows at y / res + b * OW in channel 0's plane), every output
 * channel: oc blocks outer, so a block's weights serve the whole band and
 * its OC planes are written nb rows (contiguous) at a time. Each row
 * splits into pieces of at most PV vectors, as equal as whole vectors
 * allow. */
HV_AI void out_band(const row_args *a, int nb, const float *w, const float *bias,
                    const float *res, float *y, int Rr, int Sr, const int R0, const int S0,
                    const int SW2) {
  const int vecs = (a->OW + HV_W - 1) / HV_W, pieces = (vecs + PV - 1) / PV;
  const long wblk = (long)a->C * (R0 ? R0 : Rr) * (S0 ? S0 : Sr) * OC;
  for (int k0 = 0, kb = 0; k0 < a->K; k0 += OC, kb++) {
    const int nk = a->K - k0 < OC ? a->K - k0 : OC;
    const float *wk = w + kb * wblk, *bk = bias ? bias + k0 : NULL;
    for (int b = 0; b < nb; b++) {
      const long at = k0 * a->ohw + (long)b * a->OW;
      const float *rk = res ? res + at : NULL;
      float *yk = y + at;
      for (int i = 0, v0 = 0; i < pieces; i++) {
        const int nv = hwt_conv_piece(vecs, pieces, i), ow = v0 * HV_W;
        const float *ro = rk ? rk + ow : NULL;
#define HWT_STEM_NV(n)                                                              \
  case n:                                                                           \
    if ((n) <= PV) block(a + b, wk, bk, ro, yk + ow, ow, nk, Rr, Sr, R0, S0, SW2, n); \
    break;
        switch (nv) {
          HWT_STEM_NV(1) HWT_STEM_NV(2) HWT_STEM_NV(3) HWT_STEM_NV(4) HWT_STEM_NV(5)
          HWT_STEM_NV(6) HWT_STEM_NV(7)
          default: break;
        }
#undef HWT_STEM_NV
        v0 += nv;
      }
    }
  }
}
_Static_assert(PV <= 7, "out_band lists blocks of up to 7 vectors");

static void rows(const hwt_conv_plan *p, const float *x, const float *w, const float *bias,
                 const float *res, float *y, float *ws, long lo, long hi) {
  const hwt_conv_desc *d = &p->d;
  const hwt_conv_variant *cv = hwt_conv_variant_for(HV_ISA);
  const int slots = hwt_conv_stem_slots(d), sw = d->stride_w, OH = p->OH;
  const long pl = hwt_conv_stem_pl(p, HV_W), slot_floats = (long)d->C * sw * pl;
  if (!hwt_conv_stem_ok(d)) return; /* the plan never makes one */
  float *zero = ws, *ring = ws + slot_floats;
  memset(zero, 0, sizeof(float) * (size_t)slot_floats);
  row_args a[HWT_CONV_STEM_BAND];
  a[0].cs = sw * pl;
  a[0].ohw = (long)OH * p->OW;
  a[0].C = d->C;
  a[0].OW = p->OW;
  a[0].K = d->K;
  a[0].relu = d->relu;
  a[0].relu_max = d->relu_max;
  a[0].act = d->act;
  for (int kw = 0; kw < d->S; kw++) {
    const int col = kw * d->dil_w;
    a[0].koff[kw] = (long)(col % sw) * pl + col / sw;
  }
  for (int b = 1; b < HWT_CONV_STEM_BAND; b++) a[b] = a[0];
  long tag[HWT_CONV_STEM_MAX_SLOTS]; /* the padded input row each slot holds */
  int image = -1;
  const int sw2 = sw == 2 && d->dil_w == 1;
  for (long u = lo; u < hi;) {
    const int n = (int)(u / OH), oh0 = (int)(u % OH);
    if (n != image) {
      for (int i = 0; i < slots; i++) tag[i] = -1;
      image = n;
    }
    /* The band: up to HWT_CONV_STEM_BAND rows of this image and share.
     * The ring holds every input row it reads (hwt_conv_stem_slots). */
    long nb = hi - u < HWT_CONV_STEM_BAND ? hi - u : HWT_CONV_STEM_BAND;
    if (nb > OH - oh0) nb = OH - oh0;
    for (int b = 0; b < nb; b++)
      for (int kh = 0; kh < d->R; kh++) {
        const long r = (long)(oh0 + b) * d->stride_h + (long)kh * d->dil_h, ih = r - d->pad_h;
        const float *rp = zero;
        if (ih >= 0 && ih < d->H) {
          float *slot = ring + (r % slots) * slot_floats;
          if (tag[r % slots] != r) {
            for (int c = 0; c < d->C; c++)
              stage_row(d, cv, pl, x + (((size_t)n * d->C + c) * d->H + ih) * d->W,
                        slot + c * a[0].cs);
            tag[r % slots] = r;
          }
          rp = slot;
        }
        for (int c = 0; c < d->C; c++) a[b].rows[c * d->R + kh] = rp + c * a[0].cs;
      }
    const size_t at = (size_t)n * d->K * a[0].ohw + (size_t)oh0 * p->OW;
    const float *ro = res ? res + at : NULL;
    const int k = (int)nb;
    if (sw2 && d->R == 3 && d->S == 3)
      out_band(a, k, w, bias, ro, y + at, 3, 3, 3, 3, 1);
    else if (sw2 && d->R == 7 && d->S == 7)
      out_band(a, k, w, bias, ro, y + at, 7, 7, 7, 7, 1);
    else if (sw2 && d->R == 5 && d->S == 5)
      out_band(a, k, w, bias, ro, y + at, 5, 5, 5, 5, 1);
    else
      out_band(a, k, w, bias, ro, y + at, d->R, d->S, 0, 0, 0);
    u += nb;
  }
}

const hwt_conv_stem_variant HWT_VARIANT(hwt_conv_stem_variant) = {
    .vec = HV_W, .oc = OC, .pv = PV, .rows = rows};
