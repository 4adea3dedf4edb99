/* Layer-norm kernels (kernels/norm/) on every ISA variant this CPU runs
 * against the plain-C reference hwt_layernorm_ref: row lengths around the
 * vector widths (1 to 33, ConvNeXt's 96 and 768, 100), with and without
 * bias, rows near zero and rows far from it (mean 1000, spread 1: the
 * float mean alone is off by 1e-3 of the spread there), a constant row
 * (variance 0: eps alone), rows run in parts in a scrambled order, outputs
 * sized exactly (ASan sees a write past them). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "hwtune/isa.h"
#include "hwtune/layernorm.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd_val(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return -1.0f + 2.0f * (float)(rng >> 40) * 0x1p-24f;
}

static void check(int64_t len, int64_t rows, float offset, int with_bias, int constant) {
  const size_t n = (size_t)(len * rows);
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *want = malloc(n * sizeof *want);
  float *scale = malloc((size_t)len * sizeof *scale), *bias = malloc((size_t)len * sizeof *bias);
  for (size_t i = 0; i < n; i++) x[i] = constant ? offset : offset + rnd_val();
  for (int64_t j = 0; j < len; j++) {
    scale[j] = 0.5f + rnd_val();
    bias[j] = rnd_val();
  }
  const float *b = with_bias ? bias : NULL;
  const double eps = 1e-6;
  hwt_layernorm_ref(x, want, scale, b, len, eps, 0, rows);
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int parts = 1; parts <= 3; parts++) {
      for (size_t i = 0; i < n; i++) y[i] = -12345.0f;
      for (int k = 0; k < parts; k++) {
        const int p = (k * 5 + 3) % parts;
        hwt_layernorm_rows((hwt_isa)isa, x, y, scale, b, len, eps, rows * p / parts,
                           rows * (p + 1) / parts);
      }
      /* a few roundings of the output (measured: at most 7.2e-7 with
       * |want| up to 5.5, len 768, offset 1000), plus the float sums' share
       * growing with the row */
      double worst = 0.0, big = 0.0;
      for (size_t i = 0; i < n; i++) big = fabs(want[i]) > big ? fabs(want[i]) : big;
      for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)y[i] - want[i]);
        worst = e > worst || isnan(e) ? e : worst;
      }
      const double tol = (8.0 + (double)len / 32.0) * 0x1p-24 * (1.0 + big);
      CHECK(worst <= tol, "isa %d len %lld rows %lld offset %g bias %d const %d parts %d: "
            "err %g > %g", isa, (long long)len, (long long)rows, offset, with_bias, constant,
            parts, worst, tol);
    }
  }
  free(x);
  free(y);
  free(want);
  free(scale);
  free(bias);
}

int main(void) {
  const int64_t lens[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 96, 100, 768};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      check(lens[i], 5, 0.0f, with_bias, 0);
      check(lens[i], 4, 1000.0f, with_bias, 0);
    }
  check(96, 3, 2.5f, 1, 1);
  if (failures) fprintf(stderr, "test_kernel_layernorm: %d failures\n", failures);
  return failures != 0;
}
