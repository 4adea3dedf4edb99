/* The element-wise kernel's activations alone, on a buffer that stays in
 * L1 (4096 floats, 16 KiB), one thread: nanoseconds per element, best of
 * `runs` passes of `reps` calls. Separates an activation's compute from
 * the memory traffic the model-level figures include (issue #41:
 * EfficientNet-B0's SiLU outputs).
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Ikernels/include benchmarks/act_cost.c \
 *      -L$LIB -lhwtune -Wl,-rpath,$LIB -o act_cost
 *   ./act_cost [isa] [runs]
 *
 * LIB is the folder of the built libhwtune.so (an installed hwtune's
 * hwtune/_lib, or a CMake build folder). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int named = argc > 1 ? hwt_isa_from_name(argv[1]) : -1;
  if (argc > 1 && named < 0) return 2;
  const hwt_isa isa = named < 0 ? hwt_isa_best() : (hwt_isa)named;
  const int runs = argc > 2 ? atoi(argv[2]) : 50, reps = 100;
  enum { N = 4096 };
  float *x = aligned_alloc(64, N * 4), *y = aligned_alloc(64, N * 4);
  if (!x || !y) return 1;
  for (int i = 0; i < N; i++) x[i] = -8.0f + 16.0f * (float)i / N;
  static const char *ops[] = {"relu", "sigmoid", "silu", "tanh", "hard_swish", "gelu"};
  printf("variant %s, %d floats in L1, best of %d x %d calls\n", hwt_isa_name(isa), N, runs,
         reps);
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    const int op = hwt_eltwise_find(ops[o]);
    if (op < 0) continue;
    hwt_eltwise_desc d;
    hwt_eltwise_desc_init(&d, (hwt_ew_op)op, isa, N);
    if (hwt_eltwise_check(&d) != HWT_OK) continue;
    double best = 1e9;
    for (int r = 0; r < runs; r++) {
      const double t0 = now();
      for (int k = 0; k < reps; k++) hwt_eltwise_run_part(&d, x, NULL, NULL, y, 0, 1);
      const double t = (now() - t0) / reps;
      if (t < best) best = t;
    }
    printf("%-11s %6.3f ns/element\n", ops[o], best / N * 1e9);
  }
  free(x), free(y);
  return 0;
}
