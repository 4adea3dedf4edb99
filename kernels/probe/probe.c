/* Probe dispatcher: the ISA variant of the FMA and triad bodies comes from
 * the registration table (kernels/common/variants.c). */
#include "hwtune/probe.h"
#include "../eltwise/eltwise_impl.h"
#include "probe_impl.h"

volatile float hwt_probe_sink;

double hwt_probe_fma_thread(hwt_isa isa, long iters) {
  if (iters < 0) return HWT_EINVAL;
  if (!hwt_isa_supported(isa)) return HWT_EISA;
  return hwt_probe_variant_for(isa)->fma(iters);
}

void hwt_probe_triad_part(hwt_isa isa, float *a, const float *b, const float *c, float s,
                          size_t n, int nt_stores, int tid, int nth) {
  if (nth < 1 || tid < 0 || tid >= nth) return;
  size_t lo, hi;
  hwt_ew_share(a, n, tid, nth, &lo, &hi);
  if (lo >= hi) return;
  /* an ISA the CPU lacks runs the portable body */
  hwt_probe_variant_for(isa)->triad(a + lo, b + lo, c + lo, s, hi - lo, nt_stores);
}
