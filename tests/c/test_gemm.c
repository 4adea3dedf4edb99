/* GEMM variants vs the plain-C reference (hwt_gemm_ref): every supported ISA,
 * awkward shapes, transposes, beta, bias, padded leading dimensions and
 * several thread counts, each with B packed by the shares and with B
 * prepacked once (hwt_gemm_pack_b + hwt_gemm_run_part_packed), and with A
 * prepacked once by a 1-thread plan (hwt_gemm_pack_a, what a 1x1 CONV does
 * with its weights) and run by the nth-thread plan; plus the
 * partition contract (disjoint, complete, no idle thread when there are
 * enough tiles) for 1..256 threads.
 * Small sizes: this also runs under ASan/UBSan. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/gemm.h"
#include "../../kernels/gemm/gemm_internal.h"
#include "check.h"


static float *rand_buf(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

/* prepacked 1: B packed once (hwt_gemm_pack_b, buffer exactly
   packed_b_floats long) and every share run from it; 2: A packed once by
   p1, a plan of the same shape for one thread (buffer exactly
   hwt_gemm_packed_a_floats long), and every share of p run from it (in a
   workspace of exactly hwt_gemm_packed_a_ws_floats); 0:
   every share packs both itself. */
static void run_all(const hwt_gemm_plan *p, const hwt_gemm_plan *p1, const float *A,
                    const float *B, float *C, const float *bias, int nth, int prepacked) {
  float *ws = alloc_floats(prepacked == 2 ? hwt_gemm_packed_a_ws_floats(p) : p->ws_floats);
  float *pb = prepacked == 1 ? alloc_floats(p->packed_b_floats) : NULL;
  float *pa = prepacked == 2 ? alloc_floats(hwt_gemm_packed_a_floats(p1)) : NULL;
  if (pb) CHECK(hwt_gemm_pack_b(p, B, pb) == HWT_OK, "pack_b");
  if (pa) CHECK(hwt_gemm_pack_a(p1, A, pa) == HWT_OK, "pack_a");
  /* Reverse order: shares must not depend on running in tid order. */
  for (int t = nth - 1; t >= 0; t--) {
    if (pb)
      hwt_gemm_run_part_packed(p, A, pb, C, bias, ws, t, nth);
    else if (pa)
      hwt_gemm_run_part_packed_a(p, pa, B, C, bias, ws, t, nth);
    else
      hwt_gemm_run_part(p, A, B, C, bias, ws, t, nth);
  }
  free(pa);
  free(pb);
  free(ws);
}

/* Caches of a small machine for check_case_in: blocks of a few micro-tiles,
   so small shapes cross every kc, mc and nc block boundary (fast under ASan). */
static const hwt_cache_sizes tiny_caches = {4L << 10, 16L << 10, 64L << 10, 1};

static void check_case_in(hwt_isa isa, int M, int N, int K, int ta, int tb, float beta,
                          int use_bias, int pad, int nth, const hwt_cache_sizes *caches) {
  hwt_gemm_desc d = {M, N, K, ta, tb, 0, 0, 0, beta};
  d.lda = (ta ? M : K) + pad;
  d.ldb = (tb ? K : N) + pad;
  d.ldc = N + pad;
  if (d.lda < 1) d.lda = 1;
  if (d.ldb < 1) d.ldb = 1;
  if (d.ldc < 1) d.ldc = 1;
  size_t na = (size_t)(ta ? K : M) * d.lda, nb = (size_t)(tb ? N : K) * d.ldb;
  size_t nc = (size_t)M * d.ldc;
  float *A = rand_buf(na), *B = rand_buf(nb), *C0 = rand_buf(nc), *bias = rand_buf(N);
  float *C = malloc((nc ? nc : 1) * sizeof(float)), *R = malloc((nc ? nc : 1) * sizeof(float));
  memcpy(R, C0, nc * sizeof(float));
  hwt_gemm_plan p, p1;
  int st = hwt_gemm_plan_make_for(&d, isa, nth, caches, &p);
  CHECK(st == HWT_OK, "plan_make %d", st);
  if (st == HWT_OK) st = hwt_gemm_plan_make_for(&d, isa, 1, caches, &p1);
  /* A packed for one thread serves every nth: the depth blocks agree. */
  CHECK(st == HWT_OK && p1.kc == p.kc, "%s M=%d N=%d K=%d nth=%d: kc %d, 1 thread %d",
        hwt_isa_name(isa), M, N, K, nth, p.kc, p1.kc);
  if (st == HWT_OK) {
    hwt_gemm_ref(&d, A, B, R, use_bias ? bias : NULL);
    for (int prepacked = 0; prepacked < 3; prepacked++) {
      memcpy(C, C0, nc * sizeof(float));
      if (beta == 0.0f) /* beta == 0 must never read C: poison it (not the ld padding) */
        for (int i = 0; i < M; i++)
          for (int j = 0; j < N; j++) C[(size_t)i * d.ldc + j] = NAN;
      run_all(&p, &p1, A, B, C, use_bias ? bias : NULL, nth, prepacked);
      /* Inputs in [-1, 1): float32 accumulation error grows at most ~K*eps. */
      double tol = 8.0 * 1.2e-7 * (K + 4);
      double worst = 0.0;
      for (int i = 0; i < M; i++)
        for (int j = 0; j < d.ldc; j++) {
          size_t ix = (size_t)i * d.ldc + j;
          double e = j < N ? fabs((double)C[ix] - (double)R[ix]) : (C[ix] == C0[ix] ? 0.0 : 1e9);
          if (!(e <= worst)) worst = e; /* NaN propagates as a failure */
        }
      CHECK(worst <= tol, "%s M=%d N=%d K=%d ta=%d tb=%d beta=%g bias=%d pad=%d nth=%d "
            "prepacked=%d caches=%s (mc %d kc %d nc %d): max err %g > %g (1e9: wrote the ld "
            "padding)", hwt_isa_name(isa), M, N, K, ta, tb, beta, use_bias, pad, nth,
            prepacked, caches ? "tiny" : "host", p.mc, p.kc, p.nc, worst, tol);
    }
  }
  free(A); free(B); free(C0); free(bias); free(C); free(R);
}

static void check_case(hwt_isa isa, int M, int N, int K, int ta, int tb, float beta, int use_bias,
                       int pad, int nth) {
  check_case_in(isa, M, N, K, ta, tb, beta, use_bias, pad, nth, NULL);
}

/* The blocking follows the caches it is given: smaller caches, smaller
   blocks; every block a whole number of micro-tiles and none beyond the
   problem. */
static void check_blocking(hwt_isa isa) {
  hwt_gemm_desc d = {2000, 3000, 2000, 0, 0, 2000, 3000, 3000, 0.0f};
  hwt_gemm_plan big, small;
  const hwt_cache_sizes large = {64L << 10, 2L << 20, 64L << 20, 8};
  CHECK(hwt_gemm_plan_make_for(&d, isa, 1, &large, &big) == HWT_OK, "plan large caches");
  CHECK(hwt_gemm_plan_make_for(&d, isa, 1, &tiny_caches, &small) == HWT_OK, "plan tiny caches");
  CHECK(small.kc <= big.kc && small.mc < big.mc && small.nc < big.nc,
        "%s: tiny caches kc %d mc %d nc %d vs large %d %d %d", hwt_isa_name(isa), small.kc,
        small.mc, small.nc, big.kc, big.mc, big.nc);
  CHECK(big.mc % big.mr == 0 && big.nc % big.nr == 0 && small.mc % small.mr == 0 &&
            small.nc % small.nr == 0,
        "%s: blocks not whole micro-tiles", hwt_isa_name(isa));
  /* Unknown caches (0) take the documented fallback, never a zero block. */
  const hwt_cache_sizes unknown = {0, 0, 0, 0};
  hwt_gemm_plan fb;
  CHECK(hwt_gemm_plan_make_for(&d, isa, 1, &unknown, &fb) == HWT_OK && fb.kc > 0 &&
            fb.mc >= fb.mr && fb.nc >= fb.nr,
        "%s: fallback blocking kc %d mc %d nc %d", hwt_isa_name(isa), fb.kc, fb.mc, fb.nc);
}

/* Disjoint + complete: with beta = 1 and C = 0, a tile computed twice comes
   out as 2*AB and a tile never computed stays 0. A = B = 1 gives AB = K. */
static void check_partition(hwt_isa isa, int M, int N, int K, int nth) {
  hwt_gemm_desc d = {M, N, K, 0, 0, K, N, N, 1.0f};
  float *A = malloc((size_t)M * K * sizeof(float)), *B = malloc((size_t)K * N * sizeof(float));
  float *C = calloc((size_t)M * N, sizeof(float));
  for (size_t i = 0; i < (size_t)M * K; i++) A[i] = 1.0f;
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = 1.0f;
  hwt_gemm_plan p;
  CHECK(hwt_gemm_plan_make(&d, isa, nth, &p) == HWT_OK, "plan");
  float *ws = alloc_floats(p.ws_floats);
  int idle = 0;
  size_t before = 0;
  for (int t = 0; t < nth; t++) {
    hwt_gemm_run_part(&p, A, B, C, NULL, ws, t, nth);
    size_t done = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) done += C[i] != 0.0f;
    idle += done == before;
    before = done;
  }
  free(ws);
  int bad = 0;
  for (size_t i = 0; i < (size_t)M * N; i++) bad += C[i] != (float)K;
  CHECK(bad == 0, "%s partition M=%d N=%d nth=%d: %d elements missed or done twice",
        hwt_isa_name(isa), M, N, nth, bad);
  /* Enough tiles for everyone (the GEMV path, M <= 6, splits N in 16-column
     units). */
  int mr = p.mr, nr = p.nr;
  long tiles = M <= 6 ? (N + 15) / 16 : (long)((M + mr - 1) / mr) * ((N + nr - 1) / nr);
  if (tiles >= 4L * nth) CHECK(idle == 0, "%s M=%d N=%d nth=%d: %d idle threads",
                               hwt_isa_name(isa), M, N, nth, idle);
  free(A); free(B); free(C);
}

/* Shares really run concurrently (each thread its own workspace, no locks)
   must give the sequential result; under -DHWTUNE_SANITIZE=thread this also
   checks that run_part shares no mutable state. */
typedef struct {
  const hwt_gemm_plan *p;
  const float *A, *B, *bias;
  float *C, *ws;
  int tid, nth;
} share_arg;

static void *share_main(void *arg) {
  share_arg *s = arg;
  hwt_gemm_run_part(s->p, s->A, s->B, s->C, s->bias, s->ws, s->tid, s->nth);
  return NULL;
}

static void check_threads(hwt_isa isa, int M, int N, int K, int nth) {
  hwt_gemm_desc d = {M, N, K, 0, 1, K, K, N, 0.5f};
  float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)N * K), *bias = rand_buf(N);
  float *C = rand_buf((size_t)M * N), *R = malloc((size_t)M * N * sizeof(float));
  memcpy(R, C, (size_t)M * N * sizeof(float));
  hwt_gemm_plan p;
  CHECK(hwt_gemm_plan_make(&d, isa, nth, &p) == HWT_OK, "plan");
  pthread_t th[8];
  share_arg args[8];
  for (int t = 0; t < nth; t++) {
    args[t] = (share_arg){&p, A, B, bias, C, alloc_floats(p.ws_floats), t, nth};
    CHECK(pthread_create(&th[t], NULL, share_main, &args[t]) == 0, "pthread_create");
  }
  for (int t = 0; t < nth; t++) pthread_join(th[t], NULL);
  hwt_gemm_ref(&d, A, B, R, bias);
  double worst = 0.0;
  for (size_t i = 0; i < (size_t)M * N; i++) {
    double e = fabs((double)C[i] - (double)R[i]);
    if (!(e <= worst)) worst = e;
  }
  CHECK(worst <= 8.0 * 1.2e-7 * (K + 4), "%s threads M=%d N=%d K=%d nth=%d: max err %g",
        hwt_isa_name(isa), M, N, K, nth, worst);
  for (int t = 0; t < nth; t++) free(args[t].ws);
  free(A); free(B); free(bias); free(C); free(R);
}

int main(void) {
  static const int shapes[][3] = {
      {1, 1, 1},   {1, 13, 7},  {1, 97, 31},  {3, 7, 13},   {4, 33, 97}, {5, 1, 1},
      {7, 13, 31}, {13, 97, 7}, {31, 33, 97}, {97, 31, 13}, {6, 16, 0},  {25, 65, 300},
      {37, 200, 515}};
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  static const int nths[] = {1, 2, 3, 7};
  int variants = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    variants++;
    for (int s = 0; s < nshapes; s++)
      for (int t = 0; t < 4; t++)
        for (int v = 0; v < 4; v++) {
          int nth = nths[(s + t + v) % 4];
          check_case((hwt_isa)isa, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                     (v & 1) ? 0.5f : 0.0f, v >> 1, (s + v) % 3 == 0 ? 3 : 0, nth);
        }
    /* A K large enough to need several kc blocks (beta/bias on the first only). */
    check_case((hwt_isa)isa, 30, 70, 1100, 0, 0, 0.5f, 1, 1, 2);
    check_case((hwt_isa)isa, 30, 70, 1100, 1, 1, 0.0f, 1, 0, 3);
    /* Several kc, mc and nc blocks on small shapes: B packed as it goes by
       the first A block and reused by the next ones, edges in every block. */
    for (int t = 0; t < 4; t++) {
      check_case_in((hwt_isa)isa, 100, 141, 300, t & 1, t >> 1, 0.5f, 1, 1, 1 + t % 3,
                    &tiny_caches);
      check_case_in((hwt_isa)isa, 61, 300, 70, t & 1, t >> 1, 0.0f, t & 1, 0, 1 + t,
                    &tiny_caches);
    }
    check_blocking((hwt_isa)isa);
    static const int pnth[] = {1, 2, 3, 5, 7, 16, 64, 255, 256};
    for (int i = 0; i < (int)(sizeof pnth / sizeof pnth[0]); i++) {
      check_partition((hwt_isa)isa, 100, 300, 5, pnth[i]);
      check_partition((hwt_isa)isa, 13, 2100, 3, pnth[i]);
      check_partition((hwt_isa)isa, 2, 3000, 3, pnth[i]);
      check_partition((hwt_isa)isa, 500, 20, 3, pnth[i]);
    }
    check_threads((hwt_isa)isa, 61, 130, 70, 3);
    check_threads((hwt_isa)isa, 3, 300, 50, 4);
    check_threads((hwt_isa)isa, 150, 40, 33, 8);
  }
  /* Contract errors. */
  hwt_gemm_desc d = {4, 4, 4, 0, 0, 4, 4, 4, 0.0f};
  hwt_gemm_plan p;
  CHECK(hwt_gemm_plan_make(&d, HWT_ISA_COUNT, 1, &p) == HWT_EISA, "unknown ISA");
  CHECK(hwt_gemm_plan_make(&d, HWT_ISA_GENERIC, 0, &p) == HWT_EINVAL, "nth 0");
  CHECK(hwt_gemm_plan_make(&d, HWT_ISA_GENERIC, 1, &p) == HWT_OK, "plan");
  CHECK(hwt_gemm_pack_b(NULL, NULL, NULL) == HWT_EINVAL, "pack_b NULL plan");
  CHECK(hwt_gemm_pack_b(&p, NULL, NULL) == HWT_EINVAL, "pack_b NULL buffers");
  d.lda = 3;
  CHECK(hwt_gemm_plan_make(&d, HWT_ISA_GENERIC, 1, &p) == HWT_EINVAL, "lda < K");
  d.lda = 4;
  d.M = -1;
  CHECK(hwt_gemm_plan_make(&d, HWT_ISA_GENERIC, 1, &p) == HWT_EINVAL, "negative M");
  CHECK(variants >= 1, "no variant ran");
  return check_verdict("test_gemm: %d ISA variants OK\n", variants);
}
