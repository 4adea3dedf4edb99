/* Peak multiply-add body in portable C: an array of independent chains the
 * compiler keeps in (SSE2, on x86-64) registers. Without an FMA instruction
 * each step is a multiply and an add, counted as 2 flops. 32 chains: with 4
 * lanes per register that is 8 registers, enough to cover the 8-cycle
 * multiply-then-add latency at one step per cycle. */
#include "probe_impl.h"

#define CHAINS 32

double hwt_fma_generic(long iters) {
  float acc[CHAINS];
  for (int j = 0; j < CHAINS; j++) acc[j] = (float)j;
  /* acc = acc * m + k converges to k / (1 - m) ~ 1e3: values stay normal. */
  const float m = 1.0f - 0x1p-20f, k = 1e-3f;
  for (long i = 0; i < iters; i++)
    for (int j = 0; j < CHAINS; j++) acc[j] = acc[j] * m + k;
  float s = 0.0f;
  for (int j = 0; j < CHAINS; j++) s += acc[j];
  hwt_probe_sink = s;
  return (double)iters * CHAINS * 2;
}
