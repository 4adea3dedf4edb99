/* Registration: which micro-kernel tile and GEMV each ISA variant uses. The
 * driver never names an ISA-specific function; it asks this table. */
#include "gemm_internal.h"

/* pack_cost_flops: packing one float costs about this many flops of
 * micro-kernel time.
 * AVX-512 (Cascade Lake): packing B ran at 14-17 GB/s (~1.5 floats/cycle at
 * 2.5 GHz; pack B 512x512 in 62-75 us) while the 12x32 kernel retires ~56
 * flops/cycle, so ~40.
 * AVX2 and generic (Zen 3 EPYC, KVM, gemm_breakdown.py, 1 thread, medians of
 * 11): pack_b [512,512] took 62 us in the AVX2 build and 79 us in the generic
 * one (1.3 and 1.0 floats/cycle at 3.2 GHz), while the 6x16 kernel ran 89
 * GFLOPS (28 flops/cycle) and the 4x8 one 26 GFLOPS (8 flops/cycle) on
 * [64,512]x[512,512] with B prepacked: 20 and 8. */
#define PACK_COST_AVX2 20.0
#define PACK_COST_GENERIC 8.0

static const hwt_gemm_variant variants[HWT_ISA_COUNT] = {
    /* 4x8: 8 SSE2 accumulators out of 16 xmm; plain C, autovectorised. */
    [HWT_ISA_GENERIC] = {4, 8, hwt_gemm_ukr_generic_4x8, hwt_gemm_pack_a_generic,
                          hwt_gemm_pack_b_generic, hwt_gemv_generic, NULL, HWT_GEMM_A_IN_L1,
                          PACK_COST_GENERIC},
#if defined(HWTUNE_HAVE_X86)
    /* 6x16: 12 ymm accumulators + 2 B vectors + 1 broadcast of 16 ymm; 12
     * independent FMA chains cover 2 ports x 4-cycle latency (needs >= 8). */
    [HWT_ISA_AVX2] = {6, 16, hwt_gemm_ukr_avx2_6x16, hwt_gemm_pack_a_avx2, hwt_gemm_pack_b_avx2,
                       hwt_gemv_avx2, hwt_gemm_ukr_pack_avx2_6x16, HWT_GEMM_B_IN_L1,
                       PACK_COST_AVX2},
    /* 12x32: 24 zmm accumulators + 2 B vectors, A broadcast from memory
     * (embedded {1to16}); 24 FMAs per 14 loads keeps both FMA ports busy. */
    [HWT_ISA_AVX512] = {12, 32, hwt_gemm_ukr_avx512_12x32, hwt_gemm_pack_a_avx512,
                         hwt_gemm_pack_b_avx512, hwt_gemv_avx512,
                         hwt_gemm_ukr_pack_avx512_12x32, HWT_GEMM_A_IN_L1, 40.0},
#endif
};

const hwt_gemm_variant *hwt_gemm_variant_get(hwt_isa isa) {
  if ((int)isa < 0 || isa >= HWT_ISA_COUNT || !variants[isa].ukr) return NULL;
  return &variants[isa];
}
