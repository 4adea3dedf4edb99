/* hwt_qadd's dispatch: the variant row of the asked ISA where this build
 * and CPU have it, else the portable one. */
#include "hwtune/isa.h"
#include "qadd_internal.h"

static hwt_qadd_fn *const rows[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = hwt_qadd_run_generic,
#if defined(HWTUNE_HAVE_X86)
    [HWT_ISA_AVX2] = hwt_qadd_run_avx2,
    [HWT_ISA_AVX512] = hwt_qadd_run_avx512,
#endif
};

void hwt_qadd(hwt_isa isa, const hwt_qadd_params *p, const float *a, const float *b, float *y,
              int64_t n) {
  hwt_qadd_fn *f = (int)isa >= 0 && isa < HWT_ISA_COUNT && rows[isa] && hwt_isa_supported(isa)
                       ? rows[isa]
                       : hwt_qadd_run_generic;
  f(p, a, b, y, n);
}
