/* int8 GEMM variants vs the plain-C reference (hwt_qgemm_ref): every variant
 * this CPU runs (the AVX-512 row only with AVX512-VNNI), edge shapes around
 * each tile and k group, u8 / s8 / float-held activations, per-column weight
 * zero points or none, every output type (dequantized, accumulator,
 * requantised as float, u8, s8), ReLU, strided (NCHW-like) outputs of every
 * type, A with k strided (A^T stored, as an NCHW 1x1 conv reads its input),
 * A packed once across column blocks, and 1..3
 * thread shares run in reverse order. The int32 accumulators are exact in
 * every variant, and the epilogue shares its formula with the reference
 * (kernels/qgemm/epi.h), so outputs must match bit for bit. Small sizes:
 * this also runs under ASan/UBSan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/qgemm.h"
#include "check.h"

static unsigned rnd_state = 777u;
static int rnd(int lo, int hi) { /* inclusive */
  rnd_state = rnd_state * 1664525u + 1013904223u;
  return lo + (int)((rnd_state >> 8) % (unsigned)(hi - lo + 1));
}

static size_t out_size(hwt_qout_type t) {
  return t == HWT_QOUT_U8 || t == HWT_QOUT_S8 ? 1 : 4;
}

static void check_case(hwt_isa isa, int M, int N, int K, hwt_qa_type at, int use_zb,
                       hwt_qout_type out, int relu, int strided, int kstrided, int nth) {
  hwt_qgemm_desc d = {M, N, K, K + (K % 3), at, 0};
  if (kstrided) d.lda = 1, d.a_ks = M + (K % 3); /* A^T stored: an NCHW 1x1 conv's input */
  const size_t na = kstrided ? (size_t)K * (size_t)d.a_ks + 1 : (size_t)M * d.lda + 1;
  void *A = malloc(na * 4);
  for (size_t i = 0; i < na; i++) {
    const int v = at == HWT_QA_U8 || at == HWT_QA_F32U8 ? rnd(0, 255) : rnd(-128, 127);
    if (at == HWT_QA_U8) ((uint8_t *)A)[i] = (uint8_t)v;
    else if (at == HWT_QA_S8) ((int8_t *)A)[i] = (int8_t)v;
    else ((float *)A)[i] = (float)v;
  }
  int8_t *B = malloc((size_t)K * N + 1);
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (int8_t)rnd(-128, 127);
  int32_t *zb = malloc(((size_t)N + 1) * 4);
  float *scale = malloc(((size_t)N + 1) * 4), *bias = malloc(((size_t)N + 1) * 4);
  for (int j = 0; j < N; j++) {
    zb[j] = rnd(-20, 20);
    /* requantised outputs: scale ~ 1 / (K * 128) keeps values in range
       with a few saturating at either end */
    scale[j] = (float)rnd(1, 1000) / (1000.0f * 64.0f * (float)(K + 1));
    bias[j] = (float)rnd(-500, 500) / 100.0f;
  }
  hwt_qgemm_epi e = {0};
  e.za = at == HWT_QA_U8 || at == HWT_QA_F32U8 ? rnd(0, 255) : rnd(-128, 127);
  e.zb = use_zb ? zb : NULL;
  e.scale = scale;
  e.bias = bias;
  int32_t *bias_i = malloc(((size_t)N + 1) * 4);
  for (int j = 0; j < N; j++) bias_i[j] = rnd(-3000, 3000);
  if (M % 2) e.bias_i = bias_i; /* ORT's int32 bias form, on half the shapes */
  e.zy = rnd(-10, 10) + (out == HWT_QOUT_U8 ? 128 : 0);
  e.qmin = -128;
  e.qmax = 127;
  e.relu = relu;
  e.out = out;
  e.rs_c = strided ? 1 : N;
  e.cs_c = strided ? M : 1;
  const size_t nc = (size_t)M * N * out_size(out) + 1;
  void *C = malloc(nc), *R = malloc(nc);
  memset(C, 0xA5, nc);
  memset(R, 0xA5, nc);

  hwt_qgemm_plan p;
  CHECK(hwt_qgemm_plan_make(&d, isa, &p) == HWT_OK);
  if (N == 400) CHECK(p.a_once && p.nc < N, "%s: one column block", hwt_qgemm_variant_name(isa));
  void *pb = aligned_alloc(64, p.packed_b_bytes ? p.packed_b_bytes : 64);
  int32_t *colsum = malloc(((size_t)N + 1) * 4);
  void *ws = aligned_alloc(64, p.ws_bytes);
  CHECK(hwt_qgemm_pack_b(&p, B, N, 0, pb, colsum) == HWT_OK);
  e.C = R;
  CHECK(hwt_qgemm_ref(&d, A, B, &e) == HWT_OK);
  e.C = C;
  for (int t = nth - 1; t >= 0; t--) hwt_qgemm_run_part(&p, A, pb, colsum, &e, ws, t, nth);
  int bad = memcmp(C, R, nc) != 0;
  CHECK(!bad, "%s M=%d N=%d K=%d a=%d zb=%d out=%d relu=%d strided=%d kstrided=%d nth=%d",
        hwt_qgemm_variant_name(isa), M, N, K, at, use_zb, out, relu, strided, kstrided, nth);

  /* trans_b packing ([N,K]) gives the same panels */
  int8_t *Bt = malloc((size_t)K * N + 1);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) Bt[(size_t)j * K + k] = B[(size_t)k * N + j];
  void *pb2 = aligned_alloc(64, p.packed_b_bytes ? p.packed_b_bytes : 64);
  int32_t *colsum2 = malloc(((size_t)N + 1) * 4);
  CHECK(hwt_qgemm_pack_b(&p, Bt, K, 1, pb2, colsum2) == HWT_OK);
  const size_t panels = (size_t)((N + p.nr - 1) / p.nr) * p.Kp * p.nr * p.esize;
  CHECK(memcmp(pb, pb2, panels) == 0 && memcmp(colsum, colsum2, (size_t)N * 4) == 0,
        "trans_b packing differs");
  free(Bt), free(pb2), free(colsum2);
  free(bias_i);
  free(A), free(B), free(zb), free(scale), free(bias), free(C), free(R), free(pb), free(colsum),
      free(ws);
}

int main(void) {
  int cases = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    const int runs = hwt_qgemm_variant_for((hwt_isa)isa) == isa;
    if (!runs) {
      /* not runnable here: the plan refuses it rather than falling back */
      hwt_qgemm_desc d = {4, 4, 4, 4, HWT_QA_U8, 0};
      hwt_qgemm_plan p;
      CHECK(hwt_qgemm_plan_make(&d, (hwt_isa)isa, &p) == HWT_EISA, "isa %d", isa);
      continue;
    }
    const int shapes[][3] = {{1, 1, 1},   {3, 5, 7},    {8, 32, 4},   {9, 33, 5},
                             {13, 17, 64}, {6, 16, 130}, {25, 70, 37}, {2, 100, 300},
                             /* N beyond one column block (nc) in every variant: A
                                packed once for all blocks (plan.a_once) */
                             {11, 400, 2100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int at = 0; at < 4; at++)
        for (int out = 0; out < 5; out++) {
          const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
          check_case((hwt_isa)isa, M, N, K, (hwt_qa_type)at, (s + at) % 2, (hwt_qout_type)out,
                     (s + out) % 3 == 0, (int)(s % 2), (int)((s + out) % 2), 1 + (int)(s % 3));
          cases++;
        }
  }
  hwt_qgemm_desc bad = {4, 4, 3, 2, HWT_QA_U8, 0}; /* lda < K */
  hwt_qgemm_plan p;
  CHECK(hwt_qgemm_plan_make(&bad, HWT_ISA_GENERIC, &p) == HWT_EINVAL);
  hwt_qgemm_desc neg = {4, 4, 3, 4, HWT_QA_U8, -2}; /* negative k stride */
  CHECK(hwt_qgemm_plan_make(&neg, HWT_ISA_GENERIC, &p) == HWT_EINVAL);
  return check_verdict("qgemm: %d cases match the reference\n", cases);
}
