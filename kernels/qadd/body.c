/* hwt_qadd's loop (hwtune/qadd.h), written once over kernels/common/vec.h
 * and compiled per ISA variant (kernels.cmake). In engine/ops/quant.c,
 * compiled for baseline x86-64, the loop ran 4 lanes wide with SSE2
 * divisions: qadd_run was 1.8% of the int8 ResNet-50's samples against
 * 16.1% in the VNNI micro-kernel (perf, 1 thread, under load). */
#include "../common/vec.h"
#include "qadd_internal.h"

HV_AI hv_f32 qadd_one(hv_f32 a, hv_f32 b, hv_f32 za, hv_f32 sa, hv_f32 zb, hv_f32 sb,
                      hv_f32 sy, hv_f32 lo, hv_f32 hi, hv_f32 zy) {
  /* separate multiplies and adds (hv_fmadd would fuse them on AVX2/512) */
  const hv_f32 v0 = hv_add(hv_mul(hv_sub(a, za), sa), hv_mul(hv_sub(b, zb), sb));
  hv_f32 v = hv_div(v0, sy);
  v = hv_max(v, lo); /* v > lo ? v : lo */
  v = hv_min(v, hi); /* v < hi ? v : hi */
  const hv_f32 rne = hv_set1(12582912.0f);
  return hv_add(hv_sub(hv_add(v, rne), rne), zy);
}

void HWT_VARIANT(hwt_qadd_run)(const hwt_qadd_params *p, const float *a, const float *b,
                               float *y, int64_t n) {
  const hv_f32 za = hv_set1(p->za), sa = hv_set1(p->sa), zb = hv_set1(p->zb);
  const hv_f32 sb = hv_set1(p->sb), sy = hv_set1(p->sy), lo = hv_set1(p->lo);
  const hv_f32 hi = hv_set1(p->hi), zy = hv_set1(p->zy);
  int64_t i = 0;
  for (; i + HV_W <= n; i += HV_W)
    hv_store(y + i, qadd_one(hv_load(a + i), hv_load(b + i), za, sa, zb, sb, sy, lo, hi, zy));
  if (i < n) {
    const hv_mask m = hv_first((long)(n - i));
    hv_store_mask(y + i, m, qadd_one(hv_load_mask(a + i, m), hv_load_mask(b + i, m), za, sa,
                                     zb, sb, sy, lo, hi, zy));
  }
}
