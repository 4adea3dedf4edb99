/* Registration: the micro-kernel tile and packed layout of each int8 ISA
 * variant. The driver never names an ISA-specific function. */
#include "qgemm_internal.h"

static const hwt_qgemm_variant variants[HWT_ISA_COUNT] = {
    /* int16 pairs, 4x8: plain C that GCC turns into pmaddwd on SSE2. */
    [HWT_ISA_GENERIC] = {4, 8, 2, 2, hwt_qgemm_ukr_generic_4x8, hwt_qgemm_pack_a_generic,
                          hwt_qgemm_pack_b_generic, hwt_qgemm_epi_generic},
#if defined(HWTUNE_HAVE_X86)
    /* int16 pairs, 6x16: 12 ymm accumulators + 2 B vectors + 1 broadcast
     * of 16; vpmaddwd then vpaddd per accumulator and k pair (exact). */
    [HWT_ISA_AVX2] = {6, 16, 2, 2, hwt_qgemm_ukr_avx2_6x16, hwt_qgemm_pack_a_avx2,
                       hwt_qgemm_pack_b_avx2, hwt_qgemm_epi_avx2},
    /* u8/s8 quads, 8x32: 16 zmm accumulators + 2 B vectors + 1 broadcast;
     * one vpdpbusd per accumulator and k quad. */
    [HWT_ISA_AVX512] = {8, 32, 4, 1, hwt_qgemm_ukr_avx512vnni_8x32, hwt_qgemm_pack_a_avx512,
                         hwt_qgemm_pack_b_avx512, hwt_qgemm_epi_avx512},
#endif
};

const hwt_qgemm_variant *hwt_qgemm_variant_get(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !variants[isa].ukr) return NULL;
  return &variants[isa];
}
