/* eltwise op family vs the kernel library's plain-C reference, for every
 * model op of the table (hwtune/eltwise_ops.def): random broadcasting shapes
 * (rank 0-4, random size-1 dims) for the binary and n-ary ops, unary ops
 * within the documented bound, attributes set away from their defaults;
 * every ISA variant, nth 1-4. */
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"
#include "ops_test_util.h"

/* op(a, b) for one element, as hwt_eltwise_ref computes it. */
static float oracle(const hwt_eltwise_desc *op, float a, float b) {
  hwt_eltwise_desc d = *op;
  float y;
  d.n = 1;
  hwt_eltwise_ref(&d, &a, &b, NULL, &y);
  return y;
}

/* Attribute i of the test: away from the default, set in the graph too. */
static void set_attrs(one_op *t, hwt_eltwise_desc *d) {
  for (int i = 0; i < hwt_eltwise_attr_count(d->op); i++) {
    double v = i == 0 ? -1.5 : 0.25;
    hwt_graph_op_set_floats(t->g, t->op, hwt_eltwise_attr_name(d->op, i), 1, &v);
    d->attr[i] = (float)v;
  }
}

/* Runs the one-op graph at nth 1-4 against want (within the table's
 * bound: absolute up to 1, relative above, plus half an ulp for want's own
 * rounding; bit for bit when bound is 0); frees both. */
static int64_t run_and_compare(one_op *t, const char *type, hwt_isa isa, float *want,
                               double bound) {
  const double tol = bound == 0.0 ? 0.0 : bound + 0x1p-24;
  int64_t bad = 0;
  char err[256];
  for (int nth = 1; nth <= 4; nth++) {
    if (one_op_run(t, isa, nth, err, sizeof err) != HWT_OK) {
      fprintf(stderr, "%s: prepare failed: %s\n", type, err);
      bad++;
      break;
    }
    bad += compare(type, t->out[0], want, t->out_n[0], tol, tol);
  }
  free(want);
  one_op_free(t);
  return bad;
}

/* Offset of output multi-index idx in an input of rank r, shape s,
 * right-aligned against the output rank. */
static int64_t bcast_offset(const int64_t *idx, int rank, int r, const int64_t *s) {
  int64_t off = 0;
  for (int d = 0; d < r; d++) off = off * s[d] + (s[d] == 1 ? 0 : idx[d + rank - r]);
  return off;
}

static int64_t check_broadcast(hwt_ew_op opi, int n_in, hwt_isa isa) {
  const char *type = hwt_eltwise_name(opi);
  int rank = rnd_int(0, 4);
  int64_t out[HWT_GRAPH_MAX_DIMS] = {0};
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
  hwt_eltwise_desc op;
  hwt_eltwise_desc_init(&op, opi, isa, 1);
  set_attrs(&t, &op);
  float *want = alloc_floats(t.out_n[0]);
  int64_t idx[HWT_GRAPH_MAX_DIMS];
  for (int64_t e = 0; e < t.out_n[0]; e++) {
    int64_t rem = e;
    for (int d = rank - 1; d >= 0; d--) idx[d] = rem % out[d], rem /= out[d];
    float acc = t.in[0][bcast_offset(idx, rank, in_rank[0], in_shape[0])];
    for (int i = 1; i < n_in; i++)
      acc = oracle(&op, acc, t.in[i][bcast_offset(idx, rank, in_rank[i], in_shape[i])]);
    want[e] = acc;
  }
  return run_and_compare(&t, type, isa, want, 0.0);
}

static int64_t check_unary(hwt_ew_op op, hwt_isa isa, int64_t n) {
  const char *type = hwt_eltwise_name(op);
  int r[1] = {1};
  int64_t s[1][HWT_GRAPH_MAX_DIMS] = {{n}};
  one_op t;
  one_op_build(&t, type, 1, r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])s);
  float *want = alloc_floats(n);
  hwt_eltwise_desc d;
  hwt_eltwise_desc_init(&d, op, isa, (size_t)n);
  set_attrs(&t, &d);
  hwt_eltwise_ref(&d, t.in[0], NULL, NULL, want);
  double atol = hwt_eltwise_max_abs_error(op, isa);
  return run_and_compare(&t, type, isa, want, atol);
}

int main(void) {
  int64_t bad = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int op = 0; op < HWT_EW_COUNT; op++) {
      if (!hwt_eltwise_is_graph_op((hwt_ew_op)op)) continue;
      switch (hwt_eltwise_kind((hwt_ew_op)op)) {
        case HWT_EW_UNARY:
          for (int64_t n = 1; n <= 1000; n = n * 3 + 1) bad += check_unary((hwt_ew_op)op, (hwt_isa)isa, n);
          break;
        case HWT_EW_BINARY:
          for (int rep = 0; rep < 60; rep++) bad += check_broadcast((hwt_ew_op)op, 2, (hwt_isa)isa);
          break;
        case HWT_EW_NARY:
          for (int rep = 0; rep < 60; rep++)
            bad += check_broadcast((hwt_ew_op)op, rnd_int(2, 5), (hwt_isa)isa);
          break;
        default:
          fprintf(stderr, "%s: no test for this kind\n", hwt_eltwise_name((hwt_ew_op)op));
          bad++;
      }
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
  return one_op_verdict(bad);
}
