/* Cache blocking (BLIS's analysis, transposed to row-major C), from the cache
 * sizes of the fingerprint (hwt_cache_sizes_host, or the ones a plan is made
 * for). Which operand each level holds depends on the variant's loop order
 * (gemm_internal.h):
 *   A_IN_L1: kc x mr A micro-panel in L1, kc x nc B block in L2, mc x kc A
 *            block beside it in L2.
 *   B_IN_L1: kc x nr B micro-panel in L1, mc x kc A block in L2, kc x nc B
 *            block in this thread's share of L3. */
#include "gemm_internal.h"

/* Fallback for a cache the host does not report: the smallest of the x86
 * server cores this project targets (Haswell/Broadwell Xeons: 32 KiB L1d,
 * 256 KiB L2, 2.5 MiB of L3 per core, rounded down). Blocks sized for smaller
 * caches than the real ones stay correct and cost a few percent. */
#define FALLBACK_L1D (32L << 10)
#define FALLBACK_L2 (256L << 10)
#define FALLBACK_L3_PER_CPU (2L << 20)

/* Split n into the fewest chunks of at most cap, then even them out (so
 * K = 300 with cap 256 gives 150 + 150, not 256 + 44), rounded up to `unit`. */
static int balanced(int n, int cap, int unit) {
  if (n <= 0) return unit;
  int chunks = (n + cap - 1) / cap;
  int b = (n + chunks - 1) / chunks;
  return (b + unit - 1) / unit * unit;
}

static int clamp(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* Largest multiple of unit that is <= bytes / (floats per unit step * 4),
 * at least unit. */
static int fit(long bytes, long floats_per_step, int unit) {
  long n = bytes / (floats_per_step * (long)sizeof(float)) / unit * unit;
  return n < unit ? unit : (n > (1L << 30) ? 1 << 30 : (int)n);
}

static void a_in_l1(const hwt_gemm_variant *v, const hwt_gemm_desc *d, long l1, long l2,
                    int *mc, int *kc, int *nc) {
  /* Half of L1 for the A micro-panel leaves the other half for the B lines in
     flight and C; 12x32 gives kc <= 341, BLIS's skx sgemm uses 384. */
  *kc = balanced(d->K, clamp(l1 / 2 / ((long)v->mr * (long)sizeof(float)), 64, 512), 4);
  if (*kc > d->K && d->K > 0) *kc = d->K;
  /* Half of L2 for the B block: the rest holds the A block being streamed. */
  *nc = balanced(d->N, fit(l2 / 2, *kc, v->nr), v->nr);
  /* A block: a quarter of L2, so a share's A block and B block coexist there. */
  *mc = balanced(d->M, fit(l2 / 4, *kc, v->mr), v->mr);
}

#ifndef MC_L2_PERCENT
#define MC_L2_PERCENT 30
#endif

/* Bounds of the shallow, wide GEMMs whose A block b_in_l1 cuts to two
   micro-panels of rows (measurements there). */
#define SHALLOW_MAX_K 32
#define SHALLOW_MIN_ROW_BYTES (32L << 10)

static void b_in_l1(const hwt_gemm_variant *v, const hwt_gemm_desc *d, long l1, long l2,
                    long l3, int *mc, int *kc, int *nc) {
  /* The B micro-panel takes half of L1; the A micro-panels stream through
     the other half. 32 KiB L1d and nr = 16 give kc = 256, BLIS's zen3 kc. */
  *kc = balanced(d->K, clamp(l1 / 2 / ((long)v->nr * (long)sizeof(float)), 64, 512), 4);
  if (*kc > d->K && d->K > 0) *kc = d->K;
  /* A block: MC_L2_PERCENT of L2 (the B micro-panels of the L3 block pass
     through L2 too). */
  *mc = balanced(d->M, fit(l2 * MC_L2_PERCENT / 100, *kc, v->mr), v->mr);
  /* B block: half of this thread's L3 share. */
  *nc = balanced(d->N, fit(l3 / 2, *kc, v->nr), v->nr);
  /* Shallow and wide (a LoRA up-projection, K = rank, N = 8192-14336; the
     1x1 CONVs' GEMMs at 112x112 before their column blocks, conv.c
     pw_chunk): each B panel step stores one line into every row of the A
     block, rows a C row (>= 32 KiB) apart, with only K FMAs a stored
     element to hide those misses. Two micro-panels of rows at a time
     instead of the whole M: hwt_gemm_run_part, 1 thread, B packed by the
     call, Zen 3 AVX2, load 1.6-2 (other jobs), medians of 31 interleaved
     thread-time samples, two runs (benchmarks/gemm_ab.py, whole M / two
     panels): 96x16x12544 1.82x, 2.11x; 144x24x12544 1.50x, 1.42x;
     512x32x8192 1.41x, 1.50x; 128x16x11008 1.24x, 1.05x faster, while the
     shapes it leaves alone read 0.87-1.29x in the same runs (the noise).
     Deeper K lost with two panels (128x128x12544 0.85x, 256x256x3136
     0.86x; 64x64x12544 0.92-1.07x), as did shorter rows (192x32x784
     0.86-0.95x, 96x16x3136 0.95x): hence both bounds. Not for the few
     rows that read B where it lies (gemm.c run_tiles_direct), where a
     second A block reads all of B again: 16x32x12544 0.93x, 0.95x. */
  if (d->K <= SHALLOW_MAX_K && (long)d->ldc * (long)sizeof(float) >= SHALLOW_MIN_ROW_BYTES &&
      d->M > HWT_GEMM_DIRECT_MAX_M && *mc > 2 * v->mr)
    *mc = 2 * v->mr;
}

void hwt_gemm_blocking(const hwt_gemm_variant *v, const hwt_gemm_desc *d,
                       const hwt_cache_sizes *cs, int *mc, int *kc, int *nc) {
  long l1 = cs && cs->l1d > 0 ? cs->l1d : FALLBACK_L1D;
  long l2 = cs && cs->l2 > 0 ? cs->l2 : FALLBACK_L2;
  long l3 = cs && cs->l3 > 0 ? cs->l3 / (cs->l3_cpus > 0 ? cs->l3_cpus : 1)
                             : FALLBACK_L3_PER_CPU;
  if (v->order == HWT_GEMM_B_IN_L1)
    b_in_l1(v, d, l1, l2, l3, mc, kc, nc);
  else
    a_in_l1(v, d, l1, l2, mc, kc, nc);
}
