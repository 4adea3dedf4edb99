/* hwt_qdw_rows' dispatch: the variant row of the asked ISA where this
 * build and CPU have it and the channels fill whole vectors of it (the
 * byte loads read a vector's worth of channels), else the portable one. */
#include "qdw_internal.h"

static hwt_qdw_fn *const rows[HWT_ISA_COUNT] = {
    [HWT_ISA_GENERIC] = hwt_qdw_run_generic,
#if defined(HWTUNE_HAVE_X86)
    [HWT_ISA_AVX2] = hwt_qdw_run_avx2,
    [HWT_ISA_AVX512] = hwt_qdw_run_avx512,
#endif
};
static const int lanes[HWT_ISA_COUNT] = {[HWT_ISA_GENERIC] = 1,
#if defined(HWTUNE_HAVE_X86)
                                         [HWT_ISA_AVX2] = 8, [HWT_ISA_AVX512] = 16
#endif
};

int hwt_qdw_cp(int C) { return (C + 15) / 16 * 16; }

int64_t hwt_qdw_ws_floats(const hwt_qdw_desc *d) {
  return (d->out_u8 ? 0 : (int64_t)d->OW * hwt_qdw_cp(d->C)) + hwt_qdw_cp(d->C);
}

void hwt_qdw_rows(const hwt_qdw_desc *d, hwt_isa isa, const uint8_t *x, int x_row0, void *y,
                  int oh0, int oh1, float *ws) {
  const int ok = (int)isa >= 0 && isa < HWT_ISA_COUNT && rows[isa] && hwt_isa_supported(isa) &&
                 d->C % lanes[isa] == 0;
  (ok ? rows[isa] : hwt_qdw_run_generic)(d, x, x_row0, y, oh0, oh1, ws);
}
