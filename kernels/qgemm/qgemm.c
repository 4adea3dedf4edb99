/* int8 GEMM driver (hwtune/qgemm.h): plan, pack B once, and run a share of
 * the output as blocks of nc columns (their packed B stays in L2) by mr-row
 * tiles (A packed per tile, with its row sums), micro-kernel into an int32
 * tile, then the epilogue. */
#include <string.h>
#include "../common/share.h"
#include "hwtune/isa.h"
#include "qgemm_internal.h"

/* Packed B bytes of one column block: Zen 4 has 1 MiB of L2 per core; half
 * of it leaves room for the A tile, the output and the next block. */
#define QGEMM_L2_BUDGET (512 * 1024)

/* Packed A bytes one thread may hold at once. Below it, when N spans more
 * than one column block, every A tile is packed once up front instead of
 * once per block: BERT-base's [128, 3072] x [3072, 768] has 5 blocks of 160
 * columns at the VNNI layout, and its A was packed from float32 (a
 * conversion per value) five times; packing once took BERT-base's 72
 * qmatmuls from 336 to 208 ms per inference in the engine's profile (1
 * thread, under load) and hwtune / ORT int8 from 0.61x to 0.80x
 * (interleaved, under load). 1 MiB: BERT-base's largest A (128 x 3072
 * bytes = 384 KiB) with room for batches of a few sequences. */
#define QGEMM_A_ONCE_BUDGET (1024 * 1024)

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

static int vnni(void) {
  hwt_cpu_features f;
  hwt_cpu_features_get(&f);
  return f.avx512_vnni;
}

int hwt_qgemm_variant_for(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !hwt_isa_supported(isa)) return HWT_EISA;
  if (isa == HWT_ISA_AVX512 && !vnni()) isa = HWT_ISA_AVX2;
  return hwt_qgemm_variant_get(isa) ? (int)isa : HWT_ISA_GENERIC;
}

const char *hwt_qgemm_variant_name(hwt_isa isa) {
  switch (isa) {
    case HWT_ISA_AVX512: return "avx512_vnni";
    case HWT_ISA_AVX2: return "avx2";
    case HWT_ISA_GENERIC: return "generic";
    default: return "unknown";
  }
}

int hwt_qgemm_plan_make(const hwt_qgemm_desc *d, hwt_isa isa, hwt_qgemm_plan *out) {
  if (!d || !out || d->M < 0 || d->N < 0 || d->K < 0 || d->a_ks < 0 ||
      (d->a_ks <= 1 && d->lda < d->K) || (d->a_ks > 1 && d->lda < 1) ||
      (int)d->a_type < 0 || d->a_type > HWT_QA_F32S8)
    return HWT_EINVAL;
  const hwt_qgemm_variant *v = hwt_qgemm_variant_get(isa);
  if (!v || !hwt_isa_supported(isa) || (isa == HWT_ISA_AVX512 && !vnni())) return HWT_EISA;
  memset(out, 0, sizeof *out);
  out->d = *d;
  out->isa = isa;
  out->mr = v->mr;
  out->nr = v->nr;
  out->kg = v->kg;
  out->esize = v->esize;
  out->Kp = (d->K + v->kg - 1) / v->kg * v->kg;
  const size_t panel = (size_t)out->Kp * (size_t)v->nr * (size_t)v->esize;
  int panels = (int)(QGEMM_L2_BUDGET / (panel ? panel : 1));
  out->nc = (panels < 1 ? 1 : panels) * v->nr;
  out->packed_b_bytes = align64((size_t)((d->N + v->nr - 1) / v->nr) * panel);
  const size_t apanel = (size_t)out->Kp * (size_t)v->mr * (size_t)v->esize;
  const size_t tiles = (size_t)((d->M + v->mr - 1) / v->mr);
  out->a_once = d->N > out->nc && tiles * apanel <= QGEMM_A_ONCE_BUDGET;
  const size_t a_tiles = out->a_once ? (tiles ? tiles : 1) : 1;
  out->ws_bytes = align64(a_tiles * apanel) + align64((size_t)v->mr * (size_t)v->nr * 4) +
                  align64(a_tiles * (size_t)v->mr * 4);
  return HWT_OK;
}

int hwt_qgemm_pack_b(const hwt_qgemm_plan *p, const int8_t *B, int ldb, int trans_b,
                     void *packed, int32_t *colsum) {
  const hwt_qgemm_desc *d = &p->d;
  const hwt_qgemm_variant *v = hwt_qgemm_variant_get(p->isa);
  if (!v || !B || !packed || !colsum || ldb < (trans_b ? d->K : d->N)) return HWT_EINVAL;
  const ptrdiff_t rs = trans_b ? 1 : ldb, cs = trans_b ? ldb : 1;
  const size_t panel = (size_t)p->Kp * (size_t)p->nr * (size_t)p->esize;
  for (int j = 0, q = 0; j < d->N; j += p->nr, q++)
    v->pack_b(p, B, rs, cs, j, d->N - j < p->nr ? d->N - j : p->nr,
              (char *)packed + (size_t)q * panel);
  for (int j = 0; j < d->N; j++) {
    int32_t s = 0;
    for (int k = 0; k < d->K; k++) s += B[(ptrdiff_t)k * rs + (ptrdiff_t)j * cs];
    colsum[j] = s;
  }
  return HWT_OK;
}

void hwt_qgemm_compute(const hwt_qgemm_plan *p, const void *A, const void *packed_b,
                       const int32_t *colsum, const hwt_qgemm_epi *e, int m0, int m1, int n0,
                       int n1, void *ws) {
  const hwt_qgemm_variant *v = hwt_qgemm_variant_get(p->isa);
  const int mr = p->mr, nr = p->nr;
  const size_t panel = (size_t)p->Kp * (size_t)nr * (size_t)p->esize;
  const size_t apanel = (size_t)p->Kp * (size_t)mr * (size_t)p->esize;
  const int tiles = (m1 - m0 + mr - 1) / mr;
  /* a_once: all of this share's A tiles packed before the first column
     block (the plan sized ws for every tile of M, so any share fits) */
  const int once = p->a_once && n1 - n0 > p->nc;
  const size_t a_tiles = p->a_once ? (size_t)((p->d.M + mr - 1) / mr) : 1;
  char *apanels = ws;
  int32_t *acc = (int32_t *)(apanels + align64((a_tiles ? a_tiles : 1) * apanel));
  int32_t *rowsums = acc + align64((size_t)mr * (size_t)nr * 4) / 4;
  const int shifted = p->d.a_type == HWT_QA_S8 || p->d.a_type == HWT_QA_F32S8;
  const int32_t za = e->za + (shifted ? 128 : 0);
  if (once)
    for (int t = 0; t < tiles; t++) {
      const int i = m0 + t * mr;
      v->pack_a(p, A, i, m1 - i < mr ? m1 - i : mr, apanels + (size_t)t * apanel,
                rowsums + (size_t)t * mr);
    }
  for (int jb = n0; jb < n1; jb += p->nc) {
    const int je = n1 - jb < p->nc ? n1 : jb + p->nc;
    for (int t = 0; t < tiles; t++) {
      const int i = m0 + t * mr, mb = m1 - i < mr ? m1 - i : mr;
      const char *ap = once ? apanels + (size_t)t * apanel : apanels;
      const int32_t *rowsum = once ? rowsums + (size_t)t * mr : rowsums;
      if (!once) v->pack_a(p, A, i, mb, apanels, rowsums);
      for (int j = jb; j < je; j += nr) {
        const int nb = je - j < nr ? je - j : nr;
        v->ukr(p->Kp / p->kg, ap, (const char *)packed_b + (size_t)(j / nr) * panel, acc);
        v->epi(p, e, za, acc, rowsum, colsum, i, mb, j, nb);
      }
    }
  }
}

void hwt_qgemm_run_part(const hwt_qgemm_plan *p, const void *A, const void *packed_b,
                        const int32_t *colsum, const hwt_qgemm_epi *e, void *ws, int tid,
                        int nth) {
  int m0, m1, n0, n1;
  if (!hwt_tile_share(p->d.M, p->mr, p->d.N, p->nr, tid, nth, &m0, &m1, &n0, &n1)) return;
  hwt_qgemm_compute(p, A, packed_b, colsum, e, m0, m1, n0, n1, ws);
}
