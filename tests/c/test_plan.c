/* Graph IR and planner: validation messages, cycle reports, dependency
 * arrays, levels, and above all that buffer reuse never lets two tensors
 * that can be live together share bytes.
 *
 * Thousands of random DAGs (random fan-in, fan-out, sizes, id order) are
 * planned with each policy; every plan is checked three ways: the library's
 * own brute force (hwt_plan_check_aliasing), a closure over bitmasks written
 * here, and event simulations of random parallel schedules in which a
 * tensor is live from its producer's start to its last reader's end. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwtune/graph.h"
#include "hwtune/plan.h"
#include "check.h"


static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { /* xorshift64*, uniform enough for tests */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

/* ---- small fixed graphs -------------------------------------------------- */

static int tensor(hwt_graph *g, const char *name, int64_t elems, int kind) {
  int id = hwt_graph_add_tensor(g, name, 1, &elems, kind);
  CHECK(id >= 0, "add_tensor %s: %s", name, hwt_graph_error(g));
  return id;
}

static int op1(hwt_graph *g, const char *name, int n_in, const int *in, int out) {
  return hwt_graph_add_op(g, name, "relu", n_in, in, 1, &out);
}

static void expect_invalid(const hwt_graph *g, const char *want) {
  char err[256] = "";
  CHECK(hwt_graph_validate(g, err, sizeof err) == HWT_EINVAL, "validate should fail (%s)", want);
  CHECK(strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
  hwt_plan *p = hwt_plan_build(g, NULL, err, sizeof err);
  CHECK(p == NULL && strstr(err, want) != NULL, "plan_build: \"%s\" lacks \"%s\"", err, want);
  hwt_plan_destroy(p);
}

static void test_builder_errors(void) {
  hwt_graph *g = hwt_graph_create();
  int64_t bad_shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, zero = 0;
  CHECK(hwt_graph_add_tensor(g, "x9", 9, bad_shape, HWT_TENSOR_INPUT) == HWT_EINVAL, "9 dims");
  CHECK(strstr(hwt_graph_error(g), "9 dimensions (at most 8)"), "%s", hwt_graph_error(g));
  CHECK(hwt_graph_add_tensor(g, "z", 1, &zero, HWT_TENSOR_INPUT) == HWT_EINVAL, "zero dim");
  CHECK(strstr(hwt_graph_error(g), "dimension 0 is 0"), "%s", hwt_graph_error(g));
  CHECK(hwt_graph_add_tensor(g, "", 0, NULL, HWT_TENSOR_INPUT) == HWT_EINVAL, "empty name");
  CHECK(hwt_graph_add_tensor(g, "k", 0, NULL, 7) == HWT_EINVAL, "bad kind");
  CHECK(hwt_graph_n_tensors(g) == 0, "refused calls must not add tensors");
  /* Validation repeats the first refused call. */
  expect_invalid(g, "9 dimensions");
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  int x = tensor(g, "x", 4, HWT_TENSOR_INPUT), w = tensor(g, "w", 4, HWT_TENSOR_PARAM);
  int a = tensor(g, "a", 4, HWT_TENSOR_ACTIVATION);
  int in_bad[2] = {x, 7};
  CHECK(op1(g, "f", 2, in_bad, a) == HWT_EINVAL, "unknown input id");
  CHECK(strstr(hwt_graph_error(g), "op \"f\": input 1 is tensor id 7, but the graph has 3 "
                "tensors"), "%s", hwt_graph_error(g));
  CHECK(hwt_graph_n_ops(g) == 0 && hwt_graph_tensor_producer(g, a) == -1, "refused op added");
  CHECK(op1(g, "f", 1, &x, 3) == HWT_EINVAL, "unknown output id");
  CHECK(strstr(hwt_graph_error(g), "output 0 is tensor id 3"), "%s", hwt_graph_error(g));
  CHECK(op1(g, "f", 1, &x, w) == HWT_EINVAL, "param written");
  CHECK(strstr(hwt_graph_error(g), "writes param tensor \"w\""), "%s", hwt_graph_error(g));
  CHECK(op1(g, "f", 1, &x, a) == 0, "good op: %s", hwt_graph_error(g));
  CHECK(op1(g, "g", 1, &x, a) == HWT_EINVAL, "produced twice");
  CHECK(strstr(hwt_graph_error(g), "tensor \"a\" is produced twice: by op \"f\" and op \"g\""),
        "%s", hwt_graph_error(g));
  int b = tensor(g, "b", 4, HWT_TENSOR_ACTIVATION);
  int outs[2] = {b, b};
  CHECK(hwt_graph_add_op(g, "h", "split", 1, &x, 2, outs) == HWT_EINVAL, "same output twice");
  CHECK(strstr(hwt_graph_error(g), "lists it as output 0 and 1"), "%s", hwt_graph_error(g));
  CHECK(hwt_graph_add_op(g, "h", "noop", 1, &x, 0, outs) == HWT_EINVAL, "no outputs");
  expect_invalid(g, "input 1 is tensor id 7"); /* the first refusal */
  hwt_graph_destroy(g);
}

static void test_validation(void) {
  hwt_graph *g = hwt_graph_create();
  int x = tensor(g, "x", 4, HWT_TENSOR_INPUT);
  int a = tensor(g, "a", 4, HWT_TENSOR_ACTIVATION);
  tensor(g, "dangling", 4, HWT_TENSOR_ACTIVATION);
  op1(g, "f", 1, &x, a);
  expect_invalid(g, "activation tensor \"dangling\" is never produced by an op");
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  x = tensor(g, "x", 4, HWT_TENSOR_INPUT);
  tensor(g, "y", 4, HWT_TENSOR_OUTPUT);
  expect_invalid(g, "output tensor \"y\" is never produced by an op");
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  x = tensor(g, "x", 4, HWT_TENSOR_INPUT);
  a = tensor(g, "a", 4, HWT_TENSOR_ACTIVATION);
  int b = tensor(g, "x", 4, HWT_TENSOR_OUTPUT);
  op1(g, "f", 1, &x, a);
  op1(g, "g", 1, &a, b);
  expect_invalid(g, "duplicate tensor name \"x\" (tensors 0 and 2)");
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  x = tensor(g, "x", 4, HWT_TENSOR_INPUT);
  a = tensor(g, "a", 4, HWT_TENSOR_ACTIVATION);
  b = tensor(g, "b", 4, HWT_TENSOR_OUTPUT);
  op1(g, "f", 1, &x, a);
  op1(g, "f", 1, &a, b);
  expect_invalid(g, "duplicate op name \"f\" (ops 0 and 1)");
  hwt_graph_destroy(g);

  hwt_plan_options o;
  hwt_plan_options_init(&o);
  o.reuse = 9;
  char err[128];
  g = hwt_graph_create();
  CHECK(hwt_plan_build(g, &o, err, sizeof err) == NULL && strstr(err, "unknown reuse policy 9"),
        "%s", err);
  hwt_plan_options_init(&o);
  o.bytes_per_s = -1;
  CHECK(hwt_plan_build(g, &o, err, sizeof err) == NULL && strstr(err, "must be finite"), "%s",
        err);
  /* An empty graph plans to an empty arena. */
  hwt_plan *p = hwt_plan_build(g, NULL, err, sizeof err);
  CHECK(p && hwt_plan_n_ops(p) == 0 && hwt_plan_arena_bytes(p) == 0, "empty graph");
  hwt_plan_destroy(p);
  hwt_graph_destroy(g);
}

static void test_cycles(void) {
  /* ops added as c, a, b; data flows a -> b -> c -> a, plus an acyclic head. */
  hwt_graph *g = hwt_graph_create();
  int x = tensor(g, "x", 4, HWT_TENSOR_INPUT);
  int ta = tensor(g, "ta", 4, HWT_TENSOR_ACTIVATION), tb = tensor(g, "tb", 4, HWT_TENSOR_ACTIVATION);
  int tc = tensor(g, "tc", 4, HWT_TENSOR_OUTPUT), th = tensor(g, "th", 4, HWT_TENSOR_ACTIVATION);
  op1(g, "head", 1, &x, th);
  op1(g, "c", 1, &tb, tc);
  int in_a[2] = {th, tc};
  op1(g, "a", 2, in_a, ta);
  op1(g, "b", 1, &ta, tb);
  expect_invalid(g, "cycle: c -> a -> b -> c");
  char err[256];
  hwt_graph_validate(g, err, sizeof err);
  CHECK(strcmp(err, "cycle: c -> a -> b -> c") == 0, "exact cycle text: %s", err);
  /* A tiny buffer truncates instead of overflowing. */
  char small[10];
  hwt_graph_validate(g, small, sizeof small);
  CHECK(strlen(small) == 9 && strncmp(small, "cycle: c ", 9) == 0, "truncated: %s", small);
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  int t = tensor(g, "t", 4, HWT_TENSOR_OUTPUT);
  op1(g, "self", 1, &t, t);
  expect_invalid(g, "cycle: self -> self");
  hwt_graph_destroy(g);
}

static void test_attrs_and_costs(void) {
  hwt_graph *g = hwt_graph_create();
  int x = tensor(g, "x", 4, HWT_TENSOR_INPUT), y = tensor(g, "y", 4, HWT_TENSOR_OUTPUT);
  int z = tensor(g, "z", 4, HWT_TENSOR_OUTPUT), w = tensor(g, "w", 4, HWT_TENSOR_OUTPUT);
  int f = op1(g, "f", 1, &x, y), h = op1(g, "h", 1, &x, z), k = op1(g, "k", 1, &x, w);
  int64_t stride[2] = {2, 3}, got[4] = {0};
  double alpha = 0.5, gf[2] = {0};
  CHECK(hwt_graph_op_set_ints(g, f, "stride", 2, stride) == HWT_OK, "set ints");
  CHECK(hwt_graph_op_set_floats(g, f, "alpha", 1, &alpha) == HWT_OK, "set floats");
  CHECK(hwt_graph_op_attr_kind(g, f, "stride") == HWT_ATTR_INTS, "kind ints");
  CHECK(hwt_graph_op_attr_kind(g, f, "nope") == HWT_ATTR_NONE, "kind none");
  CHECK(hwt_graph_op_get_ints(g, f, "stride", got, 4) == 2 && got[0] == 2 && got[1] == 3, "get");
  got[0] = got[1] = -1;
  CHECK(hwt_graph_op_get_ints(g, f, "stride", got, 1) == 2 && got[0] == 2 && got[1] == -1,
        "get truncates to max but reports the count");
  CHECK(hwt_graph_op_get_ints(g, f, "alpha", got, 4) == HWT_EINVAL, "wrong kind");
  CHECK(hwt_graph_op_get_floats(g, f, "alpha", gf, 2) == 1 && gf[0] == 0.5, "get floats");
  CHECK(hwt_graph_op_get_ints(g, h, "stride", got, 4) == HWT_EINVAL, "other op has none");
  CHECK(hwt_graph_op_set_floats(g, f, "stride", 1, &alpha) == HWT_OK, "replace kind");
  CHECK(hwt_graph_op_attr_kind(g, f, "stride") == HWT_ATTR_FLOATS, "replaced");
  CHECK(hwt_graph_op_set_ints(g, 99, "s", 1, stride) == HWT_EINVAL, "bad op id");
  CHECK(hwt_graph_op_set_cost(g, f, -1.0) == HWT_EINVAL, "negative cost");
  CHECK(strstr(hwt_graph_error(g), "cost -1 s"), "%s", hwt_graph_error(g));
  CHECK(hwt_graph_op_set_work(g, k, 1.0, -2.0) == HWT_EINVAL, "negative bytes");
  hwt_graph_destroy(g);

  g = hwt_graph_create();
  x = tensor(g, "x", 4, HWT_TENSOR_INPUT), y = tensor(g, "y", 4, HWT_TENSOR_OUTPUT);
  z = tensor(g, "z", 4, HWT_TENSOR_OUTPUT), w = tensor(g, "w", 4, HWT_TENSOR_OUTPUT);
  f = op1(g, "f", 1, &x, y), h = op1(g, "h", 1, &x, z), k = op1(g, "k", 1, &x, w);
  CHECK(hwt_graph_op_set_work(g, f, 7e9, 0) == HWT_OK && hwt_graph_op_set_cost(g, f, 2.0) == 0,
        "cost over work");
  CHECK(hwt_graph_op_set_work(g, h, 7e9, 20e9) == HWT_OK, "work");
  double c = 0;
  CHECK(hwt_graph_op_cost(g, f, &c) == 1 && c == 2.0 && hwt_graph_op_cost(g, h, &c) == 0, "get");
  hwt_plan_options o;
  hwt_plan_options_init(&o);
  o.flops_per_s = 1e9;
  o.bytes_per_s = 10e9;
  o.default_cost = 3.0;
  char err[128];
  hwt_plan *p = hwt_plan_build(g, &o, err, sizeof err);
  CHECK(p != NULL, "%s", err);
  if (p) {
    const double *cost = hwt_plan_cost(p);
    /* f: explicit 2 s; h: max(7e9/1e9, 20e9/10e9) = 7 s (compute-bound); k: default 3. */
    CHECK(cost[f] == 2.0 && cost[h] == 7.0 && cost[k] == 3.0, "costs %g %g %g", cost[f],
          cost[h], cost[k]);
  }
  hwt_plan_destroy(p);
  hwt_graph_destroy(g);
}

/* Exact reuse on hand-made graphs where the right answer is known. */
static void test_known_reuse(void) {
  /* Chain x -> t1 -> ... -> t8 (1000 floats each, 4032 aligned bytes... 4000
   * -> 4032): reuse keeps two buffers alive whatever the policy. */
  hwt_graph *g = hwt_graph_create();
  int prev = tensor(g, "x", 1000, HWT_TENSOR_INPUT);
  for (int i = 1; i <= 8; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    int t = tensor(g, name, 1000, i == 8 ? HWT_TENSOR_OUTPUT : HWT_TENSOR_ACTIVATION);
    snprintf(name, sizeof name, "op%d", i);
    op1(g, name, 1, &prev, t);
    prev = t;
  }
  for (int policy = 0; policy < 3; policy++)
    for (int exact = 0; exact < 2; exact++) {
      hwt_plan_options o;
      hwt_plan_options_init(&o);
      o.reuse = policy;
      o.reach_max_ops = exact ? 0 : 1;
      char err[128];
      hwt_plan *p = hwt_plan_build(g, &o, err, sizeof err);
      CHECK(p != NULL, "%s", err);
      if (!p) continue;
      int64_t want = policy == HWT_REUSE_NONE ? 8 * 4032 : 2 * 4032;
      CHECK(hwt_plan_arena_bytes(p) == want, "chain policy %d exact %d: %" PRId64 " bytes",
            policy, exact, hwt_plan_arena_bytes(p));
      CHECK(hwt_plan_arena_bytes_no_reuse(p) == 8 * 4032 && hwt_plan_peak_live_bytes(p) == 2 * 4032,
            "chain sizes");
      CHECK(hwt_plan_reach_exact(p) == (policy != HWT_REUSE_PARALLEL_SAFE || exact), "exact flag");
      CHECK(hwt_plan_tensor_offset(p, 0) == -1 && hwt_plan_tensor_offset(p, 99) == HWT_EINVAL,
            "offsets of inputs and bad ids");
      hwt_plan_destroy(p);
    }
  hwt_graph_destroy(g);

  /* Two independent branches p1 -> q1 and p2 -> q2 joined by j. Kahn by id
   * runs p1, q1, p2, q2, j: SEQUENTIAL hands t1's bytes to t2, which a
   * parallel schedule running p2 beside q1 would corrupt: PARALLEL_SAFE
   * must not. */
  g = hwt_graph_create();
  int x = tensor(g, "x", 16, HWT_TENSOR_INPUT);
  int t1 = tensor(g, "t1", 16, HWT_TENSOR_ACTIVATION), u1 = tensor(g, "u1", 16, HWT_TENSOR_ACTIVATION);
  int t2 = tensor(g, "t2", 16, HWT_TENSOR_ACTIVATION), u2 = tensor(g, "u2", 16, HWT_TENSOR_ACTIVATION);
  int out = tensor(g, "out", 16, HWT_TENSOR_OUTPUT);
  op1(g, "p1", 1, &x, t1);
  op1(g, "q1", 1, &t1, u1);
  op1(g, "p2", 1, &x, t2);
  op1(g, "q2", 1, &t2, u2);
  int both[2] = {u1, u2};
  op1(g, "j", 2, both, out);
  hwt_plan_options o;
  hwt_plan_options_init(&o);
  char err[128];
  o.reuse = HWT_REUSE_SEQUENTIAL;
  hwt_plan *ps = hwt_plan_build(g, &o, err, sizeof err);
  o.reuse = HWT_REUSE_PARALLEL_SAFE;
  hwt_plan *pp = hwt_plan_build(g, &o, err, sizeof err);
  CHECK(ps && pp, "%s", err);
  if (ps && pp) {
    const int *order = hwt_plan_order(ps);
    CHECK(order[0] == 0 && order[1] == 1 && order[2] == 2 && order[3] == 3 && order[4] == 4,
          "Kahn picks the lowest ready id");
    CHECK(hwt_plan_tensor_offset(ps, t2) == hwt_plan_tensor_offset(ps, t1), "sequential reuse");
    CHECK(hwt_plan_tensor_offset(pp, t2) != hwt_plan_tensor_offset(pp, t1) &&
          hwt_plan_tensor_offset(pp, t2) != hwt_plan_tensor_offset(pp, u1), "parallel-safe");
    /* out's producer j follows both branches: it may take t1's bytes. */
    CHECK(hwt_plan_arena_bytes(pp) < hwt_plan_arena_bytes_no_reuse(pp), "some reuse");
    char why[256];
    CHECK(hwt_plan_check_aliasing(pp, g, why, sizeof why) == HWT_OK, "%s", why);
    /* The brute force must catch the sequential plan's sharing once it is
     * judged as parallel-safe: forge that by corrupting the safe plan. */
    int64_t *off = (int64_t *)hwt_plan_offsets(pp);
    int64_t saved = off[t2];
    off[t2] = off[t1];
    CHECK(hwt_plan_check_aliasing(pp, g, why, sizeof why) == HWT_EINVAL &&
          strstr(why, "\"t1\" and \"t2\" share bytes"), "corruption undetected: %s", why);
    off[t2] = 13;
    CHECK(hwt_plan_check_aliasing(pp, g, why, sizeof why) == HWT_EINVAL &&
          strstr(why, "misaligned"), "misalignment undetected: %s", why);
    off[t2] = saved;
  }
  hwt_plan_destroy(ps);
  hwt_plan_destroy(pp);
  hwt_graph_destroy(g);
}

/* ---- random DAGs --------------------------------------------------------- */

#define MAX_OPS 48
#define MAX_T 192

typedef struct {
  int n_ops, n_t;
  int op_n_in[MAX_OPS], op_in[MAX_OPS][6], op_n_out[MAX_OPS], op_out[MAX_OPS][3];
  int producer[MAX_T];
  int64_t bytes[MAX_T];
  int kind[MAX_T];
  uint64_t desc[MAX_OPS]; /* strict descendants, as op-id bitmasks */
} rdag;

/* Generates the DAG in a hidden logical order, then numbers ops and tensors
 * by random permutations so that ids say nothing about the order. */
static hwt_graph *random_graph(rdag *r) {
  int n = 1 + (int)rnd(MAX_OPS);
  int n_src = 1 + (int)rnd(4);
  int op_id[MAX_OPS], t_id[MAX_T];
  int pool[MAX_T], n_pool = 0; /* logical tensors available as inputs */
  int lt_kind[MAX_T], lt_prod[MAX_T];
  int64_t lt_elems[MAX_T];
  int lop_n_in[MAX_OPS], lop_in[MAX_OPS][6], lop_n_out[MAX_OPS], lop_out[MAX_OPS][3];
  int nt = 0;
  for (int i = 0; i < n_src; i++) {
    lt_kind[nt] = rnd(2) ? HWT_TENSOR_INPUT : HWT_TENSOR_PARAM;
    lt_prod[nt] = -1;
    lt_elems[nt] = 1 + rnd(300);
    pool[n_pool++] = nt++;
  }
  for (int v = 0; v < n; v++) {
    /* Mostly recent tensors (chains, like layers), sometimes any (skips). */
    int k = (int)rnd(4) + (rnd(8) == 0 ? 2 : 0);
    lop_n_in[v] = 0;
    for (int i = 0; i < k; i++) {
      int pick = rnd(3) ? n_pool - 1 - (int)rnd(n_pool < 4 ? n_pool : 4) : (int)rnd(n_pool);
      lop_in[v][lop_n_in[v]++] = pool[pick]; /* duplicates allowed: read twice */
    }
    lop_n_out[v] = 1 + (rnd(5) == 0) + (rnd(9) == 0);
    for (int j = 0; j < lop_n_out[v]; j++) {
      lt_kind[nt] = rnd(6) == 0 ? HWT_TENSOR_OUTPUT : HWT_TENSOR_ACTIVATION;
      lt_prod[nt] = v;
      /* Mixed sizes: tiny ones share cache lines if alignment were broken. */
      lt_elems[nt] = rnd(4) == 0 ? 1 + rnd(8) : 1 + rnd(2000);
      lop_out[v][j] = nt;
      pool[n_pool++] = nt++;
    }
  }
  /* Random id permutations. */
  for (int i = 0; i < n; i++) op_id[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)rnd((uint32_t)i + 1), s = op_id[i];
    op_id[i] = op_id[j];
    op_id[j] = s;
  }
  for (int i = 0; i < nt; i++) t_id[i] = i;
  for (int i = nt - 1; i > 0; i--) {
    int j = (int)rnd((uint32_t)i + 1), s = t_id[i];
    t_id[i] = t_id[j];
    t_id[j] = s;
  }
  memset(r, 0, sizeof *r);
  r->n_ops = n;
  r->n_t = nt;
  int lt_of[MAX_T], lop_of[MAX_OPS];
  for (int i = 0; i < nt; i++) lt_of[t_id[i]] = i;
  for (int i = 0; i < n; i++) lop_of[op_id[i]] = i;
  hwt_graph *g = hwt_graph_create();
  for (int id = 0; id < nt; id++) {
    int l = lt_of[id];
    char name[16];
    snprintf(name, sizeof name, "t%d", id);
    int got = hwt_graph_add_tensor(g, name, 1, &lt_elems[l], lt_kind[l]);
    CHECK(got == id, "tensor id %d", got);
    r->kind[id] = lt_kind[l];
    r->bytes[id] = lt_elems[l] * 4;
    r->producer[id] = lt_prod[l] >= 0 ? op_id[lt_prod[l]] : -1;
  }
  for (int id = 0; id < n; id++) {
    int l = lop_of[id], in[6], out[3];
    for (int i = 0; i < lop_n_in[l]; i++) in[i] = t_id[lop_in[l][i]];
    for (int j = 0; j < lop_n_out[l]; j++) out[j] = t_id[lop_out[l][j]];
    char name[16];
    snprintf(name, sizeof name, "op%d", id);
    int got = hwt_graph_add_op(g, name, "x", lop_n_in[l], in, lop_n_out[l], out);
    CHECK(got == id, "op id %d: %s", got, hwt_graph_error(g));
    if (rnd(2)) hwt_graph_op_set_cost(g, id, (double)(1 + rnd(100)) * 1e-6);
    r->op_n_in[id] = lop_n_in[l];
    r->op_n_out[id] = lop_n_out[l];
    memcpy(r->op_in[id], in, sizeof in);
    memcpy(r->op_out[id], out, sizeof out);
  }
  /* Transitive closure by fixpoint over direct edges. */
  for (int v = 0; v < n; v++)
    for (int i = 0; i < r->op_n_in[v]; i++) {
      int u = r->producer[r->op_in[v][i]];
      if (u >= 0) r->desc[u] |= (uint64_t)1 << v;
    }
  for (int changed = 1; changed;) {
    changed = 0;
    for (int u = 0; u < n; u++) {
      uint64_t d = r->desc[u];
      for (int v = 0; v < n; v++)
        if ((r->desc[u] >> v) & 1u) d |= r->desc[v];
      if (d != r->desc[u]) {
        r->desc[u] = d;
        changed = 1;
      }
    }
  }
  return g;
}

static int overlaps(int64_t a, int64_t na, int64_t b, int64_t nb) {
  return a < b + nb && b < a + na;
}

static int in_arena(const rdag *r, int t) {
  return r->kind[t] == HWT_TENSOR_ACTIVATION || r->kind[t] == HWT_TENSOR_OUTPUT;
}

/* The dependency arrays and levels against the DAG built here. */
static void check_structure(const rdag *r, const hwt_plan *p) {
  int n = r->n_ops;
  const int *order = hwt_plan_order(p), *pos = hwt_plan_position(p);
  const int *npred = hwt_plan_pred_count(p), *so = hwt_plan_succ_offsets(p), *s = hwt_plan_succ(p);
  const double *lvl = hwt_plan_level(p), *cost = hwt_plan_cost(p);
  uint64_t direct_pred[MAX_OPS] = {0}, direct_succ[MAX_OPS] = {0};
  for (int v = 0; v < n; v++)
    for (int i = 0; i < r->op_n_in[v]; i++) {
      int u = r->producer[r->op_in[v][i]];
      if (u >= 0) {
        direct_pred[v] |= (uint64_t)1 << u;
        direct_succ[u] |= (uint64_t)1 << v;
      }
    }
  int roots = 0;
  for (int v = 0; v < n; v++) {
    CHECK(order[pos[v]] == v, "position/order mismatch");
    CHECK(npred[v] == __builtin_popcountll(direct_pred[v]), "pred count of op%d", v);
    roots += npred[v] == 0;
    uint64_t seen = 0;
    double best = 0;
    for (int e = so[v]; e < so[v + 1]; e++) {
      CHECK(e == so[v] || s[e] > s[e - 1], "successors ascending");
      seen |= (uint64_t)1 << s[e];
      CHECK(pos[s[e]] > pos[v], "order not topological");
      CHECK(lvl[v] >= cost[v] + lvl[s[e]] - 1e-12, "level must decrease along edges");
      if (lvl[s[e]] > best) best = lvl[s[e]];
    }
    CHECK(seen == direct_succ[v], "successor list of op%d", v);
    CHECK(lvl[v] == cost[v] + best, "level is cost + max successor level");
  }
  CHECK(roots == hwt_plan_n_roots(p), "roots");
  /* Kahn with the lowest ready id: each step took the smallest op whose
   * predecessors were all done. */
  uint64_t done = 0;
  for (int i = 0; i < n; i++) {
    int v = order[i];
    for (int w = 0; w < v; w++)
      CHECK(((done >> w) & 1u) || (direct_pred[w] & ~done), "op%d was ready before op%d", w, v);
    done |= (uint64_t)1 << v;
  }
}

/* Whether t is finished before u starts under the policy, so that the two
 * may share bytes (last/readers as check_pairs computes them). */
static int done_before(const rdag *r, const int *first, const int *last, const uint64_t *readers,
                       int policy, int t, int u) {
  if (r->kind[t] == HWT_TENSOR_OUTPUT) return 0;
  if (policy == HWT_REUSE_SEQUENTIAL) return last[t] < first[u];
  if (policy != HWT_REUSE_PARALLEL_SAFE) return 0;
  /* every op touching t is an ancestor of u's producer */
  uint64_t touch = readers[t] ? readers[t] : (uint64_t)1 << r->producer[t];
  for (int c = 0; c < r->n_ops; c++)
    if (((touch >> c) & 1u) && !((r->desc[c] >> r->producer[u]) & 1u)) return 0;
  return 1;
}

/* Pairwise rule, written from the definitions. */
static void check_pairs(const rdag *r, const hwt_plan *p, int policy) {
  const int *pos = hwt_plan_position(p);
  const int64_t *off = hwt_plan_offsets(p);
  int first[MAX_T], last[MAX_T];
  uint64_t readers[MAX_T] = {0};
  for (int v = 0; v < r->n_ops; v++)
    for (int i = 0; i < r->op_n_in[v]; i++) readers[r->op_in[v][i]] |= (uint64_t)1 << v;
  for (int t = 0; t < r->n_t; t++) {
    if (!in_arena(r, t)) {
      CHECK(hwt_plan_tensor_offset(p, t) == -1, "source tensors are outside the arena");
      continue;
    }
    first[t] = last[t] = pos[r->producer[t]];
    for (int v = 0; v < r->n_ops; v++)
      if (((readers[t] >> v) & 1u) && pos[v] > last[t]) last[t] = pos[v];
    CHECK(hwt_plan_tensor_offset(p, t) == off[t], "offset accessors agree");
    CHECK(off[t] >= 0 && off[t] % 64 == 0 && off[t] + r->bytes[t] <= hwt_plan_arena_bytes(p),
          "placement");
  }
  for (int t = 0; t < r->n_t; t++)
    for (int u = 0; u < r->n_t; u++) {
      if (t == u || !in_arena(r, t) || !in_arena(r, u)) continue;
      if (!overlaps(off[t], r->bytes[t], off[u], r->bytes[u])) continue;
      /* Allowed only if t is finished before u starts, or the reverse. */
      CHECK(done_before(r, first, last, readers, policy, t, u) ||
                done_before(r, first, last, readers, policy, u, t),
            "policy %d: t%d and t%d share bytes but may be live together", policy, t, u);
    }
}

/* Op v ran over the ticks [start[v], end[v]]: tensor t is live over
 * [start(producer), max end(producer or reader)] (an output to the end of
 * time), and tensors live at a common tick must not share bytes. */
static void check_live_apart(const rdag *r, const hwt_plan *p, const int *start, const int *end,
                             const char *when) {
  const int64_t *off = hwt_plan_offsets(p);
  int64_t lo[MAX_T], hi[MAX_T];
  for (int t = 0; t < r->n_t; t++) {
    if (!in_arena(r, t)) continue;
    lo[t] = start[r->producer[t]];
    hi[t] = r->kind[t] == HWT_TENSOR_OUTPUT ? INT64_MAX : end[r->producer[t]];
  }
  for (int v = 0; v < r->n_ops; v++)
    for (int i = 0; i < r->op_n_in[v]; i++) {
      int t = r->op_in[v][i];
      if (in_arena(r, t) && end[v] > hi[t]) hi[t] = end[v];
    }
  for (int t = 0; t < r->n_t; t++)
    for (int u = t + 1; u < r->n_t; u++) {
      if (!in_arena(r, t) || !in_arena(r, u)) continue;
      if (lo[t] > hi[u] || lo[u] > hi[t]) continue;
      CHECK(!overlaps(off[t], r->bytes[t], off[u], r->bytes[u]),
            "%s: t%d and t%d live together in shared bytes", when, t, u);
    }
}

/* A random list schedule on `execs` executors with random op durations; an
 * op may start only 1 tick after its last producer ends, while independent
 * ops may start at the very tick another ends. Tensor t is live over the
 * closed interval [start(producer), max end(reader or producer)]; tensors
 * live at a common tick must not share bytes. */
static void simulate(const rdag *r, const hwt_plan *p, int execs) {
  int n = r->n_ops, start[MAX_OPS], end[MAX_OPS], wait[MAX_OPS], ready_at[MAX_OPS];
  uint64_t succ[MAX_OPS] = {0};
  for (int v = 0; v < n; v++) {
    uint64_t preds = 0;
    for (int i = 0; i < r->op_n_in[v]; i++) {
      int u = r->producer[r->op_in[v][i]];
      if (u >= 0) preds |= (uint64_t)1 << u;
    }
    wait[v] = __builtin_popcountll(preds);
    for (int u = 0; u < n; u++)
      if ((preds >> u) & 1u) succ[u] |= (uint64_t)1 << v;
    ready_at[v] = 0;
    start[v] = -1;
  }
  int free_at[8] = {0}, done = 0;
  while (done < n) {
    /* The executor that frees up first takes a random op among those ready
     * by then (or the earliest-ready one). */
    int e = 0;
    for (int i = 1; i < execs; i++)
      if (free_at[i] < free_at[e]) e = i;
    int cand[MAX_OPS], nc = 0, soonest = -1;
    for (int v = 0; v < n; v++) {
      if (start[v] >= 0 || wait[v] > 0) continue;
      if (ready_at[v] <= free_at[e]) cand[nc++] = v;
      else if (soonest < 0 || ready_at[v] < ready_at[soonest]) soonest = v;
    }
    int v;
    if (nc) v = cand[rnd((uint32_t)nc)];
    else if (soonest >= 0) v = soonest;
    else {
      CHECK(0, "simulation found no op to start"); /* impossible in a DAG */
      return;
    }
    start[v] = free_at[e] > ready_at[v] ? free_at[e] : ready_at[v];
    end[v] = start[v] + 1 + (int)rnd(6);
    free_at[e] = end[v];
    done++;
    for (int w = 0; w < n; w++)
      if ((succ[v] >> w) & 1u) {
        wait[w]--;
        if (end[v] + 1 > ready_at[w]) ready_at[w] = end[v] + 1;
      }
  }
  char when[48];
  snprintf(when, sizeof when, "schedule on %d executors", execs);
  check_live_apart(r, p, start, end, when);
}

/* The sequential policy under the one schedule it promises: plan order,
 * each op a single tick. */
static void simulate_in_order(const rdag *r, const hwt_plan *p) {
  const int *pos = hwt_plan_position(p);
  check_live_apart(r, p, pos, pos, "in order");
}

static void test_random_dags(int count) {
  int64_t sum[4] = {0};
  int fallback_plans = 0;
  int before = failures;
  for (int iter = 0; iter < count && failures == before; iter++) {
    rdag r;
    hwt_graph *g = random_graph(&r);
    char err[256];
    CHECK(hwt_graph_validate(g, err, sizeof err) == HWT_OK, "random graph invalid: %s", err);
    int64_t arena[4] = {0}, peak = 0;
    for (int mode = 0; mode < 4; mode++) {
      /* mode 3: PARALLEL_SAFE with no bit budget: sync points only. */
      int policy = mode == 3 ? HWT_REUSE_PARALLEL_SAFE : mode;
      hwt_plan_options o;
      hwt_plan_options_init(&o);
      o.reuse = policy;
      o.reach_max_ops = mode == 3 ? 1 : 0;
      hwt_plan *p = hwt_plan_build(g, &o, err, sizeof err);
      CHECK(p != NULL, "plan: %s", err);
      if (!p) continue;
      CHECK(hwt_plan_check_aliasing(p, g, err, sizeof err) == HWT_OK, "policy %d: %s", policy,
            err);
      check_structure(&r, p);
      check_pairs(&r, p, policy);
      if (policy == HWT_REUSE_SEQUENTIAL) simulate_in_order(&r, p);
      else
        for (int s = 0; s < 4; s++) simulate(&r, p, 1 + s % 4);
      arena[mode] = hwt_plan_arena_bytes(p);
      peak = hwt_plan_peak_live_bytes(p);
      fallback_plans += mode == 3 && r.n_ops > 1 && !hwt_plan_reach_exact(p);
      CHECK(arena[mode] >= peak, "arena below the live peak");
      hwt_plan_destroy(p);
    }
    CHECK(arena[1] <= arena[0] && arena[2] <= arena[0] && arena[3] <= arena[0],
          "reuse grew the arena");
    for (int m = 0; m < 4; m++) sum[m] += arena[m];
    hwt_graph_destroy(g);
  }
  CHECK(fallback_plans > 0, "the fallback rule was never exercised");
  /* Reuse must actually pay on random graphs (a planner that never reuses
   * would pass every safety check above). */
  CHECK(sum[1] < sum[0] * 7 / 10 && sum[2] < sum[0] * 9 / 10, "reuse too weak: %" PRId64
        " %" PRId64 " %" PRId64, sum[0], sum[1], sum[2]);
  printf("random DAGs: %d; arena bytes none %" PRId64 ", sequential %" PRId64
         ", parallel-safe %" PRId64 ", parallel-safe fallback %" PRId64 "\n",
         count, sum[0], sum[1], sum[2], sum[3]);
}

/* Graphs past the exact-reachability limit: the windowed bitsets and the
 * sync-point rule are checked by the library's brute force (the bitmask
 * oracle above stops at 64 ops). Chains of layers with side branches, like
 * unrolled RNNs, give both rules something to reuse. */
static hwt_graph *big_random_graph(int n) {
  hwt_graph *g = hwt_graph_create();
  int64_t elems = 64;
  int x = hwt_graph_add_tensor(g, "x", 1, &elems, HWT_TENSOR_INPUT);
  int *out = malloc(sizeof(int) * (size_t)n);
  for (int v = 0; v < n; v++) {
    char name[24];
    snprintf(name, sizeof name, "t%d", v);
    elems = 1 + rnd(3000);
    int kind = rnd(40) == 0 ? HWT_TENSOR_OUTPUT : HWT_TENSOR_ACTIVATION;
    out[v] = hwt_graph_add_tensor(g, name, 1, &elems, kind);
    int in[3], k = 0;
    if (v == 0) in[k++] = x;
    else {
      in[k++] = out[v - 1 - (int)rnd(v < 3 ? (uint32_t)v : 3u)];
      if (rnd(4) == 0) in[k++] = out[rnd((uint32_t)v)];
      if (rnd(8) == 0) in[k++] = x;
    }
    snprintf(name, sizeof name, "op%d", v);
    CHECK(hwt_graph_add_op(g, name, "x", k, in, 1, &out[v]) == v, "%s", hwt_graph_error(g));
  }
  free(out);
  return g;
}

static void test_big_dags(int count) {
  int windowed = 0, sync_only = 0;
  int64_t sum[3] = {0};
  for (int iter = 0; iter < count; iter++) {
    hwt_graph *g = big_random_graph(101 + (int)rnd(300));
    int n = hwt_graph_n_ops(g);
    for (int mode = 0; mode < 3; mode++) {
      hwt_plan_options o;
      hwt_plan_options_init(&o);
      o.reach_max_ops = mode == 0 ? 0 : mode == 1 ? 100 : 20;
      char err[256];
      hwt_plan *p = hwt_plan_build(g, &o, err, sizeof err);
      CHECK(p != NULL, "%s", err);
      if (!p) continue;
      CHECK(hwt_plan_check_aliasing(p, g, err, sizeof err) == HWT_OK, "mode %d, %d ops: %s", mode,
            n, err);
      CHECK(hwt_plan_reach_exact(p) == (mode == 0), "exact only within the limit");
      /* limit 100: 100 * 2 words spread over n ops: one word (a 64-op
       * window) per op below 200 ops, none above. */
      windowed += mode == 1 && n < 200;
      sync_only += mode == 2;
      sum[mode] += hwt_plan_arena_bytes(p);
      hwt_plan_destroy(p);
    }
    hwt_graph_destroy(g);
  }
  CHECK(windowed > 0 && sync_only > 0, "fallbacks not exercised");
  CHECK(sum[0] <= sum[1] && sum[0] < sum[2], "exact reachability reuses most");
  printf("big DAGs: %d; arena bytes exact %" PRId64 ", window/sync %" PRId64 ", sync only %" PRId64
         "\n", count, sum[0], sum[1], sum[2]);
}

/* Views (plan/views.c): x -> a=relu -> b=reshape -> c=reshape, f=relu(x),
 * g=add(c, f). With reuse, a, b and c are one buffer that stays live until g
 * reads c, so f (born after a's last direct read) must not take it. */
static void test_views(void) {
  hwt_graph *g = hwt_graph_create();
  int x = tensor(g, "x", 1000, HWT_TENSOR_INPUT);
  int a = tensor(g, "a", 1000, HWT_TENSOR_ACTIVATION);
  int b = tensor(g, "b", 1000, HWT_TENSOR_ACTIVATION);
  int c = tensor(g, "c", 1000, HWT_TENSOR_ACTIVATION);
  int f = tensor(g, "f", 1000, HWT_TENSOR_ACTIVATION);
  int y = tensor(g, "y", 1000, HWT_TENSOR_OUTPUT);
  int cf[2] = {c, f};
  op1(g, "relu_a", 1, &x, a);
  CHECK(hwt_graph_add_op(g, "view_b", "reshape", 1, &a, 1, &b) >= 0, "%s", hwt_graph_error(g));
  CHECK(hwt_graph_add_op(g, "view_c", "flatten", 1, &b, 1, &c) >= 0, "%s", hwt_graph_error(g));
  op1(g, "relu_f", 1, &x, f);
  CHECK(hwt_graph_add_op(g, "add", "add", 2, cf, 1, &y) >= 0, "%s", hwt_graph_error(g));
  for (int policy = 0; policy < 3; policy++) {
    hwt_plan_options o;
    hwt_plan_options_init(&o);
    o.reuse = policy;
    char err[256] = "";
    hwt_plan *p = hwt_plan_build(g, &o, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (!p) continue;
    CHECK(hwt_plan_check_aliasing(p, g, err, sizeof err) == HWT_OK, "views policy %d: %s",
          policy, err);
    const int64_t *off = hwt_plan_offsets(p);
    if (policy == HWT_REUSE_NONE) {
      CHECK(off[a] != off[b] && off[b] != off[c] && off[a] != off[c], "NONE: own bytes each");
      CHECK(hwt_plan_arena_bytes(p) == 5 * 4032, "NONE arena %" PRId64, hwt_plan_arena_bytes(p));
    } else {
      CHECK(off[a] == off[b] && off[b] == off[c], "policy %d: the chain is one buffer", policy);
      CHECK(off[f] != off[a] && off[y] != off[a] && off[y] != off[f], "policy %d: f, y apart",
            policy);
      /* the chain, f and y: all three live at the add */
      CHECK(hwt_plan_arena_bytes(p) == 3 * 4032 && hwt_plan_peak_live_bytes(p) == 3 * 4032,
            "policy %d arena %" PRId64, policy, hwt_plan_arena_bytes(p));
    }
    hwt_plan_destroy(p);
  }
  hwt_graph_destroy(g);
}

int main(int argc, char **argv) {
  int count = argc > 1 ? atoi(argv[1]) : 3000; /* ~4 s under ASan+UBSan, ~1 s at -O2 */
  test_builder_errors();
  test_validation();
  test_cycles();
  test_attrs_and_costs();
  test_known_reuse();
  test_views();
  test_random_dags(count);
  test_big_dags(count / 30);
  return check_verdict("test_plan: ok\n");
}
