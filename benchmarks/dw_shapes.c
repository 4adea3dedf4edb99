/* The depthwise CONV kernel alone, on MobileNetV2 / EfficientNet-B0
 * shapes, in the three input layouts it takes: NCHW (staged through
 * transposes), NCHW16c (rows copied) and channels-last (NCHW[C]c: a
 * vector per pixel). The figures behind kernels/conv/dw_body.c's brow_any
 * comment and issue #41's note: whether the transposes or the register
 * blocks bound the kernel.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Ikernels/include benchmarks/dw_shapes.c \
 *      -L$LIB -lhwtune -Wl,-rpath,$LIB -o dw_shapes
 *   ./dw_shapes [shape index] [runs] [silu]
 *
 * LIB is the folder of the built libhwtune.so (an installed hwtune's
 * hwtune/_lib, or a CMake build folder). Prints, per shape, the best of
 * `runs` (default 200) single-thread runs of each layout with warm caches,
 * ReLU6 in the epilogue (SiLU with a third argument), and the input plus
 * output bytes over that time. Zen 4 (2 vCPU EPYC, AVX-512), 23:00 on
 * 2026-12-06, before/after compiling the rows without the activation's
 * code: 32 ch 112x112 3x3 191 -> 140-167 us, 144 ch 56x56 204 -> 155 us,
 * the three layouts within 3% of each other throughout. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "hwtune/dwconv.h"
#include "hwtune/isa.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double best_us(const hwt_dwconv_plan *p, const float *x, const float *w, const float *b,
                      float *y, float *ws, int runs) {
  double best = 1e9;
  for (int r = 0; r < runs; r++) {
    const double t0 = now();
    hwt_dwconv_run_part(p, x, w, b, NULL, y, ws, 0, 1);
    const double t = now() - t0;
    if (t < best) best = t;
  }
  return best * 1e6;
}

int main(int argc, char **argv) {
  /* C, H = W, kernel, stride: MobileNetV2's depthwise layers and some of
   * EfficientNet-B0's. */
  static const int shapes[][4] = {{32, 112, 3, 1}, {96, 112, 3, 2}, {144, 56, 3, 1},
                                  {144, 56, 3, 2}, {192, 28, 3, 1}, {384, 14, 3, 1},
                                  {576, 14, 3, 1}, {960, 7, 3, 1},  {240, 28, 5, 1},
                                  {672, 14, 5, 1},
                                  /* the stride-2 layers of both models */
                                  {576, 14, 3, 2},  {144, 56, 5, 2}, {240, 28, 3, 2},
                                  {672, 14, 5, 2}};
  const int n_shapes = (int)(sizeof shapes / sizeof *shapes);
  const int first = argc > 1 ? atoi(argv[1]) : 0, last = argc > 1 ? first + 1 : n_shapes;
  const int runs = argc > 2 ? atoi(argv[2]) : 200, silu = argc > 3;
  const hwt_isa isa = hwt_isa_best();
  printf("variant %s, %s epilogue\n", hwt_isa_name(isa), silu ? "SiLU" : "ReLU6");
  for (int i = first; i < last && i < n_shapes; i++) {
    const int C = shapes[i][0], H = shapes[i][1], R = shapes[i][2], st = shapes[i][3];
    hwt_conv_desc d = {0};
    d.N = 1, d.C = d.K = C, d.H = d.W = H, d.R = d.S = R;
    d.stride_h = d.stride_w = st;
    d.pad_h = d.pad_w = d.pad_h_end = d.pad_w_end = R / 2;
    d.dil_h = d.dil_w = 1;
    if (silu)
      d.act = HWT_CONV_ACT_SILU;
    else
      d.relu = 1;
    const size_t n = (size_t)C * H * H;
    float *x = aligned_alloc(64, n * 4 + 64), *y = aligned_alloc(64, n * 4 + 64);
    float *w = malloc((size_t)C * R * R * 4), *b = malloc((size_t)C * 4);
    if (!x || !y || !w || !b) return 1;
    for (size_t j = 0; j < n; j++) x[j] = (float)(j % 7) * 0.1f;
    for (int j = 0; j < C * R * R; j++) w[j] = 0.01f * (float)(j % 13);
    for (int j = 0; j < C; j++) b[j] = 0.1f;
    hwt_dwconv_plan p[3];
    if (hwt_dwconv_plan_make(&d, isa, &p[0]) != HWT_OK ||
        hwt_dwconv_plan_nchwc(&d, 16, isa, &p[1]) != HWT_OK ||
        hwt_dwconv_plan_nchwc(&d, C, isa, &p[2]) != HWT_OK)
      return 1;
    size_t wsn = 0;
    for (int k = 0; k < 3; k++) {
      p[k].relu_max = silu ? p[k].relu_max : 6.0f; /* ReLU6's clamp, as the engine sets it */
      wsn = p[k].ws_floats > wsn ? p[k].ws_floats : wsn;
    }
    float *ws = aligned_alloc(64, wsn * 4 + 64);
    if (!ws) return 1;
    double us[3];
    for (int k = 0; k < 3; k++) us[k] = best_us(&p[k], x, w, b, y, ws, runs);
    const double bytes = (double)n * 4.0 * (1.0 + 1.0 / (st * st));
    printf("C=%4d %3dx%-3d k%d s%d  NCHW %7.1f us  NCHW16c %7.1f us  channels-last %7.1f us"
           "  (NCHW %.1f GB/s)\n",
           C, H, H, R, st, us[0], us[1], us[2], bytes / us[0] / 1e3);
    free(x), free(y), free(w), free(b), free(ws);
  }
  return 0;
}
