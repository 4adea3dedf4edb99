/* bf16 CONV (hwtune/bconv.h): every bf16 variant this CPU runs against the
 * plain-C reference (hwt_bconv_ref: im2col, hwt_bgemm_ref, the epilogue).
 *
 * - The portable variant gathers the same im2col values and takes the
 *   reference's steps in the same order: bit for bit.
 * - The AVX512_BF16 variant (vdpbf16ps, its pair order the CPU's) is held
 *   to |Y - R| <= (2 * Kq + 3) * 2^-24 * S, S = sum |products| + |bias| +
 *   |residual| (two roundings per k pair, one each for the bias and the
 *   residual add, each at most 2^-24 of the partial sum); the program
 *   reports how many outputs matched bit for bit.
 * Shapes: 1x1 (the plain GEMM), padded 3x3, strided 7x7, dilation with
 * asymmetric padding, odd C*R*S, batches whose pixel tiles straddle images,
 * channels around both tiles; bias, residual, ReLU and ReLU6; 1..3 thread
 * shares run in reverse order; the output is checked for stray writes.
 * Small: runs under ASan/UBSan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/bconv.h"
#include "check.h"

static long exact_elems, all_elems;

static double bfv(float x) { return hwt_bf16_to_f32(hwt_bf16_from_f32(x)); }

static void check_case(hwt_isa isa, const hwt_conv_desc *d, int use_bias, int use_res, int nth) {
  hwt_bconv_plan p;
  CHECK(hwt_bconv_plan_make(d, isa, &p) == HWT_OK);
  const int OH = p.OH, OW = p.OW, OHW = OH * OW;
  const size_t nx = (size_t)d->N * d->C * d->H * d->W, nw = (size_t)d->K * d->C * d->R * d->S;
  const size_t ny = (size_t)d->N * d->K * OHW;
  float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)d->K * 4);
  float *r = malloc(ny * 4), *y = malloc((ny + 1) * 4), *ref = malloc((ny + 1) * 4);
  for (size_t i = 0; i < nx; i++) x[i] = frand();
  for (size_t i = 0; i < nw; i++) w[i] = frand();
  for (int i = 0; i < d->K; i++) b[i] = frand();
  for (size_t i = 0; i < ny; i++) r[i] = frand();
  memset(y, 0xA5, (ny + 1) * 4);
  memset(ref, 0xA5, (ny + 1) * 4);
  void *pw = aligned_alloc(64, p.packed_w_bytes ? p.packed_w_bytes : 64);
  void *ws = aligned_alloc(64, p.ws_bytes);
  CHECK(hwt_bconv_pack_w(&p, w, pw) == HWT_OK);
  const float *bias = use_bias ? b : NULL, *res = use_res ? r : NULL;
  CHECK(hwt_bconv_ref(d, x, w, bias, res, ref) == HWT_OK);
  for (int t = nth - 1; t >= 0; t--) hwt_bconv_run_part(&p, x, pw, bias, res, y, ws, t, nth);
  CHECK(memcmp(y + ny, ref + ny, 4) == 0, "wrote past y");
  int bad = 0;
  for (int n = 0; n < d->N; n++)
    for (int k = 0; k < d->K; k++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double sabs = use_bias ? fabs(b[k]) : 0.0;
          for (int c = 0; c < d->C; c++)
            for (int i = 0; i < d->R; i++)
              for (int j = 0; j < d->S; j++) {
                const int ih = oh * d->stride_h - d->pad_h + i * d->dil_h;
                const int iw = ow * d->stride_w - d->pad_w + j * d->dil_w;
                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                sabs += fabs(bfv(x[(((size_t)n * d->C + c) * d->H + ih) * d->W + iw]) *
                             bfv(w[(((size_t)k * d->C + c) * d->R + i) * d->S + j]));
              }
          const size_t at = ((size_t)n * d->K + k) * OHW + (size_t)oh * OW + ow;
          if (use_res) sabs += fabs(r[at]);
          const double tol =
              isa == HWT_ISA_GENERIC ? 0.0 : (2.0 * p.g.Kq + 3.0) * ldexp(1.0, -24) * sabs;
          all_elems++;
          exact_elems += memcmp(&y[at], &ref[at], 4) == 0;
          if (!(fabs((double)y[at] - ref[at]) <= tol) && bad++ < 3)
            CHECK(0, "%s N=%d C=%d %dx%d K=%d %dx%d s%d p%d d%d (%d,%d,%d,%d): %.9g vs %.9g",
                  hwt_bgemm_variant_name(isa), d->N, d->C, d->H, d->W, d->K, d->R, d->S,
                  d->stride_h, d->pad_h, d->dil_h, n, k, oh, ow, y[at], ref[at]);
        }
  free(x), free(w), free(b), free(r), free(y), free(ref), free(pw), free(ws);
}

int main(void) {
  /* N C H W K R S sh sw ph pw relu dh dw ph_end pw_end relu_max act */
  const hwt_conv_desc shapes[] = {
      {1, 16, 5, 7, 32, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0.0f, 0},
      {2, 7, 6, 5, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.0f, 0},
      {1, 3, 15, 13, 24, 7, 7, 2, 2, 3, 3, 0, 1, 1, 3, 3, 0.0f, 0},
      {3, 32, 4, 4, 33, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0, 0.0f, 0},
      {1, 12, 10, 11, 17, 3, 3, 1, 2, 1, 2, 0, 2, 2, 2, 0, 0.0f, 0},
      {2, 64, 3, 3, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.5f, 0},
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0.0f, 0},
  };
  int cases = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (hwt_bgemm_variant_for((hwt_isa)isa) != isa) {
      /* not runnable here (or no bf16 row): the plan refuses, no fallback */
      hwt_bconv_plan p;
      CHECK(hwt_bconv_plan_make(&shapes[0], (hwt_isa)isa, &p) == HWT_EISA, "isa %d", isa);
      continue;
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      check_case((hwt_isa)isa, &shapes[s], (int)s % 2 == 0, (int)s % 3 != 2, 1 + (int)(s % 3));
      cases++;
    }
  }
  hwt_conv_desc bad = shapes[0];
  bad.R = 9; /* kernel past the padded input */
  hwt_bconv_plan p;
  CHECK(hwt_bconv_plan_make(&bad, HWT_ISA_GENERIC, &p) == HWT_EINVAL);
  printf("bconv: %ld of %ld outputs bit-identical to the reference\n", exact_elems, all_elems);
  return check_verdict("bconv: %d cases within bounds\n", cases);
}
