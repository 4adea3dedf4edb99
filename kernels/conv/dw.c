/* Depthwise CONV driver: plan sizing and the split of the N x K x OH
 * output rows over threads, dispatch through the variant table. */
#include "dw_impl.h"
#include "conv_internal.h"

/* S > 64 is refused (the body keeps one offset per tap column on the
 * stack, as the dense template does, HWT_CONV_MAX_S): the engine runs such
 * a conv on the dense path once per group. */

/* Staged floats per chunk of output rows: 4096 (16 KiB) keeps the rows a
 * chunk reads in L1 (32 KiB on Zen 3/4) with its output rows beside them,
 * so each staged row is read R times from L1. Same budget as the pooling
 * kernel's block of rows (pool_impl.h). */
#define DW_STAGE_FLOATS 4096

int hwt_dwconv_plan_make(const hwt_conv_desc *d, hwt_isa isa, hwt_dwconv_plan *out) {
  int OH, OW;
  if (!d || !out || d->N < 1 || d->C < 1 || d->K < d->C || d->K % d->C || d->S > 64 ||
      hwt_conv_out_dims(d, &OH, &OW) != HWT_OK)
    return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  hwt_dwconv_plan p = {0};
  p.d = *d;
  p.mult = d->K / d->C;
  p.isa = isa;
  p.OH = OH;
  p.OW = OW;
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
  const long units = (long)d->N * d->K * p->OH;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  const hwt_dwconv_variant *v = hwt_dwconv_variant_for(p->isa);
  const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)p->OH * p->OW;
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
