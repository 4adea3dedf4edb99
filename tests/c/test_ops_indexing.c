/* indexing op family vs index-arithmetic oracles (exact): take and
 * gather_elements with negative, out-of-range and NaN indices (NaN slices,
 * never a read outside the data), cumsum with every exclusive/reverse
 * combination, expand and where with broadcasting; nth 1-4. */
#include "ops_test_util.h"

typedef int64_t shape_t[HWT_GRAPH_MAX_DIMS];

/* A random index for an axis of n: mostly in [-n, n), sometimes outside or
 * NaN. */
static float rnd_index(int64_t n) {
  int r = rnd_int(0, 19);
  if (r == 0) return NAN;
  if (r == 1) return (float)(n + rnd_int(0, 3));
  if (r == 2) return (float)(-n - 1 - rnd_int(0, 3));
  return (float)rnd_int(-(int)n, (int)n - 1);
}

static int64_t wrap(float v, int64_t n) {
  if (!(v >= -(float)n && v < (float)n)) return -1;
  int64_t i = (int64_t)v;
  return i < 0 ? i + n : i;
}

static int64_t check_take(void) {
  int rank = rnd_int(1, 3), axis = rnd_int(0, rank - 1), irank = rnd_int(1, 2);
  shape_t in[2], out[1];
  int ri[2] = {rank, irank}, ro[1] = {rank - 1 + irank};
  for (int d = 0; d < rank; d++) in[0][d] = rnd_int(1, 5);
  for (int d = 0; d < irank; d++) in[1][d] = rnd_int(1, 4);
  int o = 0;
  for (int d = 0; d < axis; d++) out[0][o++] = in[0][d];
  for (int d = 0; d < irank; d++) out[0][o++] = in[1][d];
  for (int d = axis + 1; d < rank; d++) out[0][o++] = in[0][d];
  one_op t;
  one_op_build(&t, "take", 2, ri, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  int64_t a64 = axis - (rnd_int(0, 1) ? rank : 0);
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &a64);
  const int64_t n = in[0][axis], k = t.in_n[1];
  for (int64_t j = 0; j < k; j++) t.in[1][j] = rnd_index(n);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; d++) inner *= in[0][d];
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    int64_t outer = i / (k * inner), j = (i / inner) % k, e = i % inner;
    int64_t at = wrap(t.in[1][j], n);
    want[0][i] = at < 0 ? NAN : t.in[0][(outer * n + at) * inner + e];
  }
  return one_op_check_free(&t, want, "take", 0.0);
}

static int64_t check_gather_elements(void) {
  int rank = rnd_int(1, 3), axis = rnd_int(0, rank - 1);
  shape_t in[2], out[1];
  int ri[2] = {rank, rank}, ro[1] = {rank};
  for (int d = 0; d < rank; d++) {
    in[0][d] = rnd_int(1, 5);
    in[1][d] = out[0][d] = d == axis ? rnd_int(1, 6) : rnd_int(1, (int)in[0][d]);
  }
  one_op t;
  one_op_build(&t, "gather_elements", 2, ri, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  int64_t a64 = axis;
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &a64);
  for (int64_t j = 0; j < t.in_n[1]; j++) t.in[1][j] = rnd_index(in[0][axis]);
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t e = 0; e < t.out_n[0]; e++) {
    int64_t c[HWT_GRAPH_MAX_DIMS], r = e;
    for (int d = rank - 1; d >= 0; d--) {
      c[d] = r % out[0][d];
      r /= out[0][d];
    }
    int64_t at = wrap(t.in[1][e], in[0][axis]);
    if (at < 0) {
      want[0][e] = NAN;
      continue;
    }
    c[axis] = at;
    int64_t off = 0;
    for (int d = 0; d < rank; d++) off = off * in[0][d] + c[d];
    want[0][e] = t.in[0][off];
  }
  return one_op_check_free(&t, want, "gather_elements", 0.0);
}

static int64_t check_cumsum(int exclusive, int reverse) {
  int rank = rnd_int(1, 3), axis = rnd_int(0, rank - 1);
  shape_t in[1];
  int r[1] = {rank};
  for (int d = 0; d < rank; d++) in[0][d] = rnd_int(1, 6);
  one_op t;
  one_op_build(&t, "cumsum", 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in);
  int64_t a64 = axis, ex = exclusive, rev = reverse;
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &a64);
  hwt_graph_op_set_ints(t.g, t.op, "exclusive", 1, &ex);
  hwt_graph_op_set_ints(t.g, t.op, "reverse", 1, &rev);
  int64_t inner = 1, n = in[0][axis];
  for (int d = axis + 1; d < rank; d++) inner *= in[0][d];
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    int64_t base = i - ((i / inner) % n) * inner, pos = (i / inner) % n;
    float acc = 0.0f; /* in the engine's order: from the start (reverse: end) */
    for (int64_t j = 0; j < n; j++) {
      int64_t p = reverse ? n - 1 - j : j;
      if (p == pos && exclusive) break;
      acc += t.in[0][base + p * inner];
      if (p == pos) break;
    }
    want[0][i] = acc;
  }
  return one_op_check_free(&t, want, "cumsum", 0.0);
}

/* expand (n_in 1) or where (n_in 3): inputs broadcast to a random shape. */
static int64_t check_bcast(int n_in) {
  int rank = rnd_int(1, 4);
  shape_t in[3], out[1];
  int ri[3], ro[1] = {rank};
  for (int d = 0; d < rank; d++) out[0][d] = rnd_int(1, 4);
  for (int k = 0; k < n_in; k++) {
    ri[k] = rnd_int(1, rank);
    for (int d = 0; d < ri[k]; d++)
      in[k][d] = rnd_int(0, 1) ? out[0][rank - ri[k] + d] : 1;
  }
  one_op t;
  one_op_build(&t, n_in == 1 ? "expand" : "where", n_in, ri,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  if (n_in == 1) hwt_graph_op_set_ints(t.g, t.op, "shape", rank, out[0]);
  else
    for (int64_t j = 0; j < t.in_n[0]; j++) t.in[0][j] = (float)rnd_int(0, 1);
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t e = 0; e < t.out_n[0]; e++) {
    int64_t c[HWT_GRAPH_MAX_DIMS], r = e, off[3] = {0, 0, 0};
    for (int d = rank - 1; d >= 0; d--) {
      c[d] = r % out[0][d];
      r /= out[0][d];
    }
    for (int k = 0; k < n_in; k++)
      for (int d = 0; d < ri[k]; d++)
        off[k] = off[k] * in[k][d] + (in[k][d] == 1 ? 0 : c[rank - ri[k] + d]);
    want[0][e] = n_in == 1 ? t.in[0][off[0]]
                           : (t.in[0][off[0]] != 0.0f ? t.in[1][off[1]] : t.in[2][off[2]]);
  }
  return one_op_check_free(&t, want, n_in == 1 ? "expand" : "where", 0.0);
}

int main(void) {
  int n = 0;
  hwt_ops_indexing(&n); /* a strong reference: see link_families */
  int64_t bad = 0;
  for (int rep = 0; rep < 200; rep++) {
    bad += check_take();
    bad += check_gather_elements();
    bad += check_cumsum(rep & 1, (rep >> 1) & 1);
    bad += check_bcast(1);
    bad += check_bcast(3);
  }
  return one_op_verdict(bad);
}
