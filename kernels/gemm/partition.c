/* 2-D partition of the output over threads. The rows are cut into tm row
 * groups; the nth threads are dealt to the groups as evenly as possible (7
 * threads in 2 groups: 4 + 3), each group gets rows in proportion to its
 * threads, and splits its columns among them. Unlike a strict tm x tn grid
 * this uses every thread for any nth (prime ones too) while keeping shares
 * square enough to reuse packed panels. tm minimises the largest share's
 * cost: its FMAs plus the packing it repeats (every thread packs its own rows
 * of A and columns of B, since threads never wait for each other), packing
 * priced per variant (hwt_gemm_variant.pack_cost_flops, variants.c). */
#include "gemm_internal.h"

void hwt_split(int n, int parts, int idx, int *lo, int *hi) {
  *lo = (int)((long long)n * idx / parts);
  *hi = (int)((long long)n * (idx + 1) / parts);
}

static int ceil_div(long long a, long long b) { return (int)((a + b - 1) / b); }

/* Largest share and number of busy threads when the rows form tm groups. */
static void evaluate(const hwt_gemm_variant *v, int mt, int nt, int K, int nth, int tm,
                     double *cost, int *busy) {
  const int mr = v->mr, nr = v->nr;
  int q = nth / tm, r = nth % tm;
  *cost = 0.0;
  *busy = 0;
  for (int big = 0; big < 2; big++) { /* group sizes q+1 (r of them) and q */
    int ng = big ? q + 1 : q, count = big ? r : tm - r;
    if (count == 0 || ng == 0) continue;
    double rows = (double)ceil_div((long long)mt * ng, nth) * mr;
    double cols = (double)ceil_div(nt, ng < nt ? ng : nt) * nr;
    double c = 2.0 * rows * cols * K + v->pack_cost_flops * (rows * K + (double)K * cols);
    if (c > *cost) *cost = c;
    *busy += count * (ng < nt ? ng : nt);
  }
}

void hwt_gemm_grid(const hwt_gemm_variant *v, int M, int N, int K, int nth, int *tm, int *tn) {
  int mt = ceil_div(M > 0 ? M : 1, v->mr), nt = ceil_div(N > 0 ? N : 1, v->nr);
  int best_tm = 1, best_busy = -1;
  double best = 0.0;
  /* Fewest row groups wins ties, so small M splits N and each thread reuses
     its packed B over all its rows. A thread left idle only when no tm can
     keep all busy (fewer tiles than threads). */
  for (int g = 1; g <= nth && g <= mt; g++) {
    double cost;
    int busy;
    evaluate(v, mt, nt, K, nth, g, &cost, &busy);
    if (busy > best_busy || (busy == best_busy && cost < best * 0.999)) {
      best = cost;
      best_busy = busy;
      best_tm = g;
    }
  }
  *tm = best_tm;
  *tn = ceil_div(nth, best_tm); /* threads in the largest group */
}

hwt_gemm_share hwt_gemm_share_of(const hwt_gemm_variant *v, int M, int N, int K, int tid,
                                 int nth) {
  hwt_gemm_share s = {0, 0, 0, 0};
  const int mr = v->mr, nr = v->nr;
  int tm, tn;
  hwt_gemm_grid(v, M, N, K, nth, &tm, &tn);
  int q = nth / tm, r = nth % tm;
  /* Groups of q+1 threads come first: group g starts at thread first(g). */
  int g, first, ng;
  if (tid < r * (q + 1)) {
    g = tid / (q + 1);
    first = g * (q + 1);
    ng = q + 1;
  } else {
    g = r + (tid - r * (q + 1)) / q;
    first = r * (q + 1) + (g - r) * q;
    ng = q;
  }
  int mt = ceil_div(M, mr), nt = ceil_div(N, nr);
  /* Rows in proportion to threads: group g owns row tiles [mt*first/nth, mt*(first+ng)/nth). */
  int lo = (int)((long long)mt * first / nth), hi = (int)((long long)mt * (first + ng) / nth);
  s.i0 = lo * mr;
  s.i1 = hi * mr < M ? hi * mr : M;
  int jlo, jhi;
  hwt_split(nt, ng, tid - first, &jlo, &jhi);
  s.j0 = jlo * nr;
  s.j1 = jhi * nr < N ? jhi * nr : N;
  if (s.i0 >= s.i1 || s.j0 >= s.j1) s.i0 = s.i1 = s.j0 = s.j1 = 0;
  return s;
}
