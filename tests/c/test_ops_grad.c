/* Training ops against plain-C oracles in double, every share of nth 1-4:
 * minimum_grad and maximum_grad with numpy broadcasting (random shapes of
 * rank 1-4 where either operand broadcasts along any dimension, forced ties
 * and NaNs; each share walks the broadcast from its own start, so a wrong
 * multi-index restart shows here), abs_grad, batch_norm_train with its
 * gradient (rank 2-4, a batch of one element per channel included) and
 * batch_norm_stats_update. */
#include "ops_test_util.h"

/* Offset of output element i in an operand of shape s (rank r, right
 * aligned to the output's rank ro, size-1 dimensions broadcast). */
static int64_t bc_offset(int64_t i, int ro, const int64_t *os, int r, const int64_t *s) {
  int64_t off = 0, step = 1;
  for (int d = ro - 1; d >= 0; d--) {
    int64_t idx = i % os[d];
    i /= os[d];
    int sd = d - (ro - r);
    if (sd < 0) continue;
    if (s[sd] != 1) off += idx * step;
    step *= s[sd];
  }
  return off;
}

static int64_t check_minmax(int larger) {
  int64_t s[3][HWT_GRAPH_MAX_DIMS], os[2][HWT_GRAPH_MAX_DIMS];
  int rank = rnd_int(1, 4), r[3], ro[2] = {rank, rank};
  for (int d = 0; d < rank; d++) os[0][d] = os[1][d] = s[2][d] = rnd_int(1, 7);
  r[2] = rank;
  for (int k = 0; k < 2; k++) { /* each operand: maybe fewer dims, maybe 1s */
    r[k] = rnd_int(1, rank);
    for (int d = 0; d < r[k]; d++)
      s[k][d] = rnd_int(0, 2) ? os[0][rank - r[k] + d] : 1;
  }
  one_op t;
  one_op_build(&t, larger ? "maximum_grad" : "minimum_grad", 3, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 2, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])os);
  for (int64_t k = 0; k < t.in_n[0]; k++) { /* ties and NaNs among the values */
    if (rnd_int(0, 5) == 0) t.in[0][k] = 1.0f;
    if (rnd_int(0, 40) == 0) t.in[0][k] = NAN;
  }
  for (int64_t k = 0; k < t.in_n[1]; k++)
    if (rnd_int(0, 5) == 0) t.in[1][k] = 1.0f;
  float *want[2] = {alloc_floats(t.out_n[0]), alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    float a = t.in[0][bc_offset(i, rank, os[0], r[0], s[0])];
    float b = t.in[1][bc_offset(i, rank, os[0], r[1], s[1])];
    float g = t.in[2][i];
    int a_wins = larger ? a > b : a < b, b_wins = larger ? b > a : b < a;
    float half = a == b ? g / 2 : g;
    want[0][i] = b_wins ? 0.0f : half;
    want[1][i] = a_wins ? 0.0f : half;
  }
  return one_op_check_free(&t, want, larger ? "maximum_grad" : "minimum_grad", 0.0);
}

static int64_t check_abs(void) {
  int64_t s[2][HWT_GRAPH_MAX_DIMS] = {{rnd_int(1, 300)}, {0}};
  s[1][0] = s[0][0];
  int r[2] = {1, 1};
  one_op t;
  one_op_build(&t, "abs_grad", 2, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  t.in[0][0] = 0.0f; /* sign(0) = 0 */
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    float x = t.in[0][i];
    want[0][i] = x > 0 ? t.in[1][i] : x < 0 ? -t.in[1][i] : 0.0f;
  }
  return one_op_check_free(&t, want, "abs_grad", 0.0);
}

/* batch_norm_train (grad = 0) or batch_norm_train_grad (grad = 1) of a
 * random [N, C, ...] x. */
static int64_t check_bn_train(int grad) {
  int64_t s[5][HWT_GRAPH_MAX_DIMS] = {{0}}, os[3][HWT_GRAPH_MAX_DIMS]; /* zeroed: -O3 cannot see rank >= 2 */
  const int rank = rnd_int(2, 4), n_in = grad ? 5 : 3;
  int r[5], ro[3] = {rank, 1, 1};
  for (int d = 0; d < rank; d++) s[0][d] = os[0][d] = rnd_int(1, 6);
  const int64_t c = s[0][1];
  r[0] = rank;
  for (int i = 1; i < n_in; i++) {
    r[i] = grad && i == 1 ? rank : 1;
    for (int d = 0; d < r[i]; d++) s[i][d] = r[i] == 1 ? c : s[0][d];
  }
  os[1][0] = os[2][0] = c;
  one_op t;
  const char *what = grad ? "batch_norm_train_grad" : "batch_norm_train";
  one_op_build(&t, what, n_in, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 3, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])os);
  if (grad)
    for (int64_t k = 0; k < c; k++) t.in[4][k] = rnd(0.2f, 2.0f); /* invstd > 0 */
  double eps = 1e-3;
  if (!grad) hwt_graph_op_set_floats(t.g, t.op, "epsilon", 1, &eps);
  float *want[3] = {alloc_floats(t.out_n[0]), alloc_floats(c), alloc_floats(c)};
  const int64_t n = s[0][0], inner = t.in_n[0] / (n * c);
  const double m = (double)(n * inner);
  for (int64_t ch = 0; ch < c; ch++) {
    double a = 0.0, b = 0.0, mean, inv;
    if (grad) {
      mean = t.in[3][ch], inv = t.in[4][ch];
    } else {
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < inner; k++) a += t.in[0][(i * c + ch) * inner + k];
      mean = a / m;
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < inner; k++) {
          double d = t.in[0][(i * c + ch) * inner + k] - mean;
          b += d * d;
        }
      inv = 1.0 / sqrt(b / m + eps);
    }
    double db = 0.0, dg = 0.0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < inner; k++) {
        const int64_t at = (i * c + ch) * inner + k;
        const double xhat = (t.in[0][at] - mean) * inv;
        if (grad) {
          db += t.in[1][at];
          dg += t.in[1][at] * xhat;
        } else {
          want[0][at] = (float)(xhat * t.in[1][ch] + t.in[2][ch]);
        }
      }
    if (grad) {
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < inner; k++) {
          const int64_t at = (i * c + ch) * inner + k;
          const double xhat = (t.in[0][at] - mean) * inv;
          want[0][at] = (float)(t.in[2][ch] * inv * (t.in[1][at] - db / m - xhat * dg / m));
        }
      want[1][ch] = (float)dg;
      want[2][ch] = (float)db;
    } else {
      want[1][ch] = (float)mean;
      want[2][ch] = (float)inv;
    }
  }
  return one_op_check_free(&t, want, what, 1e-5);
}

static int64_t check_bn_stats(void) {
  int64_t s[4][HWT_GRAPH_MAX_DIMS];
  int r[4] = {1, 1, 1, 1};
  const int64_t c = rnd_int(1, 70), count = rnd_int(1, 9);
  for (int i = 0; i < 4; i++) s[i][0] = c;
  one_op t;
  one_op_build(&t, "batch_norm_stats_update", 4, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s,
               2, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  const double m = 0.25, eps = 0.01;
  hwt_graph_op_set_floats(t.g, t.op, "momentum", 1, &m);
  hwt_graph_op_set_floats(t.g, t.op, "epsilon", 1, &eps);
  hwt_graph_op_set_ints(t.g, t.op, "count", 1, &count);
  float *want[2] = {alloc_floats(c), alloc_floats(c)};
  for (int64_t k = 0; k < c; k++) {
    const double inv = t.in[3][k] = rnd(0.2f, 3.0f);
    const double bvar = (1.0 / (inv * inv) - eps) * (count > 1 ? count / (count - 1.0) : 1.0);
    want[0][k] = (float)((1 - m) * t.in[0][k] + m * t.in[2][k]);
    want[1][k] = (float)((1 - m) * t.in[1][k] + m * bvar);
  }
  return one_op_check_free(&t, want, "batch_norm_stats_update", 1e-6);
}

int main(void) {
  int64_t bad = 0;
  for (int rep = 0; rep < 200; rep++) bad += check_minmax(rep % 2) + (rep % 10 ? 0 : check_abs());
  for (int rep = 0; rep < 40; rep++) bad += check_bn_train(rep % 2) + check_bn_stats();
  return one_op_verdict(bad);
}
