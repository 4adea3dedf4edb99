/* Registration: per ISA, the row each kernel family's vector body exports
 * for it (BLIS's context per architecture). The one place that lists which
 * compiled variants exist; the families ask it, never naming an ISA. GEMM
 * keeps its own table (gemm/variants.c). */
#include "hwtune/isa.h"
#include "../conv/conv_internal.h"
#include "../conv/dw_impl.h"
#include "../eltwise/eltwise_impl.h"
#include "../norm/norm_impl.h"
#include "../pool/pool_impl.h"
#include "../probe/probe_impl.h"
#include "../rnn/cell_impl.h"

typedef struct {
  const hwt_ew_variant *eltwise;
  const hwt_conv_variant *conv;
  const hwt_probe_variant *probe;
  const hwt_wino_variant *wino;
  const hwt_pool2d_variant *pool;
  const hwt_lstm_variant *lstm;
  const hwt_dwconv_variant *dwconv;
  const hwt_norm_variant *norm;
} variant_row;

static const variant_row k_rows[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = {&hwt_ew_variant_generic, &hwt_conv_variant_generic,
                         &hwt_probe_variant_generic, &hwt_wino_variant_generic,
                         &hwt_pool2d_variant_generic, &hwt_lstm_variant_generic,
                         &hwt_dwconv_variant_generic, &hwt_norm_variant_generic},
#if defined(HWTUNE_HAVE_X86) && !defined(HWTUNE_NO_ROW_AVX2)
    [HWT_ISA_AVX2] = {&hwt_ew_variant_avx2, &hwt_conv_variant_avx2, &hwt_probe_variant_avx2,
                      &hwt_wino_variant_avx2, &hwt_pool2d_variant_avx2, &hwt_lstm_variant_avx2,
                      &hwt_dwconv_variant_avx2, &hwt_norm_variant_avx2},
#endif
/* A sanitizer build leaves out the rows of variants its host cannot run
   (kernels/kernels.cmake); row() then falls back to the portable one. */
#if defined(HWTUNE_HAVE_X86) && !defined(HWTUNE_NO_ROW_AVX512)
    [HWT_ISA_AVX512] = {&hwt_ew_variant_avx512, &hwt_conv_variant_avx512,
                        &hwt_probe_variant_avx512, &hwt_wino_variant_avx512,
                        &hwt_pool2d_variant_avx512, &hwt_lstm_variant_avx512,
                        &hwt_dwconv_variant_avx512, &hwt_norm_variant_avx512},
#endif
};

/* isa's row when this build has it and the CPU runs it (the answer is
 * cached: CPUID is not re-run per call), else the portable row. */
static const variant_row *row(hwt_isa isa) {
  if ((int)isa >= 0 && isa < HWT_ISA_COUNT && k_rows[isa].eltwise && hwt_isa_supported(isa))
    return &k_rows[isa];
  return &k_rows[HWT_ISA_GENERIC];
}

const hwt_ew_variant *hwt_ew_variant_for(hwt_isa isa) { return row(isa)->eltwise; }
const hwt_conv_variant *hwt_conv_variant_for(hwt_isa isa) { return row(isa)->conv; }
const hwt_probe_variant *hwt_probe_variant_for(hwt_isa isa) { return row(isa)->probe; }
const hwt_wino_variant *hwt_wino_variant_for(hwt_isa isa) { return row(isa)->wino; }
const hwt_pool2d_variant *hwt_pool2d_variant_for(hwt_isa isa) { return row(isa)->pool; }
const hwt_lstm_variant *hwt_lstm_variant_for(hwt_isa isa) { return row(isa)->lstm; }
const hwt_dwconv_variant *hwt_dwconv_variant_for(hwt_isa isa) { return row(isa)->dwconv; }
const hwt_norm_variant *hwt_norm_variant_for(hwt_isa isa) { return row(isa)->norm; }

/* Bounds are documented per compiled variant, whatever this CPU runs. */
const hwt_ew_variant *hwt_ew_variant_compiled(hwt_isa isa) {
  return (int)isa >= 0 && isa < HWT_ISA_COUNT ? k_rows[isa].eltwise : NULL;
}
