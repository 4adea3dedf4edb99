/* Single-thread hardware probes: the per-thread bodies of the peak-FMA and
 * STREAM-triad measurements. The timed, multi-threaded wrappers
 * (hwt_probe_fma_peak, hwt_probe_triad) live in hwtune/bench.h. */
#ifndef HWTUNE_PROBE_H
#define HWTUNE_PROBE_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

/* Runs `iters` rounds of independent FP32 FMA chains held in registers, on
 * the calling thread, with enough chains to keep both FMA ports busy.
 * Returns the flops executed (2 per lane per FMA; the portable variant
 * counts a multiply plus an add as 2), or a negative HWT_E* status:
 * HWT_EISA for an ISA this CPU lacks, HWT_EINVAL for iters < 0. */
HWT_API double hwt_probe_fma_thread(hwt_isa isa, long iters);

/* Thread tid's share (of nth) of the STREAM triad a[i] = b[i] + s * c[i],
 * i in [0, n). Shares are split on 64-byte lines of `a` exactly as
 * hwt_eltwise_run_part() splits `out`, so threads never share a line.
 * nt_stores: stream `a` past the caches (then fence). An ISA the CPU lacks
 * runs the portable variant; invalid tid/nth do nothing. */
HWT_API void hwt_probe_triad_part(hwt_isa isa, float *a, const float *b, const float *c,
                                  float s, size_t n, int nt_stores, int tid, int nth);

#endif
