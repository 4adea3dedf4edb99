/* Cache blocking (BLIS-style, transposed to row-major C): the ukernel keeps
 * one kc x mr A micro-panel in L1 while it streams kc x nr B micro-panels of
 * the packed kc x nc B block, which stays in L2. */
#include <unistd.h>
#include "gemm_internal.h"

/* sysconf cache queries are a glibc extension (CPUID leaf 4 underneath);
   elsewhere, or when it reports 0, use the fallback. */
static long cache_size(int level, long fallback) {
  long v = 0;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
#else
  (void)level;
#endif
  return v > 0 ? v : fallback;
}

/* Split n into the fewest chunks of at most cap, then even them out (so
 * K = 300 with cap 256 gives 150 + 150, not 256 + 44), rounded up to `unit`. */
static int balanced(int n, int cap, int unit) {
  if (n <= 0) return unit;
  int chunks = (n + cap - 1) / cap;
  int b = (n + chunks - 1) / chunks;
  return (b + unit - 1) / unit * unit;
}

void hwt_gemm_blocking(const hwt_gemm_variant *v, const hwt_gemm_desc *d, int *mc, int *kc,
                       int *nc) {
  /* Fallbacks: this machine class (Cascade Lake: 32 KiB L1d, 1 MiB L2/core). */
  long l1 = cache_size(1, 32L << 10);
  long l2 = cache_size(2, 1L << 20);
  /* Half of L1 for the A micro-panel leaves the other half for the B lines in
     flight and C; 12x32 gives kc <= 341, BLIS's skx sgemm uses 384. */
  int kc_max = (int)(l1 / 2 / ((long)v->mr * (long)sizeof(float)));
  if (kc_max > 512) kc_max = 512;
  if (kc_max < 64) kc_max = 64;
  *kc = balanced(d->K, kc_max, 4);
  if (*kc > d->K && d->K > 0) *kc = d->K;
  /* Half of L2 for the B block: the rest holds the A block being streamed. */
  int nc_max = (int)(l2 / 2 / ((long)*kc * (long)sizeof(float))) / v->nr * v->nr;
  if (nc_max < v->nr) nc_max = v->nr;
  *nc = balanced(d->N, nc_max, v->nr);
  /* A block: a quarter of L2, so a share's A block and B block coexist there. */
  int mc_max = (int)(l2 / 4 / ((long)*kc * (long)sizeof(float))) / v->mr * v->mr;
  if (mc_max < v->mr) mc_max = v->mr;
  *mc = balanced(d->M, mc_max, v->mr);
}
