/* Documented error bounds of the fast activations, per variant.
 *
 * Measured by `test_eltwise --exhaustive` (tests/c/test_eltwise.c): every
 * float with 2^-12 <= |x| < 128, both signs, against libm in double, on a
 * Xeon (Cascade Lake) with gcc 12, then rounded up to two significant
 * digits. Maxima found (x in hex):
 *   sigmoid  generic 8.931e-08 (0x1.f6fd5p+2)  avx2 8.931e-08 (0x1.f6fd5p+2)
 *            avx512  8.986e-08 (0x1.44cceep+2)
 *   tanh     generic 8.678e-08 (0x1.445e12p-1) avx2 8.203e-08 (0x1.42c39ep-1)
 *            avx512  8.203e-08 (0x1.42c39ep-1)
 * Outside that range the default test's strided sweep (denormals up to
 * |x| = 1024) stays below these; beyond, both functions are exactly
 * saturated. About 1.5 ulp of an output in [0.5, 1): the approximation's
 * own error plus the final rounding. */
#include "hwtune/eltwise.h"

double hwt_eltwise_max_abs_error(hwt_ew_op op, hwt_isa isa) {
  switch (op) {
    case HWT_EW_SIGMOID: return 9.0e-8;
    case HWT_EW_TANH: return isa == HWT_ISA_GENERIC ? 8.7e-8 : 8.3e-8;
    default: return 0.0;
  }
}
