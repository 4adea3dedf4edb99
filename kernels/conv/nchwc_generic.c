/* NCHW[x]c CONV row kernel, portable C: the same loop nest as the SIMD
 * variants (NeoCPU Algorithm 1) with the register block held in an L1
 * scratch of reg_n x oc_bn floats; the innermost loop runs over oc_bn
 * contiguous output channels so the compiler vectorises it. */
#include "conv_internal.h"

static void block(const hwt_conv_row_args *a, const float *in, float *out, int rb) {
  const int icb = a->ic_bn, ocb = a->oc_bn, S = a->S;
  float *acc = a->scratch;
  for (int j = 0; j < rb; j++)
    for (int o = 0; o < ocb; o++)
      acc[j * ocb + o] = !a->first ? out[(long)j * ocb + o] : a->bias ? a->bias[o] : 0.0f;
  for (int cb = 0; cb < a->CB; cb++)
    for (int kh = 0; kh < a->R; kh++) {
      const float *ip = in + cb * a->in_cb_stride + kh * a->in_row_stride;
      const float *wp = a->w + (long)(cb * a->R + kh) * S * icb * ocb;
      /* unroll_ker swaps the kw and ic loops, as in the SIMD variants. */
      int outer = a->unroll_ker ? icb : S, inner = a->unroll_ker ? S : icb;
      for (int i0 = 0; i0 < outer; i0++)
        for (int i1 = 0; i1 < inner; i1++) {
          int kw = a->unroll_ker ? i1 : i0, ic = a->unroll_ker ? i0 : i1;
          const float *wq = wp + (long)(kw * icb + ic) * ocb;
          const float *iq = ip + ic * a->in_ic_stride + a->koff[kw];
          for (int j = 0; j < rb; j++) {
            float xv = iq[j];
            float *aj = acc + j * ocb;
            for (int o = 0; o < ocb; o++) aj[o] += xv * wq[o];
          }
        }
    }
  /* The residual tile sits where this block's output goes. */
  const float *res = a->last && a->res ? a->res + (out - a->out) : 0;
  for (int j = 0; j < rb; j++)
    for (int o = 0; o < ocb; o++) {
      float v = acc[j * ocb + o];
      if (res) v += res[(long)j * ocb + o];
      if (a->last) v = hwt_conv_act(v, a->relu, a->relu_max);
      out[(long)j * ocb + o] = v;
    }
}

static void row(const hwt_conv_row_args *a) {
  /* The accumulators live in memory here, so rows gain nothing together. */
  for (int h = 0; h < a->rows; h++)
    for (int ow0 = 0; ow0 < a->OW; ow0 += a->reg_n) {
      int rb = a->OW - ow0 < a->reg_n ? a->OW - ow0 : a->reg_n;
      block(a, a->in + h * a->in_oh_stride + ow0,
            a->out + h * a->out_row_stride + (long)ow0 * a->oc_bn, rb);
    }
}

static void stage_tile(const float *src, long src_stride, int n, int bn, float *dst,
                       long dst_stride) {
  for (int i = 0; i < bn; i++)
    for (int pos = 0; pos < n; pos++) dst[i * dst_stride + pos] = src[pos * src_stride + i];
}

static void phase_copy(const float *src, int step, int n, float *dst) {
  for (int pos = 0; pos < n; pos++) dst[pos] = src[(long)pos * step];
}

static void deint2(const float *src, int n, float *even, float *odd) {
  for (int pos = 0; pos < n; pos++) {
    even[pos] = src[2 * pos];
    odd[pos] = src[2 * pos + 1];
  }
}

static void epilogue(float *y, const float *res, long n, float bias, int relu, float relu_max,
                     int act) {
  for (long i = 0; i < n; i++) y[i] = hwt_conv_act(y[i] + bias + (res ? res[i] : 0.0f), relu,
                                                   relu_max);
  hwt_conv_act_rows(HWT_ISA_GENERIC, act, y, 0, 1, n);
}

static void epilogue_t(float *y, long ldy, const float *c, long ldc, const float *res,
                       int pixels, int channels, int relu, float relu_max, int act) {
  for (int k = 0; k < channels; k++) {
    float *yk = y + (long)k * ldy;
    for (int i = 0; i < pixels; i++)
      yk[i] = hwt_conv_act(c[(long)i * ldc + k] + (res ? res[(long)k * ldy + i] : 0.0f), relu,
                           relu_max);
    hwt_conv_act_rows(HWT_ISA_GENERIC, act, yk, 0, 1, pixels);
  }
}

/* SSE2 auto-vectorised over oc_bn with the accumulators in an L1 scratch,
 * so longer oc runs pay off beyond the 4 lanes: oc_bn 16 / reg_n 8 measured
 * 4.3 GFLOPS vs 2.3 (8) and 1.2 (4), reg_n 4: 2.7 (64x56x56 3x3). Hence a
 * nominal vector of 8 floats, blocks of up to 8 pixels, two "vectors" (16
 * channels) preferred. */
const hwt_conv_variant hwt_conv_variant_generic = {
    .vec = 8, .nv_max = 2, .caps = {0, 8, 8, 8, 8}, .block_scratch = 1,
    /* 1x1 images only: the template 1.26-1.40x the GEMM there (1152->48,
     * 48->1152, 672->32), 0.34-0.37x at 7x7 and 14x14 (Zen 4, 1 thread,
     * medians of 21 alternated runs, under load). Least K: conv.c's
     * measurement (Zen 3, AVX2), not repeated for this variant. */
    .pw_max_hw = 1, .pw_min_k = 32, .row = row, .stage = stage_tile, .phase = phase_copy, .deint2 = deint2,
    .epilogue = epilogue, .pw_t_max_hw = 0, .epilogue_t = epilogue_t,
    .stem = &hwt_conv_stem_variant_generic};
