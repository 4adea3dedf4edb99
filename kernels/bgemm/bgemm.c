/* bf16 GEMM driver (hwtune/bgemm.h): plan, pack B once as bf16 pairs, and
 * run a share of the output as blocks of nc columns (their packed B stays in
 * L2) by mr-row tiles (A rounded and packed per tile), micro-kernel into an
 * fp32 tile, then bias / ReLU into C. */
#include <string.h>
#include "../common/share.h"
#include "bgemm_internal.h"

/* Packed B bytes of one column block: Zen 4 has 1 MiB of L2 per core; half
 * of it leaves room for the A tile, the output and the next block (the
 * int8 GEMM's budget, kernels/qgemm/qgemm.c). */
#define BGEMM_L2_BUDGET (512 * 1024)
/* Packed A bytes of one row chunk, packed once and run against every
 * column block (the bf16 CONV's budget, bconv.c: both stay in L2). Packing
 * A per tile and column block instead rounded BERT-base's FFN input
 * (128 x 768, N 3072: ten column blocks) ten times over. */
#define BGEMM_A_BUDGET (192 * 1024)

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

int hwt_bgemm_has_avx512_bf16(void) {
  hwt_cpu_features f;
  hwt_cpu_features_get(&f);
  return f.avx512_bf16 && hwt_isa_supported(HWT_ISA_AVX512);
}

int hwt_bf16_from_f32_x16_native(const float *x, uint16_t *out) {
#if defined(HWTUNE_HAVE_X86)
  if (hwt_bgemm_has_avx512_bf16()) {
    hwt_bgemm_cvt16_avx512bf16(x, out);
    return HWT_OK;
  }
#endif
  (void)x, (void)out;
  return HWT_EISA;
}

int hwt_bgemm_variant_for(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !hwt_isa_supported(isa)) return HWT_EISA;
  if (isa == HWT_ISA_AVX512 && hwt_bgemm_has_avx512_bf16() && hwt_bgemm_variant_get(isa))
    return HWT_ISA_AVX512;
  return HWT_ISA_GENERIC;
}

const char *hwt_bgemm_variant_name(hwt_isa isa) {
  switch (isa) {
    case HWT_ISA_AVX512: return "avx512_bf16";
    case HWT_ISA_GENERIC: return "generic";
    default: return "unknown";
  }
}

int hwt_bgemm_plan_make(const hwt_bgemm_desc *d, hwt_isa isa, hwt_bgemm_plan *out) {
  if (!d || !out || d->M < 0 || d->N < 0 || d->K < 0 || d->lda < (d->trans_a ? d->M : d->K) ||
      d->lda < 1)
    return HWT_EINVAL;
  const hwt_bgemm_variant *v = hwt_bgemm_variant_get(isa);
  if (!v || !hwt_isa_supported(isa) || (isa == HWT_ISA_AVX512 && !hwt_bgemm_has_avx512_bf16()))
    return HWT_EISA;
  memset(out, 0, sizeof *out);
  out->d = *d;
  out->isa = isa;
  out->mr = v->mr;
  out->nr = v->nr;
  out->Kq = (d->K + 1) / 2;
  const size_t panel = (size_t)out->Kq * (size_t)v->nr * 4;
  const int panels = (int)(BGEMM_L2_BUDGET / (panel ? panel : 1));
  out->nc = (panels < 1 ? 1 : panels) * v->nr;
  out->packed_b_bytes = align64((size_t)((d->N + v->nr - 1) / v->nr) * panel);
  int tiles = (int)(BGEMM_A_BUDGET / ((size_t)out->Kq * (size_t)v->mr * 4 + 1));
  const int mtiles = (d->M + v->mr - 1) / v->mr;
  if (tiles < 1) tiles = 1;
  out->mc = (tiles < mtiles ? tiles : mtiles > 0 ? mtiles : 1) * v->mr;
  out->ws_bytes = align64((size_t)out->Kq * (size_t)out->mc * 4) +
                  align64((size_t)v->mr * v->nr * 4);
  return HWT_OK;
}

/* The pair (x[2q], x[2q+1]) of one row or column, each rounded to bf16;
 * a missing odd member is 0. */
static uint32_t pair(const float *x, ptrdiff_t step, int q, int K) {
  const int k = 2 * q;
  const uint32_t lo = hwt_bf16_rne(x[(ptrdiff_t)k * step]);
  const uint32_t hi = k + 1 < K ? hwt_bf16_rne(x[(ptrdiff_t)(k + 1) * step]) : 0;
  return lo | hi << 16;
}

int hwt_bgemm_pack_b(const hwt_bgemm_plan *p, const float *B, int ldb, int trans_b,
                     void *packed) {
  const hwt_bgemm_desc *d = &p->d;
  if (!B || !packed || ldb < (trans_b ? d->K : d->N) || ldb < 1) return HWT_EINVAL;
  const ptrdiff_t rs = trans_b ? 1 : ldb, cs = trans_b ? ldb : 1;
  const int nr = p->nr;
  uint32_t *dst = packed;
  for (int j0 = 0; j0 < d->N; j0 += nr)
    for (int q = 0; q < p->Kq; q++)
      for (int j = j0; j < j0 + nr; j++)
        *dst++ = j < d->N ? pair(B + (ptrdiff_t)j * cs, rs, q, d->K) : 0;
  return HWT_OK;
}

static void pack_a(const hwt_bgemm_plan *p, const float *A, int i0, int mb, uint32_t *dst) {
  const hwt_bgemm_desc *d = &p->d;
  const ptrdiff_t rs = d->trans_a ? 1 : d->lda, cs = d->trans_a ? d->lda : 1;
  const int mr = p->mr;
  for (int q = 0; q < p->Kq; q++)
    for (int i = 0; i < mr; i++)
      *dst++ = i < mb ? pair(A + (ptrdiff_t)(i0 + i) * rs, cs, q, d->K) : 0;
}

static void epilogue(const hwt_bgemm_epi *e, const float *acc, int nr, int i0, int mb, int j0,
                     int nb) {
  for (int i = 0; i < mb; i++) {
    float *c = e->C + (ptrdiff_t)(i0 + i) * e->ldc + j0;
    for (int j = 0; j < nb; j++) {
      float v = acc[i * nr + j] + (e->bias ? e->bias[j0 + j] : 0.0f);
      c[j] = e->relu && v < 0.0f ? 0.0f : v;
    }
  }
}

void hwt_bgemm_compute(const hwt_bgemm_plan *p, const float *A, const void *packed_b,
                       const hwt_bgemm_epi *e, int m0, int m1, int n0, int n1, void *ws) {
  const hwt_bgemm_variant *v = hwt_bgemm_variant_get(p->isa);
  const int mr = p->mr, nr = p->nr;
  const size_t panel = (size_t)p->Kq * (size_t)nr, tile = (size_t)p->Kq * (size_t)mr;
  uint32_t *apanel = ws;
  float *acc = (float *)((char *)ws + align64((size_t)p->Kq * (size_t)p->mc * 4));
  for (int mc0 = m0; mc0 < m1; mc0 += p->mc) {
    const int me = m1 - mc0 < p->mc ? m1 : mc0 + p->mc;
    for (int i = mc0; i < me; i += mr)
      pack_a(p, A, i, me - i < mr ? me - i : mr, apanel + (size_t)((i - mc0) / mr) * tile);
    for (int jb = n0; jb < n1; jb += p->nc) {
      const int je = n1 - jb < p->nc ? n1 : jb + p->nc;
      for (int i = mc0; i < me; i += mr) {
        const uint32_t *a = apanel + (size_t)((i - mc0) / mr) * tile;
        const int mb = me - i < mr ? me - i : mr;
        for (int j = jb; j < je; j += nr) {
          v->ukr(p->Kq, a, (const uint32_t *)packed_b + (size_t)(j / nr) * panel, acc);
          epilogue(e, acc, nr, i, mb, j, je - j < nr ? je - j : nr);
        }
      }
    }
  }
}

void hwt_bgemm_run_part(const hwt_bgemm_plan *p, const float *A, const void *packed_b,
                        const hwt_bgemm_epi *e, void *ws, int tid, int nth) {
  int m0, m1, n0, n1;
  if (!hwt_tile_share(p->d.M, p->mr, p->d.N, p->nr, tid, nth, &m0, &m1, &n0, &n1)) return;
  hwt_bgemm_compute(p, A, packed_b, e, m0, m1, n0, n1, ws);
}
