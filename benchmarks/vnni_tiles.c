/* How close the direct int8 conv's AVX512-VNNI register tile runs to the
 * vpdpbusd issue rate, alone (issue #43): the 8 x 32 tile of
 * kernels/qconv/ukernel_avx512vnni_8x32.c (its loop: 2 weight loads and 8
 * dword broadcasts per 16 vpdpbusd), a 12 x 32 one (24 accumulators, the
 * same weight vectors for 12 pixels) and a 6 x 64 one (4 weight vectors per
 * broadcast, the shape ONNX Runtime's symmetric conv kernel uses), against
 * 16 independent vpdpbusd chains with no loads (the issue rate).
 *
 *   cc -O3 -std=c11 -D_POSIX_C_SOURCE=200809L benchmarks/vnni_tiles.c -o vnni_tiles
 *   ./vnni_tiles [taps] [channels]     (default 9 64: a 3x3 conv over 64)
 *
 * Prints vpdpbusd (zmm) per ns of each, best of 40 interleaved rounds. Only
 * runs on a CPU with avx512_vnni. Zen 4 (2 vCPU EPYC, under load: the
 * quietest rounds of several runs), K = 256 to 4608 (weights from L1 or
 * L2): 8x32 3.55-3.67, 6x64 3.50-3.65, 12x32 3.26-3.40 (24 accumulators
 * and 12 broadcasts leave the weights reloaded), chains 3.59-3.68; K = 64
 * (a 1x1 conv over 64 channels, 16 k steps per call): 8x32 3.19-3.24, 6x64
 * 3.04. The 8x32 tile runs at the issue rate from K = 256 up; the int8
 * GEMM's ~75% of it (hwtune scan: 356.7 GOPS at 1 thread) is lost around
 * the micro-kernel (epilogue, tables, memory), and at K = 64 in the call
 * itself (zeroing, pointer loads, 16 accumulator stores per 256 vpdpbusd). */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VNNI __attribute__((noinline, target("avx512vnni,avx512bw,avx512f")))
#define DP(c, a, b) c = _mm512_dpbusd_epi32(c, a, b)

static inline int32_t quad(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}
#define bcast(p) _mm512_set1_epi32(quad(p))

/* rows: taps x mr pixel addresses; b: kq groups of nv weight vectors per tap */
VNNI static void tile_8x32(int taps, int kq, const uint8_t *const *rows, const __m512i *b,
                           int32_t *acc) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
  for (int t = 0; t < taps; t++, rows += 8)
    for (int q = 0; q < kq; q++, b += 2) {
      const __m512i b0 = b[0], b1 = b[1];
      __m512i a;
      a = bcast(rows[0] + 4 * q), DP(c0, a, b0), DP(c1, a, b1);
      a = bcast(rows[1] + 4 * q), DP(c2, a, b0), DP(c3, a, b1);
      a = bcast(rows[2] + 4 * q), DP(c4, a, b0), DP(c5, a, b1);
      a = bcast(rows[3] + 4 * q), DP(c6, a, b0), DP(c7, a, b1);
      a = bcast(rows[4] + 4 * q), DP(c8, a, b0), DP(c9, a, b1);
      a = bcast(rows[5] + 4 * q), DP(c10, a, b0), DP(c11, a, b1);
      a = bcast(rows[6] + 4 * q), DP(c12, a, b0), DP(c13, a, b1);
      a = bcast(rows[7] + 4 * q), DP(c14, a, b0), DP(c15, a, b1);
    }
  const __m512i r[16] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15};
  for (int i = 0; i < 16; i++) _mm512_storeu_si512(acc + 16 * i, r[i]);
}

VNNI static void tile_12x32(int taps, int kq, const uint8_t *const *rows, const __m512i *b,
                            int32_t *acc) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0,
          c16 = c0, c17 = c0, c18 = c0, c19 = c0, c20 = c0, c21 = c0, c22 = c0, c23 = c0;
  for (int t = 0; t < taps; t++, rows += 12)
    for (int q = 0; q < kq; q++, b += 2) {
      const __m512i b0 = b[0], b1 = b[1];
      __m512i a;
      a = bcast(rows[0] + 4 * q), DP(c0, a, b0), DP(c1, a, b1);
      a = bcast(rows[1] + 4 * q), DP(c2, a, b0), DP(c3, a, b1);
      a = bcast(rows[2] + 4 * q), DP(c4, a, b0), DP(c5, a, b1);
      a = bcast(rows[3] + 4 * q), DP(c6, a, b0), DP(c7, a, b1);
      a = bcast(rows[4] + 4 * q), DP(c8, a, b0), DP(c9, a, b1);
      a = bcast(rows[5] + 4 * q), DP(c10, a, b0), DP(c11, a, b1);
      a = bcast(rows[6] + 4 * q), DP(c12, a, b0), DP(c13, a, b1);
      a = bcast(rows[7] + 4 * q), DP(c14, a, b0), DP(c15, a, b1);
      a = bcast(rows[8] + 4 * q), DP(c16, a, b0), DP(c17, a, b1);
      a = bcast(rows[9] + 4 * q), DP(c18, a, b0), DP(c19, a, b1);
      a = bcast(rows[10] + 4 * q), DP(c20, a, b0), DP(c21, a, b1);
      a = bcast(rows[11] + 4 * q), DP(c22, a, b0), DP(c23, a, b1);
    }
  const __m512i r[24] = {c0,  c1,  c2,  c3,  c4,  c5,  c6,  c7,  c8,  c9,  c10, c11,
                         c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23};
  for (int i = 0; i < 24; i++) _mm512_storeu_si512(acc + 16 * i, r[i]);
}

VNNI static void tile_6x64(int taps, int kq, const uint8_t *const *rows, const __m512i *b,
                           int32_t *acc) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0,
          c16 = c0, c17 = c0, c18 = c0, c19 = c0, c20 = c0, c21 = c0, c22 = c0, c23 = c0;
  for (int t = 0; t < taps; t++, rows += 6)
    for (int q = 0; q < kq; q++, b += 4) {
      const __m512i b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
      __m512i a;
      a = bcast(rows[0] + 4 * q), DP(c0, a, b0), DP(c1, a, b1), DP(c2, a, b2), DP(c3, a, b3);
      a = bcast(rows[1] + 4 * q), DP(c4, a, b0), DP(c5, a, b1), DP(c6, a, b2), DP(c7, a, b3);
      a = bcast(rows[2] + 4 * q), DP(c8, a, b0), DP(c9, a, b1), DP(c10, a, b2), DP(c11, a, b3);
      a = bcast(rows[3] + 4 * q), DP(c12, a, b0), DP(c13, a, b1), DP(c14, a, b2), DP(c15, a, b3);
      a = bcast(rows[4] + 4 * q), DP(c16, a, b0), DP(c17, a, b1), DP(c18, a, b2), DP(c19, a, b3);
      a = bcast(rows[5] + 4 * q), DP(c20, a, b0), DP(c21, a, b1), DP(c22, a, b2), DP(c23, a, b3);
    }
  const __m512i r[24] = {c0,  c1,  c2,  c3,  c4,  c5,  c6,  c7,  c8,  c9,  c10, c11,
                         c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23};
  for (int i = 0; i < 24; i++) _mm512_storeu_si512(acc + 16 * i, r[i]);
}

/* 16 independent chains, operands in registers: the issue rate (a fixed
   CHAIN_STEPS per call, so that the call costs nothing at small K) */
enum { CHAIN_STEPS = 1024 };
VNNI static void chains(int n, int32_t *acc) {
  __m512i c[16];
  for (int i = 0; i < 16; i++) c[i] = _mm512_set1_epi32(i + 1); /* distinct: no merging */
  __m512i a = _mm512_set1_epi32(7);
  const __m512i b0 = _mm512_set1_epi32(3), b1 = _mm512_set1_epi32(5);
  __m512i c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3], c4 = c[4], c5 = c[5], c6 = c[6],
          c7 = c[7], c8 = c[8], c9 = c[9], c10 = c[10], c11 = c[11], c12 = c[12], c13 = c[13],
          c14 = c[14], c15 = c[15];
  for (int q = 0; q < n; q++) {
    __asm__ volatile("" : "+v"(a)); /* a fresh operand each step: nothing hoisted */
    DP(c0, a, b0), DP(c1, a, b1), DP(c2, a, b0), DP(c3, a, b1), DP(c4, a, b0), DP(c5, a, b1);
    DP(c6, a, b0), DP(c7, a, b1), DP(c8, a, b0), DP(c9, a, b1), DP(c10, a, b0), DP(c11, a, b1);
    DP(c12, a, b0), DP(c13, a, b1), DP(c14, a, b0), DP(c15, a, b1);
  }
  const __m512i r[16] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15};
  for (int i = 0; i < 16; i++) _mm512_storeu_si512(acc + 16 * i, r[i]);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni")) {
    fprintf(stderr, "vnni_tiles: this CPU has no avx512_vnni\n");
    return 1;
  }
  const int taps = argc > 1 ? atoi(argv[1]) : 9, ch = argc > 2 ? atoi(argv[2]) : 64;
  if (taps < 1 || taps > 49 || ch < 4 || ch % 4) {
    fprintf(stderr, "usage: vnni_tiles [taps 1..49] [channels, a multiple of 4]\n");
    return 2;
  }
  const int kq = ch / 4;
  enum { XB = 1 << 20 };
  uint8_t *x = aligned_alloc(64, XB);
  __m512i *b = aligned_alloc(64, (size_t)taps * (size_t)kq * 4 * 64);
  int32_t *acc = aligned_alloc(64, 24 * 64);
  const uint8_t **rows = malloc((size_t)taps * 12 * sizeof *rows);
  const uint8_t **r8 = malloc((size_t)taps * 8 * sizeof *r8);
  const uint8_t **r6 = malloc((size_t)taps * 6 * sizeof *r6);
  if (!x || !b || !acc || !rows || !r8 || !r6) return 3;
  memset(x, 1, XB);
  memset(b, 1, (size_t)taps * (size_t)kq * 4 * 64);
  for (int t = 0; t < taps; t++)
    for (int i = 0; i < 12; i++) {
      /* pixels of a channels-last image: the tile's neighbours, the taps' rows */
      rows[t * 12 + i] = x + ((size_t)i * 2 * (size_t)ch + (size_t)t * 3 * (size_t)ch) %
                                 (size_t)(XB - ch);
      if (i < 8) r8[t * 8 + i] = rows[t * 12 + i];
      if (i < 6) r6[t * 6 + i] = rows[t * 12 + i];
    }
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  const int reps = 2000;
  for (int round = 0; round < 40; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++) tile_8x32(taps, kq, r8, b, acc);
    double t1 = now();
    if (t1 - t0 < best[0]) best[0] = t1 - t0;
    t0 = now();
    for (int r = 0; r < reps; r++) tile_12x32(taps, kq, rows, b, acc);
    t1 = now();
    if (t1 - t0 < best[1]) best[1] = t1 - t0;
    t0 = now();
    for (int r = 0; r < reps; r++) tile_6x64(taps, kq, r6, b, acc);
    t1 = now();
    if (t1 - t0 < best[2]) best[2] = t1 - t0;
    t0 = now();
    for (int r = 0; r < reps; r++) chains(CHAIN_STEPS, acc);
    t1 = now();
    if (t1 - t0 < best[3]) best[3] = t1 - t0;
  }
  const double n16 = (double)reps * taps * kq * 16, n24 = (double)reps * taps * kq * 24;
  const double nc = (double)reps * CHAIN_STEPS * 16;
  printf("K = %d: vpdpbusd per ns: 8x32 %.3f  12x32 %.3f  6x64 %.3f  chains %.3f\n", taps * ch,
         n16 / best[0] * 1e-9, n24 / best[1] * 1e-9, n24 / best[2] * 1e-9, nc / best[3] * 1e-9);
  free(x), free(b), free(acc), free(rows), free(r8), free(r6);
  return 0;
}
