/* The probe variant body, compiled once per ISA over kernels/common/vec.h
 * (kernels.cmake): the peak-FMA chains and the STREAM triad. */
#include "../common/vec.h"
#include "probe_impl.h"

/* Independent accumulator chains. An FMA has 4 cycles of latency and two
 * ports issue one each per cycle, so at least 8 chains must be in flight.
 * AVX2: 10 leave slack and fit the 16 ymm with the two constants. AVX-512:
 * 12 leave slack for the loop's own uops and still fit the 32 zmm. Portable:
 * 32 floats are 8 SSE2 registers, enough to cover the 8-cycle
 * multiply-then-add latency at one step per cycle. */
#define CHAINS HV_BY_ISA(32, 10, 12)
/* SIMD: unrolled, so the chains are scalarised into registers. Portable:
 * left a loop over j, which the compiler vectorises (unrolled, it stays
 * scalar: 10 instead of 33 GFLOPS on a Zen 3). */
#if HV_W > 1
#define UNROLL_CHAINS _Pragma("GCC unroll 32")
#else
#define UNROLL_CHAINS
#endif

static double fma_chains(long iters) {
  /* acc = acc * m + k converges to k / (1 - m) ~ 1e3: values stay normal,
   * never overflow and never reach denormals, which would slow the FMAs. */
  const hv_f32 m = hv_set1(1.0f - 0x1p-20f), k = hv_set1(1e-3f);
  hv_f32 acc[CHAINS];
  UNROLL_CHAINS
  for (int j = 0; j < CHAINS; j++) acc[j] = hv_set1((float)j);
  for (long i = 0; i < iters; i++) {
    UNROLL_CHAINS
    for (int j = 0; j < CHAINS; j++) acc[j] = hv_fmadd(acc[j], m, k);
  }
  hv_f32 s = hv_zero();
  UNROLL_CHAINS
  for (int j = 0; j < CHAINS; j++) s = hv_add(s, acc[j]);
  hwt_probe_sink = hv_reduce_add(s);
  /* 2 flops per lane per step (the portable variant's multiply plus add) */
  return (double)iters * CHAINS * HV_W * 2;
}

/* a = fma(s, c, b) (the portable variant rounds twice: b + s*c). A masked
 * head until `a` reaches a vector boundary (streaming stores need it), two
 * vectors per iteration, a masked tail. */
static void triad(float *a, const float *b, const float *c, float s, size_t n, int nt) {
  const hv_f32 vs = hv_set1(s);
  if (HV_W == 1) {
    for (size_t i = 0; i < n; i++) hv_store(a + i, hv_fmadd(vs, hv_load(c + i), hv_load(b + i)));
    return;
  }
  const size_t vbytes = HV_W * sizeof(float);
  uintptr_t addr = (uintptr_t)a;
  if (addr % sizeof(float)) nt = 0;
  size_t i = addr % sizeof(float) ? 0 : ((vbytes - addr % vbytes) % vbytes) / sizeof(float);
  if (i > n) i = n;
  if (i) {
    hv_mask m = hv_first((long)i);
    hv_store_mask(a, m, hv_fmadd(vs, hv_load_mask(c, m), hv_load_mask(b, m)));
  }
  if (nt) {
    for (; i + 2 * HV_W <= n; i += 2 * HV_W) {
      hv_stream(a + i, hv_fmadd(vs, hv_load(c + i), hv_load(b + i)));
      hv_stream(a + i + HV_W, hv_fmadd(vs, hv_load(c + i + HV_W), hv_load(b + i + HV_W)));
    }
  } else {
    for (; i + 2 * HV_W <= n; i += 2 * HV_W) {
      hv_store(a + i, hv_fmadd(vs, hv_load(c + i), hv_load(b + i)));
      hv_store(a + i + HV_W, hv_fmadd(vs, hv_load(c + i + HV_W), hv_load(b + i + HV_W)));
    }
  }
  for (; i < n; i += HV_W) {
    hv_mask m = hv_first((long)(n - i));
    hv_store_mask(a + i, m, hv_fmadd(vs, hv_load_mask(c + i, m), hv_load_mask(b + i, m)));
  }
  if (nt) hv_stream_fence();
}

const hwt_probe_variant HWT_VARIANT(hwt_probe_variant) = {fma_chains, triad};
