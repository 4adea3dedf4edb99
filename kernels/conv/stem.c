/* The stem kernel's driver: which CONVs it runs, its plan and weight
 * packing, and a thread's share of the output rows. The per-ISA blocks are
 * stem_body.c's. */
#include <string.h>
#include "conv_internal.h"

int hwt_conv_stem_ok(const hwt_conv_desc *d) {
  return d->C <= HWT_CONV_STEM_MAX_C &&
         (long)(d->R - 1) * d->dil_h + 1 <= HWT_CONV_STEM_MAX_SPAN &&
         d->S <= HWT_CONV_STEM_MAX_SPAN && hwt_conv_stem_slots(d) <= HWT_CONV_STEM_MAX_SLOTS;
}

/* The default NCHW plan of a stride-2, undilated CONV of at most
 * HWT_CONV_STEM_MAX_C input channels is the stem kernel on AVX2 and
 * AVX-512. Zen 4, 1 thread, thread time, the template's default params vs
 * the stem kernel (medians of 9-21 interleaved samples, ctypes plans,
 * under load 2-7): AVX-512 3 -> 32 3x3 at 224x224 1.27-1.54x, 3 -> 64 7x7
 * 1.00-1.10x, 1 -> 32 and 4 -> 32 3x3 1.64x / 1.50x, 3 -> 16 at 224 and
 * 3 -> 24 at 112 1.16x / 1.14x, 3 -> 64 5x5 at 224 1.08x, 3 -> 32 3x3 at
 * 299 unpadded 1.17x, 3 -> 64 at 56x56 1.00x; AVX2 1.05-2.20x on the same
 * shapes (7x7 1.13x). The portable variant's stem (4 x 4 scalar blocks)
 * measured 0.79x / 0.83x the portable template on the 3x3 / 7x7 stems, so
 * it runs only when asked for (HWT_CONV_NCHW_STEM). */
int hwt_conv_stem_default(const hwt_conv_desc *d, hwt_isa isa) {
  return isa != HWT_ISA_GENERIC && hwt_conv_variant_for(isa) != &hwt_conv_variant_generic &&
         hwt_conv_stem_ok(d) && d->stride_w == 2 && d->stride_h == 2 && d->dil_h == 1 &&
         d->dil_w == 1;
}

int hwt_conv_stem_plan(hwt_conv_plan *p) {
  const hwt_conv_desc *d = &p->d;
  if (!hwt_conv_stem_ok(d)) return HWT_EINVAL;
  const hwt_conv_stem_variant *v = hwt_conv_variant_for(p->isa)->stem;
  const int oc = v->oc;
  p->layout = HWT_CONV_NCHW_STEM;
  memset(&p->p, 0, sizeof p->p);
  p->copy_input = 0;
  p->rows_outer = 0;
  p->w_floats = (size_t)((d->K + oc - 1) / oc) * oc * d->C * d->R * d->S;
  p->ws_floats = ALIGN_FLOATS(hwt_conv_stem_ws_floats(p, v->vec));
  return HWT_OK;
}

void hwt_conv_stem_pack(const hwt_conv_plan *p, const float *w_oihw, float *w_packed) {
  const hwt_conv_desc *d = &p->d;
  const int oc = hwt_conv_variant_for(p->isa)->stem->oc, KB = (d->K + oc - 1) / oc;
  const size_t crs = (size_t)d->C * d->R * d->S;
  for (int kb = 0; kb < KB; kb++)
    for (size_t i = 0; i < crs; i++)
      for (int o = 0; o < oc; o++) {
        const int k = kb * oc + o;
        w_packed[((size_t)kb * crs + i) * oc + o] = k < d->K ? w_oihw[(size_t)k * crs + i] : 0.0f;
      }
}

/* Shares of whole output rows (every output channel), contiguous so a
 * thread's consecutive rows reuse the staged rows they share. */
void hwt_conv_stem_run_part(const hwt_conv_plan *p, const float *x, const float *w,
                            const float *bias, const float *res, float *y, float *ws, int tid,
                            int nth) {
  const long units = (long)p->d.N * p->OH;
  const long lo = units * tid / nth, hi = units * (tid + 1) / nth;
  if (lo >= hi) return;
  hwt_conv_variant_for(p->isa)->stem->rows(p, x, w, bias, res, y, ws, lo, hi);
}
