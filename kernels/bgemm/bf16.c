/* fp32 <-> bfloat16 conversion (hwtune/bgemm.h): vcvtne2ps2bf16's rounding
 * in portable C. */
#include "bgemm_internal.h"

uint16_t hwt_bf16_from_f32(float x) { return hwt_bf16_rne(x); }

float hwt_bf16_to_f32(uint16_t h) { return hwt_bf16_widen(h); }
