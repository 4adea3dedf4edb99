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

/* Bytes: QADD_U8_CHUNK values at a time widened into float buffers, the
   loop above, narrowed back (integers 0..255: exact); three plain loops
   the compiler vectorises with this variant's width. */
enum { QADD_U8_CHUNK = 256 };

void HWT_VARIANT(hwt_qadd_u8_run)(const hwt_qadd_params *p, const uint8_t *a, const uint8_t *b,
                                  uint8_t *y, int64_t n) {
  float fa[QADD_U8_CHUNK], fb[QADD_U8_CHUNK], fy[QADD_U8_CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += QADD_U8_CHUNK) {
    const int m = n - i0 < QADD_U8_CHUNK ? (int)(n - i0) : QADD_U8_CHUNK;
    for (int k = 0; k < m; k++) fa[k] = (float)a[i0 + k];
    for (int k = 0; k < m; k++) fb[k] = (float)b[i0 + k];
    HWT_VARIANT(hwt_qadd_run)(p, fa, fb, fy, m);
    for (int k = 0; k < m; k++) y[i0 + k] = (uint8_t)(int32_t)fy[k];
  }
}
