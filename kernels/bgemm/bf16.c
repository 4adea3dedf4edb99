/* fp32 <-> bfloat16 conversion (hwtune/bgemm.h): vcvtne2ps2bf16's rounding
 * in portable C. */
#include <string.h>
#include "hwtune/bgemm.h"

uint16_t hwt_bf16_from_f32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* zero, denormal: DAZ */
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* nearest, ties to even; overflow rounds to inf */
  return (uint16_t)(u >> 16);
}

float hwt_bf16_to_f32(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}
