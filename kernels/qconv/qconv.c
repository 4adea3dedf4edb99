/* Direct int8 conv driver (hwtune/qconv.h): the plan borrows the int8
 * GEMM's (tile, k group, weight packing, epilogue) for the K = taps * icp
 * reduction; a tile of mr output pixels is a table of mr input pixel
 * addresses per tap, built once per tile and column block, and the
 * variant's micro-kernel reads the channels at those addresses directly. */
#include <stdlib.h>
#include <string.h>
#include "../qgemm/qgemm_internal.h"
#include "qconv_internal.h"

static const hwt_qconv_variant variants[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = {4, 8, 2, hwt_qconv_ukr_generic_4x8, NULL, NULL, hwt_qconv_hwc_generic},
#if defined(HWTUNE_HAVE_X86)
    [HWT_ISA_AVX2] = {6, 16, 2, hwt_qconv_ukr_avx2_6x16, NULL, hwt_qconv_epi_avx2,
                      hwt_qconv_hwc_avx2},
    [HWT_ISA_AVX512] = {8, 32, 4, hwt_qconv_ukr_avx512vnni_8x32, hwt_qconv_ukr_avx512vnni_4x32,
                        hwt_qconv_epi_avx512, hwt_qconv_hwc_avx512},
#endif
};

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

int hwt_qconv_plan_make(const hwt_qconv_desc *d, hwt_isa isa, hwt_qconv_plan *out) {
  if (!d || !out || d->ic < 1 || d->oc < 1 || d->h < 1 || d->w < 1 || d->oh < 1 || d->ow < 1 ||
      d->kh < 1 || d->kw < 1 || d->sh < 1 || d->sw < 1 || d->dh < 1 || d->dw < 1 ||
      d->pt < 0 || d->pl < 0 || (int)isa < 0 || isa >= HWT_ISA_COUNT)
    return HWT_EINVAL;
  const int64_t icp = ((int64_t)d->ic + 3) / 4 * 4, taps = (int64_t)d->kh * d->kw;
  if (taps * icp > INT32_MAX / 2 || (int64_t)d->oh * d->ow > INT32_MAX / 2 ||
      (int64_t)d->h * d->w * icp > INT32_MAX / 2)
    return HWT_EINVAL;
  const hwt_qconv_variant *v = &variants[isa];
  if (!v->ukr) return HWT_EISA;
  memset(out, 0, sizeof *out);
  hwt_qgemm_desc gd = {1, d->oc, (int)(taps * icp), (int)(taps * icp), HWT_QA_U8, 0};
  const int st = hwt_qgemm_plan_make(&gd, isa, &out->g);
  if (st != HWT_OK) return st;
  if (out->g.mr != v->mr || out->g.nr != v->nr || out->g.kg != v->kg || icp % v->kg)
    return HWT_EISA; /* the tables disagree: a build error, not a CPU's */
  out->d = *d;
  out->icp = (int)icp;
  out->taps = (int)taps;
  out->packed_w_bytes = out->g.packed_b_bytes;
  out->ws_bytes = align64((size_t)taps * (size_t)v->mr * sizeof(const uint8_t *)) +
                  align64((size_t)v->mr * (size_t)v->nr * 4) + align64((size_t)v->mr * 4) +
                  align64((size_t)icp) + align64((size_t)taps * sizeof(ptrdiff_t));
  return HWT_OK;
}

int hwt_qconv_pack_w(const hwt_qconv_plan *p, const int8_t *w, void *packed, int32_t *colsum) {
  if (!p || !w || !packed || !colsum) return HWT_EINVAL;
  const hwt_qconv_desc *d = &p->d;
  const size_t K = (size_t)p->taps * (size_t)p->icp;
  int8_t *bt = calloc((size_t)d->oc * K, 1); /* [oc][tap][icp] */
  if (!bt) return HWT_ENOMEM;
  for (int o = 0; o < d->oc; o++)
    for (int c = 0; c < d->ic; c++)
      for (int t = 0; t < p->taps; t++)
        bt[(size_t)o * K + (size_t)t * (size_t)p->icp + (size_t)c] =
            w[((size_t)o * (size_t)d->ic + (size_t)c) * (size_t)p->taps + (size_t)t];
  const int st = hwt_qgemm_pack_b(&p->g, bt, (int)K, 1, packed, colsum);
  free(bt);
  return st;
}

void hwt_qconv_to_hwc(const hwt_qconv_plan *p, const float *x, ptrdiff_t plane, int n,
                      float shift, uint8_t *dst) {
  variants[p->g.isa].hwc(p->d.ic, p->icp, x, plane, n, shift, dst);
}

void hwt_qconv_compute(const hwt_qconv_plan *p, const uint8_t *x, int ih0, const void *packed,
                       const int32_t *colsum, const hwt_qgemm_epi *e, int p0, int p1, int n0,
                       int n1, void *ws) {
  const hwt_qconv_variant *v = &variants[p->g.isa];
  const hwt_qgemm_variant *gv = hwt_qgemm_variant_get(p->g.isa);
  const hwt_qconv_desc *d = &p->d;
  const int mr = v->mr, nr = v->nr, taps = p->taps, icp = p->icp, kq = icp / v->kg;
  const size_t panel = (size_t)p->g.Kp * (size_t)nr * (size_t)p->g.esize;
  const uint8_t **table = ws;
  int32_t *acc = (int32_t *)((char *)ws + align64((size_t)taps * (size_t)mr * sizeof *table));
  int32_t *rowsum = acc + align64((size_t)mr * (size_t)nr * 4) / 4;
  uint8_t *pad = (uint8_t *)(rowsum + align64((size_t)mr * 4) / 4);
  ptrdiff_t *tap = (ptrdiff_t *)(pad + align64((size_t)icp));
  memset(rowsum, 0, (size_t)mr * 4); /* read by the epilogue only with zb */
  /* rows a half-tile kernel leaves alone are converted (then discarded)
     by the vector epilogues: defined values */
  memset(acc, 0, (size_t)mr * (size_t)nr * 4);
  memset(pad, (uint8_t)e->za, (size_t)icp);
  /* each tap's byte offset from its window's first pixel: a window inside
     the image takes its pixel addresses as base + tap[t]. Bounds-checked
     tap by tap, the table took 6% of the int8 ResNet-50's samples (3.2%
     against 36.9% in the VNNI micro-kernel, perf, 1 thread, under load) */
  for (int ky = 0, t = 0; ky < d->kh; ky++)
    for (int kx = 0; kx < d->kw; kx++, t++)
      tap[t] = ((ptrdiff_t)ky * d->dh * d->w + (ptrdiff_t)kx * d->dw) * icp;
  const int span_y = (d->kh - 1) * d->dh, span_x = (d->kw - 1) * d->dw;
  /* the variant's epilogue where the output is float NCHW or u8
     channels-last (every direct qconv2d of the engine), else the GEMM's */
  hwt_qconv_epi_fn *fe = v->epi && !e->zb &&
                                 (((e->out == HWT_QOUT_F32 || e->out == HWT_QOUT_ACC ||
                                    e->out == HWT_QOUT_QF32) && e->rs_c == 1) ||
                                  (e->out == HWT_QOUT_U8 && e->cs_c == 1))
                             ? v->epi
                             : NULL;
  for (int jb = n0; jb < n1; jb += p->g.nc) {
    const int je = n1 - jb < p->g.nc ? n1 : jb + p->g.nc;
    for (int pp = p0; pp < p1; pp += mr) {
      const int mb = p1 - pp < mr ? p1 - pp : mr;
      int oy = pp / d->ow, ox = pp % d->ow;
      for (int i = 0; i < mr; i++) {
        if (i < mb) {
          const int iy0 = oy * d->sh - d->pt, ix0 = ox * d->sw - d->pl;
          if (iy0 >= 0 && ix0 >= 0 && iy0 + span_y < d->h && ix0 + span_x < d->w) {
            const uint8_t *base =
                x + ((size_t)(iy0 - ih0) * (size_t)d->w + (size_t)ix0) * (size_t)icp;
            for (int t = 0; t < taps; t++) table[t * mr + i] = base + tap[t];
            if (++ox == d->ow) ox = 0, oy++;
            continue;
          }
          for (int ky = 0, t = 0; ky < d->kh; ky++) {
            const int iy = iy0 + ky * d->dh;
            for (int kx = 0; kx < d->kw; kx++, t++) {
              const int ix = ix0 + kx * d->dw;
              table[t * mr + i] =
                  iy < 0 || iy >= d->h || ix < 0 || ix >= d->w
                      ? pad
                      : x + ((size_t)(iy - ih0) * (size_t)d->w + (size_t)ix) * (size_t)icp;
            }
          }
          if (++ox == d->ow) ox = 0, oy++;
        } else {
          for (int t = 0; t < taps; t++) table[t * mr + i] = pad; /* rows past mb: discarded */
        }
      }
      for (int j = jb; j < je; j += nr) {
        const int nb = je - j < nr ? je - j : nr;
        hwt_qconv_ukr_fn *k = v->ukr_half && 2 * mb <= mr ? v->ukr_half : v->ukr;
        k(taps, kq, table, (const char *)packed + (size_t)(j / nr) * panel, acc);
        if (fe) fe(e, acc, colsum, pp, mb, j, nb);
        else gv->epi(&p->g, e, e->za, acc, rowsum, colsum, pp, mb, j, nb);
      }
    }
  }
}
