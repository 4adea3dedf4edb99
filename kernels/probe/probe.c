/* Probe dispatcher: picks the ISA variant of the FMA and triad bodies. */
#include "hwtune/probe.h"
#include "../eltwise/eltwise_impl.h"
#include "probe_impl.h"

volatile float hwt_probe_sink;

double hwt_probe_fma_thread(hwt_isa isa, long iters) {
  if (iters < 0) return HWT_EINVAL;
  if (!hwt_ew_isa_ok(isa)) return HWT_EISA;
  switch (isa) {
#if defined(HWTUNE_HAVE_X86)
    case HWT_ISA_AVX512: return hwt_fma_avx512(iters);
    case HWT_ISA_AVX2: return hwt_fma_avx2(iters);
#endif
    default: return hwt_fma_generic(iters);
  }
}

void hwt_probe_triad_part(hwt_isa isa, float *a, const float *b, const float *c, float s,
                          size_t n, int nt_stores, int tid, int nth) {
  if (nth < 1 || tid < 0 || tid >= nth) return;
  size_t lo, hi;
  hwt_ew_share(a, n, tid, nth, &lo, &hi);
  if (lo >= hi) return;
#if defined(HWTUNE_HAVE_X86)
  if (isa == HWT_ISA_AVX512 && hwt_ew_isa_ok(isa)) {
    hwt_triad_avx512(a + lo, b + lo, c + lo, s, hi - lo, nt_stores);
    return;
  }
  if (isa == HWT_ISA_AVX2 && hwt_ew_isa_ok(isa)) {
    hwt_triad_avx2(a + lo, b + lo, c + lo, s, hi - lo, nt_stores);
    return;
  }
#endif
  (void)isa, (void)nt_stores; /* portable C has no streaming store */
  hwt_triad_generic(a + lo, b + lo, c + lo, s, hi - lo);
}
