/* movement op family vs index-arithmetic oracles (exact): concat and split
 * with 1-6 parts on every axis, slice with Python bounds, pad (constant, any
 * rank and value), gather (repeated and negative indices), reshape, nth 1-4. */
#include "ops_test_util.h"

/* concat (split = 0) or split of `parts` tensors along axis. */
static int64_t check_join(int split) {
  int rank = rnd_int(1, 4), axis = rnd_int(0, rank - 1), parts = rnd_int(1, 6);
  int64_t whole[1][HWT_GRAPH_MAX_DIMS], piece[6][HWT_GRAPH_MAX_DIMS];
  int rw[1] = {rank}, rp[6];
  for (int d = 0; d < rank; d++) whole[0][d] = rnd_int(1, 5);
  whole[0][axis] = 0;
  for (int p = 0; p < parts; p++) {
    memcpy(piece[p], whole[0], sizeof whole[0]);
    piece[p][axis] = rnd_int(1, 4);
    whole[0][axis] += piece[p][axis];
    rp[p] = rank;
  }
  one_op t;
  if (split)
    one_op_build(&t, "split", 1, rw, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])whole, parts, rp,
                 (const int64_t(*)[HWT_GRAPH_MAX_DIMS])piece);
  else
    one_op_build(&t, "concat", parts, rp, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])piece, 1, rw,
                 (const int64_t(*)[HWT_GRAPH_MAX_DIMS])whole);
  int64_t ax = axis - (rnd_int(0, 1) ? rank : 0);
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &ax);
  int64_t inner = 1, outer = 1;
  for (int d = axis + 1; d < rank; d++) inner *= whole[0][d];
  for (int d = 0; d < axis; d++) outer *= whole[0][d];
  float *want[6] = {0};
  float *big = split ? t.in[0] : (want[0] = alloc_floats(t.out_n[0]));
  for (int p = 0; p < parts; p++) {
    if (split) want[p] = alloc_floats(t.out_n[p]);
    float *small = split ? want[p] : t.in[p];
    int64_t before = 0;
    for (int q = 0; q < p; q++) before += piece[q][axis];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t a = 0; a < piece[p][axis]; a++)
        for (int64_t i = 0; i < inner; i++) {
          float *dst = split ? &small[(o * piece[p][axis] + a) * inner + i]
                             : &big[(o * whole[0][axis] + before + a) * inner + i];
          const float *src = split ? &big[(o * whole[0][axis] + before + a) * inner + i]
                                   : &small[(o * piece[p][axis] + a) * inner + i];
          *dst = *src;
        }
  }
  return one_op_check_free(&t, want, split ? "split" : "concat", 0.0);
}

static int64_t check_slice(void) {
  int rank = rnd_int(1, 4), axis = rnd_int(0, rank - 1);
  int64_t in[1][HWT_GRAPH_MAX_DIMS], out[1][HWT_GRAPH_MAX_DIMS];
  int r[1] = {rank};
  for (int d = 0; d < rank; d++) in[0][d] = out[0][d] = rnd_int(1, 7);
  int64_t n = in[0][axis], b = rnd_int(0, (int)n - 1), e = rnd_int((int)b + 1, (int)n);
  out[0][axis] = e - b;
  /* express the bounds the Python way: negative from the end, end past n */
  int64_t begin = rnd_int(0, 1) ? b - n : b, end = e == n && rnd_int(0, 1) ? INT64_MAX / 4 : e;
  one_op t;
  one_op_build(&t, "slice", 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  int64_t a64 = axis;
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &a64);
  hwt_graph_op_set_ints(t.g, t.op, "begin", 1, &begin);
  hwt_graph_op_set_ints(t.g, t.op, "end", 1, &end);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; d++) inner *= in[0][d];
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    int64_t o = i / ((e - b) * inner), a = (i / inner) % (e - b), k = i % inner;
    want[0][i] = t.in[0][(o * n + b + a) * inner + k];
  }
  return one_op_check_free(&t, want, "slice", 0.0);
}

/* pad: random rank, pads 0-3 per side, a random value; the oracle walks
 * output indices and maps each back to the input or the value. */
static int64_t check_pad(void) {
  int rank = rnd_int(1, 4);
  int64_t in[1][HWT_GRAPH_MAX_DIMS], out[1][HWT_GRAPH_MAX_DIMS], pads[2 * HWT_GRAPH_MAX_DIMS];
  int r[1] = {rank};
  for (int d = 0; d < rank; d++) {
    in[0][d] = rnd_int(1, 6);
    pads[d] = rnd_int(0, 3);
    pads[d + rank] = rnd_int(0, 3);
    out[0][d] = in[0][d] + pads[d] + pads[d + rank];
  }
  one_op t;
  one_op_build(&t, "pad", 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  hwt_graph_op_set_ints(t.g, t.op, "pads", 2 * rank, pads);
  double value = rnd_int(-8, 8) * 0.25;
  hwt_graph_op_set_floats(t.g, t.op, "value", 1, &value);
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    int64_t rest = i, src = 0, stride = 1;
    int inside = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t k = rest % out[0][d] - pads[d];
      rest /= out[0][d];
      if (k < 0 || k >= in[0][d]) inside = 0;
      src += k * stride;
      stride *= in[0][d];
    }
    want[0][i] = inside ? t.in[0][src] : (float)value;
  }
  return one_op_check_free(&t, want, "pad", 0.0);
}

/* gather: random axis and 1-9 indices (repeats, negative ones). */
static int64_t check_gather(void) {
  int rank = rnd_int(1, 4), axis = rnd_int(0, rank - 1), k = rnd_int(1, 9);
  int64_t in[1][HWT_GRAPH_MAX_DIMS], out[1][HWT_GRAPH_MAX_DIMS], idx[9];
  int r[1] = {rank};
  for (int d = 0; d < rank; d++) in[0][d] = out[0][d] = rnd_int(1, 6);
  out[0][axis] = k;
  int64_t n = in[0][axis];
  for (int j = 0; j < k; j++) idx[j] = rnd_int(0, (int)n - 1) - (rnd_int(0, 1) ? n : 0);
  one_op t;
  one_op_build(&t, "gather", 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  int64_t a64 = axis - (rnd_int(0, 1) ? rank : 0);
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &a64);
  hwt_graph_op_set_ints(t.g, t.op, "indices", k, idx);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; d++) inner *= in[0][d];
  float *want[1] = {alloc_floats(t.out_n[0])};
  for (int64_t i = 0; i < t.out_n[0]; i++) {
    int64_t o = i / (k * inner), j = (i / inner) % k, e = i % inner;
    int64_t at = idx[j] < 0 ? idx[j] + n : idx[j];
    want[0][i] = t.in[0][(o * n + at) * inner + e];
  }
  return one_op_check_free(&t, want, "gather", 0.0);
}

static int64_t check_reshape(const char *type) {
  int64_t in[1][HWT_GRAPH_MAX_DIMS] = {{3, 5, 7, 2}}, out[1][HWT_GRAPH_MAX_DIMS] = {{15, 14}};
  int ri[1] = {4}, ro[1] = {2};
  one_op t;
  one_op_build(&t, type, 1, ri, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in, 1, ro,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  int64_t shape[2] = {15, 14}, axis = 2;
  hwt_graph_op_set_ints(t.g, t.op, "shape", 2, shape);
  hwt_graph_op_set_ints(t.g, t.op, "axis", 1, &axis);
  float *want[1] = {t.in[0]};
  int64_t bad = one_op_check(&t, want, type, 0.0); /* want is t's own input */
  one_op_free(&t);
  return bad;
}

int main(void) {
  int64_t bad = 0;
  for (int rep = 0; rep < 200; rep++) {
    bad += check_join(0);
    bad += check_join(1);
    bad += check_slice();
    bad += check_pad();
    bad += check_gather();
  }
  bad += check_reshape("reshape") + check_reshape("flatten");
  return one_op_verdict(bad);
}
