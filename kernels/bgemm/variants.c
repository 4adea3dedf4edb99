/* Registration: the micro-kernel tile of each bf16 ISA variant. The driver
 * never names an ISA-specific function. */
#include "bgemm_internal.h"

static const hwt_bgemm_variant variants[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = {4, 16, hwt_bgemm_ukr_generic_4x16, hwt_bgemm_pair_generic},
#if defined(HWTUNE_HAVE_X86)
    /* No AVX2 row: AVX2 has no bf16 product (hwt_bgemm_variant_for maps it
     * to the portable row). */
    [HWT_ISA_AVX512] = {8, 32, hwt_bgemm_ukr_avx512bf16_8x32, hwt_bgemm_pair_avx512bf16},
#endif
};

const hwt_bgemm_variant *hwt_bgemm_variant_get(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !variants[isa].ukr) return NULL;
  return &variants[isa];
}
