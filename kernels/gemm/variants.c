/* Registration: which micro-kernel tile and GEMV each ISA variant uses. The
 * driver never names an ISA-specific function; it asks this table. */
#include "gemm_internal.h"

static const hwt_gemm_variant variants[HWT_ISA_COUNT] = {
    /* 4x8: 8 SSE2 accumulators out of 16 xmm; plain C, autovectorised. */
    [HWT_ISA_GENERIC] = {4, 8, hwt_gemm_ukr_generic_4x8, hwt_gemm_pack_a_generic,
                          hwt_gemm_pack_b_generic, hwt_gemv_generic, NULL},
#if defined(HWTUNE_HAVE_X86)
    /* 6x16: 12 ymm accumulators + 2 B vectors + 1 broadcast of 16 ymm; 12
     * independent FMA chains cover 2 ports x 4-cycle latency (needs >= 8). */
    [HWT_ISA_AVX2] = {6, 16, hwt_gemm_ukr_avx2_6x16, hwt_gemm_pack_a_avx2, hwt_gemm_pack_b_avx2,
                       hwt_gemv_avx2, NULL},
    /* 12x32: 24 zmm accumulators + 2 B vectors, A broadcast from memory
     * (embedded {1to16}); 24 FMAs per 14 loads keeps both FMA ports busy. */
    [HWT_ISA_AVX512] = {12, 32, hwt_gemm_ukr_avx512_12x32, hwt_gemm_pack_a_avx512,
                         hwt_gemm_pack_b_avx512, hwt_gemv_avx512,
                         hwt_gemm_ukr_pack_avx512_12x32},
#endif
};

const hwt_gemm_variant *hwt_gemm_variant_get(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !variants[isa].ukr) return NULL;
  return &variants[isa];
}
