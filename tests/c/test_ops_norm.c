/* norm op family vs plain-C oracles in double: batch_norm (NCHW of rank
 * 2-5, NCHW[x]c) and softmax on every axis, nth 1-4. */
#include "ops_test_util.h"

static int64_t check_bn(int rank, int blocked) {
  int64_t s[5][HWT_GRAPH_MAX_DIMS];
  int r[5] = {rank, 1, 1, 1, 1};
  for (int d = 0; d < rank; d++) s[0][d] = rnd_int(1, 6);
  if (blocked) s[0][4] = 8;
  int64_t c = blocked ? s[0][1] * s[0][4] : s[0][1];
  for (int i = 1; i < 5; i++) s[i][0] = c;
  one_op t;
  one_op_build(&t, "batch_norm", 5, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  for (int64_t k = 0; k < c; k++) t.in[4][k] = rnd(0.1f, 2.0f); /* var > 0 */
  double eps = 1e-3;
  hwt_graph_op_set_floats(t.g, t.op, "epsilon", 1, &eps);
  if (blocked) {
    int64_t layout[5] = {'N', 'C', 'H', 'W', 'c'};
    hwt_graph_op_set_ints(t.g, t.op, "layout", 5, layout);
  }
  float *want = alloc_floats(t.in_n[0]);
  int64_t inner = 1;
  for (int d = 2; d < rank; d++) inner *= s[0][d];
  for (int64_t i = 0; i < t.in_n[0]; i++) {
    int64_t ch = blocked ? ((i / inner) % s[0][1]) * 8 + i % 8 : (i / inner) % c;
    double sc = t.in[1][ch] / sqrt((double)t.in[4][ch] + eps);
    want[i] = (float)(t.in[0][i] * sc + (t.in[2][ch] - t.in[3][ch] * sc));
  }
  return one_op_check_free(&t, &want, "batch_norm", 1e-6);
}

static int64_t check_softmax(int rank, int axis) {
  int64_t s[1][HWT_GRAPH_MAX_DIMS];
  int r[1] = {rank};
  for (int d = 0; d < rank; d++) s[0][d] = rnd_int(1, 9);
  one_op t;
  one_op_build(&t, "softmax", 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  int64_t ax = axis - (rnd_int(0, 1) ? rank : 0); /* negative axes too */
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &ax);
  int64_t inner = 1, len = s[0][axis];
  for (int d = axis + 1; d < rank; d++) inner *= s[0][d];
  float *want = alloc_floats(t.in_n[0]);
  for (int64_t i = 0; i < t.in_n[0]; i++) {
    int64_t base = (i / (len * inner)) * len * inner + i % inner;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < len; j++) mx = fmax(mx, t.in[0][base + j * inner]);
    for (int64_t j = 0; j < len; j++) sum += exp(t.in[0][base + j * inner] - mx);
    want[i] = (float)(exp(t.in[0][i] - mx) / sum);
  }
  return one_op_check_free(&t, &want, "softmax", 1e-6);
}

int main(void) {
  int64_t bad = 0;
  for (int rep = 0; rep < 30; rep++) {
    for (int rank = 2; rank <= 5; rank++) bad += check_bn(rank, 0);
    bad += check_bn(5, 1);
    for (int rank = 1; rank <= 4; rank++)
      for (int axis = 0; axis < rank; axis++) bad += check_softmax(rank, axis);
  }
  return one_op_verdict(bad);
}
