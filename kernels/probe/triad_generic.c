/* STREAM triad body in portable C (the compiler vectorises it with SSE2 on
 * x86-64); no FMA instruction here, so the result is b + s*c rounded twice. */
#include "probe_impl.h"

void hwt_triad_generic(float *a, const float *b, const float *c, float s, size_t n) {
  for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
