/* Probe dispatcher: picks the ISA variant of the FMA and triad bodies from
 * the variant table. */
#include "hwtune/probe.h"
#include "../eltwise/eltwise_impl.h"
#include "probe_impl.h"

volatile float hwt_probe_sink;

/* Per ISA: the row body.c exports for it (NULL where this build has none). */
static const hwt_probe_variant *const k_variants[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = &hwt_probe_variant_generic,
#if defined(HWTUNE_HAVE_X86)
    [HWT_ISA_AVX2] = &hwt_probe_variant_avx2,
    [HWT_ISA_AVX512] = &hwt_probe_variant_avx512,
#endif
};

static const hwt_probe_variant *variant(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !k_variants[isa] || !hwt_isa_supported(isa))
    return NULL;
  return k_variants[isa];
}

double hwt_probe_fma_thread(hwt_isa isa, long iters) {
  if (iters < 0) return HWT_EINVAL;
  const hwt_probe_variant *v = variant(isa);
  return v ? v->fma(iters) : HWT_EISA;
}

void hwt_probe_triad_part(hwt_isa isa, float *a, const float *b, const float *c, float s,
                          size_t n, int nt_stores, int tid, int nth) {
  if (nth < 1 || tid < 0 || tid >= nth) return;
  size_t lo, hi;
  hwt_ew_share(a, n, tid, nth, &lo, &hi);
  if (lo >= hi) return;
  const hwt_probe_variant *v = variant(isa);
  if (!v) v = &hwt_probe_variant_generic; /* an ISA the CPU lacks: the portable body */
  v->triad(a + lo, b + lo, c + lo, s, hi - lo, nt_stores);
}
