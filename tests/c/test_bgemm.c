/* bf16 GEMM (hwtune/bgemm.h): the rounding, and every variant this CPU runs
 * against the plain-C reference (hwt_bgemm_ref) and against the float64
 * product of the unrounded inputs.
 *
 * - hwt_bf16_from_f32: fixed cases (ties to even, NaN, inf, overflow,
 *   denormals flushed), and, where the CPU has AVX512_BF16, bit for bit
 *   against vcvtne2ps2bf16 over random bit patterns of every class.
 * - The portable variant computes the reference's steps in the same order:
 *   bit for bit.
 * - The AVX512_BF16 variant (vdpbf16ps) sums the same exact bf16 products in
 *   fp32; its order inside a pair is the CPU's, so the test holds it to
 *   |C - R| <= 2 * Kq * 2^-24 * sum_k |a_k b_k| (two roundings per pair, each
 *   at most 2^-24 of the partial sum) and reports how many elements matched
 *   bit for bit (all of them on the Zen 4 this was written on).
 * - Against float64 of the fp32 inputs: bf16 keeps 8 significant bits, so
 *   each rounding is within 2^-8 relative and a product within 2^-7 + 2^-16:
 *   |C - AB| <= (2^-7 + 2^-16 + (K + 2) * 2^-23) * sum_k |a_k b_k|.
 * Edge shapes around both tiles and odd K, trans_a / trans_b, bias, ReLU,
 * 1..3 thread shares run in reverse order. Small: runs under ASan/UBSan. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/bgemm.h"
#include "check.h"

static long exact_elems, all_elems;

static float f_of(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static void check_rounding(void) {
  CHECK(hwt_bf16_from_f32(1.0f) == 0x3f80);
  CHECK(hwt_bf16_from_f32(f_of(0x3f808000u)) == 0x3f80); /* tie, even below */
  CHECK(hwt_bf16_from_f32(f_of(0x3f818000u)) == 0x3f82); /* tie, even above */
  CHECK(hwt_bf16_from_f32(f_of(0x3f808001u)) == 0x3f81); /* above the tie */
  CHECK(hwt_bf16_from_f32(-2.0f) == 0xc000);
  CHECK(hwt_bf16_from_f32(INFINITY) == 0x7f80);
  CHECK(hwt_bf16_from_f32(f_of(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to inf */
  CHECK(hwt_bf16_from_f32(f_of(0x00400000u)) == 0x0000); /* denormal: zero */
  CHECK(hwt_bf16_from_f32(f_of(0x80400000u)) == 0x8000); /* keeps its sign */
  const uint16_t nan = hwt_bf16_from_f32(f_of(0x7f800001u));
  CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "NaN stays NaN: %04x", nan);
  CHECK(hwt_bf16_to_f32(0x3f80) == 1.0f);
  if (!hwt_bgemm_has_avx512_bf16()) return;
  unsigned st = 99u;
  int differ = 0;
  for (int r = 0; r < 20000; r++) {
    float x[16];
    uint16_t got[16];
    for (int i = 0; i < 16; i++) {
      st = st * 1664525u + 1013904223u;
      uint32_t u = st;
      /* every class: zero/denormal exponents, NaN/inf, ties */
      if (i % 4 == 1) u &= 0x807fffffu;
      if (i % 4 == 2) u |= 0x7f800000u;
      if (i % 8 == 3) u = (u & 0xffff0000u) | 0x8000u;
      x[i] = f_of(u);
    }
    CHECK(hwt_bf16_from_f32_x16_native(x, got) == HWT_OK);
    for (int i = 0; i < 16; i++) {
      uint32_t u;
      memcpy(&u, &x[i], 4);
      const uint16_t want = hwt_bf16_from_f32(x[i]);
      const int isnan = (u & 0x7fffffffu) > 0x7f800000u;
      /* NaN payloads: both quiet NaNs of the same sign */
      const int same = isnan ? (got[i] & 0xffc0) == (want & 0xffc0) : got[i] == want;
      if (!same && differ++ < 5)
        CHECK(same, "x=%08x vcvtne2ps2bf16=%04x ours=%04x", u, got[i], want);
    }
  }
  CHECK(differ == 0, "%d of 320000 conversions differ", differ);
}

static void check_case(hwt_isa isa, int M, int N, int K, int ta, int tb, int use_bias, int relu,
                       int nth) {
  hwt_bgemm_desc d = {M, N, K, (ta ? M : K) + (K % 3), ta};
  const size_t na = (size_t)(ta ? K : M) * d.lda + 1;
  float *A = malloc(na * 4), *B = malloc(((size_t)K * N + 1) * 4);
  float *Bt = malloc(((size_t)K * N + 1) * 4), *bias = malloc(((size_t)N + 1) * 4);
  for (size_t i = 0; i < na; i++) A[i] = frand();
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = frand();
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) Bt[(size_t)j * K + k] = B[(size_t)k * N + j];
  for (int j = 0; j < N; j++) bias[j] = frand();
  const size_t nc = (size_t)M * N + 1;
  float *C = malloc(nc * 4), *R = malloc(nc * 4);
  memset(C, 0xA5, nc * 4);
  memset(R, 0xA5, nc * 4);

  hwt_bgemm_plan p;
  CHECK(hwt_bgemm_plan_make(&d, isa, &p) == HWT_OK);
  void *pb = aligned_alloc(64, p.packed_b_bytes ? p.packed_b_bytes : 64);
  void *ws = aligned_alloc(64, p.ws_bytes);
  CHECK(hwt_bgemm_pack_b(&p, tb ? Bt : B, tb ? K : N, tb, pb) == HWT_OK);
  hwt_bgemm_epi e = {R, N, use_bias ? bias : NULL, relu};
  CHECK(hwt_bgemm_ref(&d, A, B, &e) == HWT_OK);
  e.C = C;
  for (int t = nth - 1; t >= 0; t--) hwt_bgemm_run_part(&p, A, pb, &e, ws, t, nth);
  CHECK(memcmp(C + (size_t)M * N, R + (size_t)M * N, 4) == 0, "wrote past C");

  const ptrdiff_t rs = ta ? 1 : d.lda, cs = ta ? d.lda : 1;
  int bad_ref = 0, bad_f64 = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double sabs = 0.0, sabs_bf = 0.0, exact = 0.0;
      for (int k = 0; k < K; k++) {
        const double a = A[i * rs + k * cs], b = B[(size_t)k * N + j];
        exact += a * b;
        sabs += fabs(a * b);
        sabs_bf += fabs((double)hwt_bf16_to_f32(hwt_bf16_from_f32((float)a)) *
                        hwt_bf16_to_f32(hwt_bf16_from_f32((float)b)));
      }
      const double bv = use_bias ? bias[j] : 0.0;
      if (use_bias) sabs += fabs(bv), sabs_bf += fabs(bv);
      exact += bv;
      if (relu && exact < 0) exact = 0;
      const float c = C[(size_t)i * N + j], r = R[(size_t)i * N + j];
      all_elems++;
      exact_elems += memcmp(&c, &r, 4) == 0;
      /* + one rounding of the bias add */
      const double tol_ref =
          isa == HWT_ISA_GENERIC ? 0.0 : (2.0 * p.Kq + 2.0) * ldexp(1.0, -24) * sabs_bf;
      if (!(fabs((double)c - r) <= tol_ref) && bad_ref++ < 3)
        CHECK(0, "%s vs ref M=%d N=%d K=%d ta=%d tb=%d (%d,%d): %.9g vs %.9g",
              hwt_bgemm_variant_name(isa), M, N, K, ta, tb, i, j, c, r);
      const double tol64 = (ldexp(1.0, -7) + ldexp(1.0, -16) + (K + 2) * ldexp(1.0, -23)) * sabs;
      if (!(fabs((double)c - exact) <= tol64) && bad_f64++ < 3)
        CHECK(0, "%s vs f64 M=%d N=%d K=%d ta=%d tb=%d bias=%d relu=%d (%d,%d): %.9g vs %.9g (tol %.3g)",
              hwt_bgemm_variant_name(isa), M, N, K, ta, tb, use_bias, relu, i, j, c, exact, tol64);
    }
  free(A), free(B), free(Bt), free(bias), free(C), free(R), free(pb), free(ws);
}

int main(void) {
  check_rounding();
  int cases = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (hwt_bgemm_variant_for((hwt_isa)isa) != isa) {
      /* not runnable here (or no bf16 row): the plan refuses, no fallback */
      hwt_bgemm_desc d = {4, 4, 4, 4, 0};
      hwt_bgemm_plan p;
      CHECK(hwt_bgemm_plan_make(&d, (hwt_isa)isa, &p) == HWT_EISA, "isa %d", isa);
      continue;
    }
    const int shapes[][3] = {{1, 1, 1},    {3, 5, 7},    {8, 32, 4},   {9, 33, 5},
                             {13, 17, 64}, {4, 16, 131}, {25, 70, 37}, {2, 100, 300},
                             {33, 65, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++) {
        check_case((hwt_isa)isa, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                   (int)(s + t) % 2, (int)(s + t) % 3 == 0, 1 + (int)((s + t) % 3));
        cases++;
      }
  }
  hwt_bgemm_desc bad = {4, 4, 3, 2, 0}; /* lda < K */
  hwt_bgemm_plan p;
  CHECK(hwt_bgemm_plan_make(&bad, HWT_ISA_GENERIC, &p) == HWT_EINVAL);
  printf("bgemm: %ld of %ld elements bit-identical to the reference\n", exact_elems, all_elems);
  return check_verdict("bgemm: %d cases within bounds\n", cases);
}
