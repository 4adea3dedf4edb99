/* GEMV for a few rows (M <= HWT_GEMV_MAX_M), streaming B once without
 * packing. Plain C written for the vectoriser, compiled once per ISA variant
 * (kernels.cmake, HWTUNE_KERNEL_BODIES): one source, three widths. */
#include "../common/vec.h"
#include "gemm_internal.h"

/* C rows of the current column block stay in L1 across the k loop:
   m rows x GEMV_L1_FLOATS/m columns = 16 KiB, half of a 32 KiB L1d. */
#define GEMV_L1_FLOATS 4096

static inline void gemv_init(int m, int n, float *c, size_t ldc, float beta, const float *bias) {
  for (int i = 0; i < m; i++) {
    float *restrict ci = c + (size_t)i * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < n; j++) ci[j] = bias ? bias[j] : 0.0f;
    } else {
      for (int j = 0; j < n; j++) ci[j] = beta * ci[j] + (bias ? bias[j] : 0.0f);
    }
  }
}

/* B is [K, n] (row stride ldb): C row i += sum_p a[i][p] * B[p][:], four B
 * rows per pass so each C load/store is shared by four FMAs. */
static inline void gemv_n(int m, int n, int k, const float *a, size_t lda, const float *b,
                          size_t ldb, float *c, size_t ldc) {
  int jb = GEMV_L1_FLOATS / m;
  for (int j0 = 0; j0 < n; j0 += jb) {
    int nb = n - j0 < jb ? n - j0 : jb;
    int p = 0;
    for (; p + 4 <= k; p += 4) {
      const float *restrict b0 = b + (size_t)p * ldb + j0;
      const float *restrict b1 = b0 + ldb;
      const float *restrict b2 = b1 + ldb;
      const float *restrict b3 = b2 + ldb;
      for (int i = 0; i < m; i++) {
        const float *ai = a + (size_t)i * lda + p;
        float a0 = ai[0], a1 = ai[1], a2 = ai[2], a3 = ai[3];
        float *restrict ci = c + (size_t)i * ldc + j0;
        for (int j = 0; j < nb; j++) ci[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
      }
    }
    for (; p < k; p++) {
      const float *restrict bp = b + (size_t)p * ldb + j0;
      for (int i = 0; i < m; i++) {
        float ap = a[(size_t)i * lda + p];
        float *restrict ci = c + (size_t)i * ldc + j0;
        for (int j = 0; j < nb; j++) ci[j] += ap * bp[j];
      }
    }
  }
}

/* 16 partial sums per column: one zmm, two ymm or four xmm accumulators,
   and four columns at a time give the FMA chains independent work. */
#define GEMV_LANES 16

static inline void dot4(int k, const float *restrict x, const float *restrict y0,
                        const float *restrict y1, const float *restrict y2,
                        const float *restrict y3, float out[4]) {
  float s0[GEMV_LANES] = {0}, s1[GEMV_LANES] = {0}, s2[GEMV_LANES] = {0}, s3[GEMV_LANES] = {0};
  int p = 0;
  for (; p + GEMV_LANES <= k; p += GEMV_LANES) {
    for (int u = 0; u < GEMV_LANES; u++) {
      float xv = x[p + u];
      s0[u] += xv * y0[p + u];
      s1[u] += xv * y1[p + u];
      s2[u] += xv * y2[p + u];
      s3[u] += xv * y3[p + u];
    }
  }
  float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
  for (int u = 0; u < GEMV_LANES; u++) {
    t0 += s0[u];
    t1 += s1[u];
    t2 += s2[u];
    t3 += s3[u];
  }
  for (; p < k; p++) {
    t0 += x[p] * y0[p];
    t1 += x[p] * y1[p];
    t2 += x[p] * y2[p];
    t3 += x[p] * y3[p];
  }
  out[0] = t0;
  out[1] = t1;
  out[2] = t2;
  out[3] = t3;
}

/* B is [n, K] (row stride ldb): C[i][j] += dot(a row i, B row j). */
static inline void gemv_t(int m, int n, int k, const float *a, size_t lda, const float *b,
                          size_t ldb, float *c, size_t ldc) {
  for (int j = 0; j < n; j += 4) {
    /* Past the edge, repeat the last row: the extra dots are discarded. */
    const float *y[4];
    for (int q = 0; q < 4; q++) y[q] = b + (size_t)(j + q < n ? j + q : n - 1) * ldb;
    for (int i = 0; i < m; i++) {
      float out[4];
      dot4(k, a + (size_t)i * lda, y[0], y[1], y[2], y[3], out);
      float *ci = c + (size_t)i * ldc + j;
      for (int q = 0; q < 4 && j + q < n; q++) ci[q] += out[q];
    }
  }
}

void HWT_VARIANT(hwt_gemv)(int m, int n, int k, const float *a, size_t lda, const float *b,
                           size_t ldb, int trans_b, float *c, size_t ldc, float beta,
                           const float *bias) {
  if (m <= 0 || n <= 0) return;
  gemv_init(m, n, c, ldc, beta, bias);
  if (trans_b)
    gemv_t(m, n, k, a, lda, b, ldb, c, ldc);
  else
    gemv_n(m, n, k, a, lda, b, ldb, c, ldc);
}
