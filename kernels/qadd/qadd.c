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
static hwt_qadd_u8_fn *const rows_u8[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = hwt_qadd_u8_run_generic,
#if defined(HWTUNE_HAVE_X86)
    [HWT_ISA_AVX2] = hwt_qadd_u8_run_avx2,
    [HWT_ISA_AVX512] = hwt_qadd_u8_run_avx512,
#endif
};

static int runs(hwt_isa isa) {
  return (int)isa >= 0 && isa < HWT_ISA_COUNT && rows[isa] && hwt_isa_supported(isa);
}

void hwt_qadd(hwt_isa isa, const hwt_qadd_params *p, const float *a, const float *b, float *y,
              int64_t n) {
  (runs(isa) ? rows[isa] : hwt_qadd_run_generic)(p, a, b, y, n);
}

void hwt_qadd_u8(hwt_isa isa, const hwt_qadd_params *p, const uint8_t *a, const uint8_t *b,
                 uint8_t *y, int64_t n) {
  (runs(isa) ? rows_u8[isa] : hwt_qadd_u8_run_generic)(p, a, b, y, n);
}
