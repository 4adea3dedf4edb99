/* eltwise op family vs plain-C oracles: random broadcasting shapes (rank
 * 0-4, random size-1 dims) for every binary op and n-ary sum, unary ops
 * against hwt_eltwise_ref within the documented bound, every ISA variant,
 * nth 1-4. */
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"
#include "ops_test_util.h"

static const char *k_binary[] = {"add", "sub", "mul", "div", "minimum", "maximum", "mod"};

static float oracle(int op, float a, float b) {
  switch (op) {
  case 0: return a + b;
  case 1: return a - b;
  case 2: return a * b;
  case 3: return a / b;
  case 4: return a <= b ? a : b;
  case 5: return a >= b ? a : b;
  default: {
    /* floored modulo in double: fmod is exact and so is r + b here, so
     * rounding once to float gives numpy's float32 answer */
    double r = fmod((double)a, (double)b);
    if (r != 0.0 && ((r < 0) != (b < 0))) r += b;
    if (r == 0.0) r = copysign(0.0, b);
    return (float)r;
  }
  }
}

/* Offset of output multi-index idx in an input of rank r, shape s,
 * right-aligned against the output rank. */
static int64_t bcast_offset(const int64_t *idx, int rank, int r, const int64_t *s) {
  int64_t off = 0;
  for (int d = 0; d < r; d++) off = off * s[d] + (s[d] == 1 ? 0 : idx[d + rank - r]);
  return off;
}

static int64_t check_broadcast(const char *type, int opi, int n_in, hwt_isa isa) {
  int rank = rnd_int(0, 4);
  int64_t out[HWT_GRAPH_MAX_DIMS];
  for (int d = 0; d < rank; d++) out[d] = rnd_int(1, 7);
  int in_rank[8];
  int64_t in_shape[8][HWT_GRAPH_MAX_DIMS];
  for (int i = 0; i < n_in; i++) {
    in_rank[i] = rnd_int(0, rank);
    for (int d = 0; d < in_rank[i]; d++)
      in_shape[i][d] = rnd_int(0, 2) ? out[d + rank - in_rank[i]] : 1;
  }
  /* the output is the broadcast of the inputs: shrink dims none covers */
  for (int d = 0; d < rank; d++) {
    int64_t m = 1;
    for (int i = 0; i < n_in; i++) {
      int sd = d - (rank - in_rank[i]);
      if (sd >= 0 && in_shape[i][sd] > m) m = in_shape[i][sd];
    }
    out[d] = m;
  }
  one_op t;
  int out_rank[1] = {rank};
  int64_t out_shape[1][HWT_GRAPH_MAX_DIMS];
  memcpy(out_shape[0], out, sizeof out);
  one_op_build(&t, type, n_in, in_rank, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_shape, 1,
               out_rank, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_shape);
  if (opi == 3 || opi == 6)
    for (int64_t k = 0; k < t.in_n[1]; k++)
      if (fabsf(t.in[1][k]) < 0.25f) t.in[1][k] = 0.5f;
  float *want = alloc_floats(t.out_n[0]);
  int64_t idx[HWT_GRAPH_MAX_DIMS];
  for (int64_t e = 0; e < t.out_n[0]; e++) {
    int64_t rem = e;
    for (int d = rank - 1; d >= 0; d--) idx[d] = rem % out[d], rem /= out[d];
    float acc = t.in[0][bcast_offset(idx, rank, in_rank[0], in_shape[0])];
    for (int i = 1; i < n_in; i++)
      acc = oracle(opi, acc, t.in[i][bcast_offset(idx, rank, in_rank[i], in_shape[i])]);
    want[e] = acc;
  }
  int64_t bad = 0;
  char err[256];
  for (int nth = 1; nth <= 4; nth++) {
    if (one_op_run(&t, isa, nth, err, sizeof err) != HWT_OK) {
      fprintf(stderr, "%s: prepare failed: %s\n", type, err);
      bad++;
      break;
    }
    bad += compare(type, t.out[0], want, t.out_n[0], 0.0, 0.0);
  }
  free(want);
  one_op_free(&t);
  return bad;
}

static int64_t check_unary(const char *type, hwt_ew_op ref_op, hwt_isa isa, int64_t n) {
  int r[1] = {1};
  int64_t s[1][HWT_GRAPH_MAX_DIMS] = {{n}};
  one_op t;
  one_op_build(&t, type, 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  float *want = alloc_floats(n);
  double atol = 0.0;
  if (strcmp(type, "abs") == 0) {
    for (int64_t i = 0; i < n; i++) want[i] = fabsf(t.in[0][i]);
  } else if (strcmp(type, "affine") == 0) {
    double sc = -1.5, sh = 0.25;
    hwt_graph_op_set_floats(t.g, t.op, "scale", 1, &sc);
    hwt_graph_op_set_floats(t.g, t.op, "shift", 1, &sh);
    for (int64_t i = 0; i < n; i++) want[i] = t.in[0][i] * -1.5f + 0.25f;
  } else {
    hwt_eltwise_ref(ref_op, t.in[0], NULL, NULL, want, (size_t)n);
    atol = hwt_eltwise_max_abs_error(ref_op, isa);
  }
  int64_t bad = 0;
  char err[256];
  for (int nth = 1; nth <= 4; nth++) {
    if (one_op_run(&t, isa, nth, err, sizeof err) != HWT_OK) {
      fprintf(stderr, "%s: prepare failed: %s\n", type, err);
      bad++;
      break;
    }
    bad += compare(type, t.out[0], want, n, 0.0, atol);
  }
  free(want);
  one_op_free(&t);
  return bad;
}

int main(void) {
  int64_t bad = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int rep = 0; rep < 60; rep++) {
      for (int op = 0; op < 7; op++) bad += check_broadcast(k_binary[op], op, 2, (hwt_isa)isa);
      bad += check_broadcast("sum", 0, rnd_int(2, 5), (hwt_isa)isa);
    }
    for (int64_t n = 1; n <= 1000; n = n * 3 + 1) {
      bad += check_unary("sigmoid", HWT_EW_SIGMOID, (hwt_isa)isa, n);
      bad += check_unary("tanh", HWT_EW_TANH, (hwt_isa)isa, n);
      bad += check_unary("relu", HWT_EW_RELU, (hwt_isa)isa, n);
      bad += check_unary("abs", HWT_EW_RELU, (hwt_isa)isa, n);
      bad += check_unary("affine", HWT_EW_RELU, (hwt_isa)isa, n);
    }
  }
  /* a shape that does not broadcast is refused at prepare */
  int r[2] = {2, 2};
  int64_t s[2][HWT_GRAPH_MAX_DIMS] = {{4, 3}, {4, 2}};
  one_op t;
  one_op_build(&t, "add", 2, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  char err[256];
  if (one_op_run(&t, HWT_ISA_GENERIC, 1, err, sizeof err) == HWT_OK) {
    fprintf(stderr, "add [4,3] + [4,2] was accepted\n");
    bad++;
  }
  one_op_free(&t);
  if (bad) {
    fprintf(stderr, "FAIL: %lld mismatches\n", (long long)bad);
    return 1;
  }
  printf("ok\n");
  return 0;
}
