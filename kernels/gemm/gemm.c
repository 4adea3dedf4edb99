/* GEMM driver: plan (blocking, workspace) and run one thread's share.
 * Loop nest per share, BLIS-style: jc (nc columns) > pc (kc depth, pack B
 * block) > ic (mc rows, pack A block) > ir (mr) > jr (nr) micro-kernel, so an
 * A micro-panel stays in L1 while the packed B block streams from L2. */
#include <string.h>
#include "gemm_internal.h"

static int desc_valid(const hwt_gemm_desc *d) {
  if (d->M < 0 || d->N < 0 || d->K < 0) return 0;
  if (d->ldc < d->N || d->ldc < 1) return 0;
  if (d->lda < (d->trans_a ? d->M : d->K) || d->lda < 1) return 0;
  if (d->ldb < (d->trans_b ? d->K : d->N) || d->ldb < 1) return 0;
  return 1;
}

/* Keep every workspace region 64-byte aligned. */
static size_t align16(size_t n) { return (n + 15) / 16 * 16; }

static int use_gemv(const hwt_gemm_desc *d) { return d->M <= HWT_GEMV_MAX_M; }

int hwt_gemm_plan_make(const hwt_gemm_desc *d, hwt_isa isa, int nth, hwt_gemm_plan *out) {
  if (!d || !out || nth < 1 || !desc_valid(d)) return HWT_EINVAL;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(isa);
  if (!v || !hwt_isa_supported(isa)) return HWT_EISA;
  memset(out, 0, sizeof(*out));
  out->d = *d;
  out->isa = isa;
  out->nth = nth;
  out->mr = v->mr;
  out->nr = v->nr;
  if (use_gemv(d)) {
    /* GEMV streams B unblocked; the workspace holds op(A) rows when A is
       transposed (gathered once so the dot products read them contiguously). */
    out->mc = d->M;
    out->kc = d->K;
    out->nc = d->N;
    out->ws_floats = d->trans_a ? align16((size_t)d->M * (size_t)d->K) : 0;
    return HWT_OK;
  }
  /* Block for the largest share of the grid this plan is made for, so small
     shares do not reserve (or split over) blocks sized for the whole C. */
  int tm, tn;
  hwt_gemm_grid(d->M, d->N, d->K, v->mr, v->nr, nth, &tm, &tn);
  hwt_gemm_desc share = *d;
  int mt = (d->M + v->mr - 1) / v->mr, nt = (d->N + v->nr - 1) / v->nr;
  share.M = (int)(((long long)mt * tn + nth - 1) / nth) * v->mr;
  share.N = (nt + (nth / tm) - 1) / (nth / tm) * v->nr;
  hwt_gemm_blocking(v, &share, &out->mc, &out->kc, &out->nc);
  size_t kc = (size_t)(out->kc > 0 ? out->kc : 1);
  out->ws_floats = align16((size_t)out->mc * kc) + align16(kc * (size_t)out->nc);
  return HWT_OK;
}

static void run_gemv(const hwt_gemm_plan *p, const hwt_gemm_variant *v, const float *A,
                     const float *B, float *C, const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  /* Columns in units of 16 floats = one cache line of C, so no two threads
     write the same line. */
  int units = (d->N + 15) / 16, lo, hi;
  hwt_split(units, nth, tid, &lo, &hi);
  int j0 = lo * 16, j1 = hi * 16 < d->N ? hi * 16 : d->N;
  if (j0 >= j1) return;
  const float *a = A;
  size_t lda = (size_t)d->lda;
  if (d->trans_a) {
    for (int i = 0; i < d->M; i++)
      for (int k = 0; k < d->K; k++) ws[(size_t)i * d->K + k] = A[(size_t)k * d->lda + i];
    a = ws;
    lda = (size_t)d->K;
  }
  const float *b = d->trans_b ? B + (size_t)j0 * d->ldb : B + j0;
  v->gemv(d->M, j1 - j0, d->K, a, lda, b, (size_t)d->ldb, d->trans_b, C + j0, (size_t)d->ldc,
          d->beta, bias ? bias + j0 : NULL);
}

void hwt_gemm_run_part(const hwt_gemm_plan *p, const float *A, const float *B, float *C,
                       const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(p->isa);
  if (!v || d->M == 0 || d->N == 0 || tid < 0 || tid >= nth) return;
  if (use_gemv(d)) {
    run_gemv(p, v, A, B, C, bias, ws, tid, nth);
    return;
  }
  hwt_gemm_share s = hwt_gemm_share_of(d->M, d->N, d->K, v->mr, v->nr, tid, nth);
  const int mr = v->mr, nr = v->nr, mc = p->mc, kc = p->kc, nc = p->nc;
  float *ap = ws;
  float *bp = ws + align16((size_t)mc * (size_t)(kc > 0 ? kc : 1));
  for (int jc = s.j0; jc < s.j1; jc += nc) {
    int nb = s.j1 - jc < nc ? s.j1 - jc : nc;
    /* do-while: K == 0 still runs one pass, which writes beta*C + bias. */
    int pc = 0;
    do {
      int kb = d->K - pc < kc ? d->K - pc : kc;
      v->pack_b(d, B, pc, kb, jc, nb, nr, bp);
      /* The first depth block applies beta and bias; later ones accumulate. */
      float beta = pc == 0 ? d->beta : 1.0f;
      const float *bias_blk = pc == 0 && bias ? bias + jc : NULL;
      for (int ic = s.i0; ic < s.i1; ic += mc) {
        int mb = s.i1 - ic < mc ? s.i1 - ic : mc;
        v->pack_a(d, A, ic, mb, pc, kb, mr, ap);
        for (int ir = 0; ir < mb; ir += mr) {
          const float *a = ap + (size_t)ir * kb;
          float *crow = C + (size_t)(ic + ir) * d->ldc + jc;
          int m = mb - ir < mr ? mb - ir : mr;
          for (int jr = 0; jr < nb; jr += nr) {
            v->ukr(kb, a, bp + (size_t)jr * kb, (size_t)nr, crow + jr, (size_t)d->ldc, m,
                   nb - jr < nr ? nb - jr : nr, beta, bias_blk ? bias_blk + jr : NULL);
          }
        }
      }
      pc += kb;
    } while (pc < d->K);
  }
}
