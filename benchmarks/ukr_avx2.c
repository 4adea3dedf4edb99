/* The AVX2 6x16 GEMM micro-kernel alone, in the B-panel order of
 * kernels/gemm/gemm.c (run_tiles, HWT_GEMM_B_IN_L1): for each 16-column
 * packed B panel (kb x 16 floats, in L1 after its first kernel), every
 * 6-row packed A panel of the mb x kb block (from L2), C written with
 * beta = 0. Operands are packed once; only the micro-kernels are timed, so
 * build-time variants of ukernel_avx2_6x16.c (-DA_PF=..., -DB_PF=...) are
 * compared on the kernel's own time. Prints GFLOPS, best and median of reps.
 *
 *   cc -O2 -mavx2 -mfma -Ikernels/include -Ikernels/gemm benchmarks/ukr_avx2.c \
 *      -o /tmp/ukr && /tmp/ukr 256 128 3136 [reps]
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../kernels/gemm/ukernel_avx2_6x16.c"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int M = argc > 1 ? atoi(argv[1]) : 256, K = argc > 2 ? atoi(argv[2]) : 128;
  int N = argc > 3 ? atoi(argv[3]) : 3136, reps = argc > 4 ? atoi(argv[4]) : 31;
  int mp = (M + MR - 1) / MR * MR, np_ = (N + NR - 1) / NR * NR;
  float *a = aligned_alloc(64, sizeof(float) * mp * K);
  float *b = aligned_alloc(64, sizeof(float) * np_ * K);
  float *c = aligned_alloc(64, sizeof(float) * (size_t)M * N + 64);
  for (size_t i = 0; i < (size_t)mp * K; i++) a[i] = (float)(i % 7) * 0.1f;
  for (size_t i = 0; i < (size_t)np_ * K; i++) b[i] = (float)(i % 5) * 0.1f;
  memset(c, 0, sizeof(float) * (size_t)M * N);
  double *t = malloc(sizeof(double) * reps);
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    for (int jr = 0; jr < N; jr += NR) {
      int n = N - jr < NR ? N - jr : NR;
      const float *bp = b + (size_t)jr * K;
      for (int ir = 0; ir < M; ir += MR)
        hwt_gemm_ukr_avx2_6x16(K, a + (size_t)ir * K, bp, NR, c + (size_t)ir * N + jr, N,
                               M - ir < MR ? M - ir : MR, n, 0.0f, NULL);
    }
    t[r] = now() - t0;
  }
  qsort(t, reps, sizeof(double), cmp);
  double fl = 2.0 * M * N * K;
  printf("%dx%dx%d A_PF=%d B_PF=%d: best %.1f GFLOPS, median %.1f\n", M, K, N, A_PF, B_PF,
         fl / t[0] * 1e-9, fl / t[reps / 2] * 1e-9);
  return 0;
}
