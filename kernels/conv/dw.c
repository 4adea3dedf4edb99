/* Depthwise CONV driver: plan sizing and the split of the N x K x OH
 * output rows over threads, dispatch through the variant table. */
#include "dw_impl.h"
#include <math.h>
#include "conv_internal.h"

/* S > 64 is refused (the body keeps one offset per tap column on the
 * stack, as the dense template does, HWT_CONV_MAX_S): the engine runs such
 * a conv on the dense path once per group. */

/* Staged floats per chunk of output rows: 4096 (16 KiB) keeps the rows a
 * chunk reads in L1 (32 KiB on Zen 3/4) with its output rows beside them,
 * so each staged row is read R times from L1. Same budget as the pooling
 * kernel's block of rows (pool_impl.h). */
#define DW_STAGE_FLOATS 4096
/* The blocked path's staged rows: [cols][vec] each, 112 columns x 16
 * channels = 1792 floats, so 16384 floats (64 KiB, in L2) hold 9 rows: 7
 * output rows of a 3x3 stride-1 chunk, 2 rows restaged per chunk. */
#define DW_BLOCKED_STAGE_FLOATS 16384
/* Multiplier 1 on a vector ISA always runs blocked: the rows path took
 * 1.1x (32 ch 112x112) to 2.9x (144 ch 56x56 stride 2) its time on every
 * MobileNetV2 / EfficientNet depthwise shape tried, 7x7 to 112x112, 3x3
 * and 5x5, stride 1 and 2 (AVX-512, 1 thread, Zen 4 under load, medians of
 * 100 runs, alternated twice): 0.22/0.20, 0.50/0.24 (96 ch 112 s2),
 * 0.31/0.21 (144 ch 56), 0.14/0.075 (192 ch 28), 0.10/0.05 (384 ch 14),
 * 0.145/0.066 (960 ch 7), 0.095/0.05 ms (240 ch 14 5x5). The rows path
 * stays for multipliers above 1 and the portable build. */

static int plan_make(const hwt_conv_desc *d, int cg, int bn, hwt_isa isa,
                     hwt_dwconv_plan *out);

/* Units a thread gets at least on the NCHW[bn]c path when the rows allow:
 * 4 bounds the imbalance of an uneven split to a quarter of a share. */
#define DW_UNITS_PER_THREAD 4

int hwt_dwconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_dwconv_plan *out) {
  return plan_make(d, 1, 0, isa, out);
}

int hwt_dwconv_plan_nchwc(const hwt_conv_desc *d, int bn, hwt_isa isa, hwt_dwconv_plan *out) {
  if (!d || bn < 1 || d->K != d->C || d->C % bn) return HWT_EINVAL;
  return plan_make(d, 1, bn, isa, out);
}

int hwt_gconv_plan_make(const hwt_conv_desc *d, int group, hwt_isa isa, hwt_dwconv_plan *out) {
  if (!d || group < 1 || d->C % group || d->K != d->C) return HWT_EINVAL;
  const int cg = d->C / group, vec = hwt_dwconv_variant_for(isa)->vec;
  if (cg > 8 || vec % cg || vec == 1) return HWT_EINVAL;
  /* A group as wide as the vector (8 channels on AVX2) at stride 1 runs
   * faster on the dense template per group (conv_group.c), which holds
   * several pixels' accumulators where these lane permutes hold one vector:
   * ORT / hwtune went from 0.70-0.80 to 0.96-1.32 on ResNeXt-50's 256 ch
   * 28x28 and RegNetY-400MF's 104 ch 28x28 and 208 ch 14x14 (32, 13, 26
   * groups of 8), but from 0.77-0.80 to 0.67-0.70 on the stride-2 256 ch
   * 56x56 (Zen 3, AVX2, 1 thread, benchmarks/bench_grouped.py, two
   * alternated rounds, each against ORT interleaved); at 2 threads 0.83-0.89
   * -> 1.08-1.16 on ResNeXt's, 0.97-1.54 -> 1.19-2.03 on RegNetY's. On
   * AVX-512 (16 lanes: two groups of 8 a vector) these permutes stay. */
  if (cg == vec && d->stride_h == 1 && d->stride_w == 1) return HWT_EINVAL;
  return plan_make(d, cg, 0, isa, out);
}

static int plan_make(const hwt_conv_desc *d, int cg, int bn, hwt_isa isa,
                     hwt_dwconv_plan *out) {
  int OH, OW;
  if (!d || !out || d->N < 1 || d->C < 1 || d->K < d->C || d->K % d->C || d->S > 64 ||
      hwt_conv_out_dims(d, &OH, &OW) != HWT_OK)
    return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  hwt_dwconv_plan p = {0};
  p.d = *d;
  p.mult = d->K / d->C;
  p.cg = cg;
  p.relu_max = INFINITY;
  p.isa = isa;
  p.OH = OH;
  p.OW = OW;
  const hwt_dwconv_variant *v = hwt_dwconv_variant_for(isa);
  p.vec = v->vec;
  p.bn = bn;
  p.blocked = bn > 0 || (v->vec > 1 && p.mult == 1);
  if (p.blocked) {
    p.phases = 1;
    const long row = hwt_dwconv_cols(&p) * p.vec;
    long chunk = 1;
    while (chunk < OH && hwt_dwconv_span(&p, (int)chunk + 1) * row <= DW_BLOCKED_STAGE_FLOATS)
      chunk++;
    p.chunk = (int)chunk;
    const long span = hwt_dwconv_span(&p, p.chunk);
    p.ws_floats = ALIGN_FLOATS((size_t)d->R * d->S * cg * p.vec) +
                  ALIGN_FLOATS((size_t)hwt_dwconv_out_rows(&p) * OW * p.vec) +
                  ALIGN_FLOATS((size_t)(span * row)) +
                  (hwt_dwconv_narrow(&p) ? ALIGN_FLOATS((size_t)span * d->W * p.vec) : 0);
    *out = p;
    return HWT_OK;
  }
  p.phases = d->stride_w;
  /* A phase holds every output column's reads at every tap (tap s starts
   * (s * dil_w) / stride_w floats in) plus a vector's slack: the body
   * loads whole vectors past OW and masks only the stores. */
  const long wq = ALIGN_FLOATS((size_t)OW) + ((long)(d->S - 1) * d->dil_w) / d->stride_w + 16;
  p.wq = (int)ALIGN_FLOATS((size_t)wq);
  const long row = (long)p.phases * p.wq;
  long chunk = 1;
  while (chunk < OH && hwt_dwconv_span(&p, (int)chunk + 1) * row <= DW_STAGE_FLOATS) chunk++;
  p.chunk = (int)chunk;
  p.ws_floats = ALIGN_FLOATS((size_t)(hwt_dwconv_span(&p, p.chunk) * row));
  *out = p;
  return HWT_OK;
}

void hwt_dwconv_run_part(const hwt_dwconv_plan *p, const float *x, const float *w,
                         const float *bias, const float *res, float *y, float *ws, int tid,
                         int nth) {
  if (!p || nth < 1 || tid < 0 || tid >= nth) return;
  const hwt_conv_desc *d = &p->d;
  const hwt_dwconv_variant *v = hwt_dwconv_variant_for(p->isa);
  const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)p->OH * p->OW;
  if (p->blocked && p->bn) {
    /* Units: (image, block of bn, group of its vectors of channels, output
     * row); a thread's rows go in chunks, and each chunk through every
     * vector of the group in turn. A block wider than a vector
     * (channels-last when bn = C) interleaves its vectors in every pixel,
     * so a chunk's input rows stay in L2 for all of them, where a vector
     * at a time over the whole image streamed each row from memory once
     * per vector (and its neighbour's lines with it, by the adjacent-line
     * prefetch). One group holds all vectors unless the rows are too few
     * to share: then the groups give every thread DW_UNITS_PER_THREAD
     * units (a 7x7 image of 960 channels channels-last has 7 rows). */
    const int cbs = d->C / p->bn, nsub = (p->bn + p->vec - 1) / p->vec;
    const long rows = (long)d->N * cbs * p->OH;
    long ng = (DW_UNITS_PER_THREAD * (long)nth + rows - 1) / rows;
    if (ng > nsub) ng = nsub;
    const long units = rows * ng;
    const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
    for (long r = lo; r < hi;) {
      const long blk = r / p->OH;
      const int oa = (int)(r % p->OH);
      int ob = oa + (hi - r) < p->OH ? (int)(oa + (hi - r)) : p->OH;
      if (ob > oa + p->chunk) ob = oa + p->chunk;
      const long g = blk % ng, nb = blk / ng; /* nb: n * cbs + block */
      for (int sub = (int)(g * nsub / ng); sub < (int)((g + 1) * nsub / ng); sub++) {
        const int c0 = (int)(nb % cbs) * p->bn + sub * p->vec;
        const int cbn = p->bn - sub * p->vec < p->vec ? p->bn - sub * p->vec : p->vec;
        const size_t xo = (size_t)nb * in_plane * p->bn + (size_t)sub * p->vec;
        const size_t yo = (size_t)nb * out_plane * p->bn + (size_t)sub * p->vec;
        v->blocked_rows(p, x + xo, w + (size_t)c0 * d->R * d->S, bias ? bias + c0 : NULL,
                        res ? res + yo : NULL, y + yo, cbn, oa, ob, ws);
      }
      r += ob - oa;
    }
    return;
  }
  if (p->blocked) {
    const int cb = (d->C + p->vec - 1) / p->vec;
    const long units = (long)d->N * cb * p->OH;
    const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
    for (long r = lo; r < hi;) {
      const long blk = r / p->OH;
      const int oa = (int)(r % p->OH);
      const int ob = oa + (hi - r) < p->OH ? (int)(oa + (hi - r)) : p->OH;
      const long n = blk / cb;
      const int c0 = (int)(blk % cb) * p->vec;
      const int cbn = d->C - c0 < p->vec ? d->C - c0 : p->vec;
      const size_t ch = (size_t)n * d->C + (size_t)c0;
      v->blocked_rows(p, x + ch * in_plane, w + (size_t)c0 * p->cg * d->R * d->S,
                      bias ? bias + c0 : NULL, res ? res + ch * out_plane : NULL,
                      y + ch * out_plane, cbn, oa, ob, ws);
      r += ob - oa;
    }
    return;
  }
  const long units = (long)d->N * d->K * p->OH;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  for (long r = lo; r < hi;) {
    const long plane = r / p->OH;
    const int oa = (int)(r % p->OH);
    const int ob = oa + (hi - r) < p->OH ? (int)(oa + (hi - r)) : p->OH;
    const int k = (int)(plane % d->K);
    const long n = plane / d->K, c = k / p->mult;
    v->rows(p, x + ((size_t)n * d->C + (size_t)c) * in_plane, w + (size_t)k * d->R * d->S,
            bias ? bias[k] : 0.0f, res ? res + (size_t)plane * out_plane : NULL,
            y + (size_t)plane * out_plane, oa, ob, ws);
    r += ob - oa;
  }
}
