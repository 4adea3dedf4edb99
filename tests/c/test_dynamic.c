/* The dynamic executor (hwtune/dynamic.h) on 1,000 random input graphs
 * (trees, DAGs and chains of varied arity and depth): under every policy,
 * chunk size and executors x threads, each vertex is evaluated exactly once
 * and after all of its children, and every state and readout equals a
 * per-vertex reference that performs the same float operations in the same
 * order (so the comparison is exact). Also: the sample reader's errors.
 *
 * F (width 4): x = the vertex's feature row
 *   x2 = x + x                      (input only: hoisted)
 *   hs = sum of the children's h    (CHILD_SUM)
 *   h  = x2 + hs                    state 0
 *   g1 = child 1's g                (CHILD, zeros past the last child)
 *   g  = h + g1                     state 1
 *   e  = each child's h             (CHILD_EACH)
 *   xe = x repeated per child link  (TO_EDGES)
 *   m  = e * xe                     (per link)
 *   ms = sum of m over the links    (SUM_EDGES)
 *   u  = ms + x                     state 2
 * readout 0 (every vertex): r = h + g; readout 1 (roots): q = u * u. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/dynamic.h"
#include "hwtune/graph.h"
#include "check.h"

#define W 4
#define N_SAMPLES 1000

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static unsigned rnd(unsigned n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state % n);
}

/* ---- text building ----------------------------------------------------- */
typedef struct {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void put(buf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    b->cap = b->cap * 2 + 4096;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
}

/* Sample i: a chain, a random tree or a random DAG; children lists use
 * "children", "edges" or "chain" so all three forms are read. */
static void make_sample(buf *b, int i) {
  int kind = i % 3, n;
  if (kind == 0)
    n = 1 + (int)rnd(i % 50 == 0 ? 300 : 40); /* a few long chains: depth */
  else
    n = 1 + (int)rnd(60);
  /* children of v are chosen among vertices "below" it: a random rank */
  int *rank = malloc((size_t)n * sizeof *rank);
  for (int v = 0; v < n; v++) rank[v] = v;
  for (int v = n - 1; v > 0; v--) {
    int j = (int)rnd((unsigned)v + 1), t = rank[v];
    rank[v] = rank[j];
    rank[j] = t;
  }
  /* rank[k] = vertex at topological position k (children have lower k) */
  int max_arity = 1 + (int)rnd(6);
  put(b, "{\"features\": [");
  for (int v = 0; v < n; v++)
    put(b, "%s[%d, %d, %d, %d]", v ? ", " : "", 1 + (int)rnd(3), 1, 1 + (int)rnd(2), 2);
  put(b, "]");
  if (kind == 0) {
    put(b, ", \"chain\": true}\n");
  } else if (kind == 1) {
    /* tree: each vertex at position k > 0 gets a parent among positions > k
     * ... built top-down: position k's parent is a random later position */
    int *parent = malloc((size_t)n * sizeof *parent), *deg = calloc((size_t)n, sizeof *deg);
    for (int k = 0; k < n - 1; k++) {
      int p;
      int tries = 0;
      do {
        p = k + 1 + (int)rnd((unsigned)(n - k - 1));
      } while (deg[p] >= max_arity && ++tries < 8);
      parent[k] = p;
      deg[p]++;
    }
    put(b, ", \"edges\": [");
    for (int k = 0; k < n - 1; k++) put(b, "%s[%d, %d]", k ? ", " : "", rank[parent[k]], rank[k]);
    put(b, "], \"id\": \"tree-%d\", \"label\": {\"x\": [1, 2]}}\n", i);
    free(parent);
    free(deg);
  } else {
    put(b, ", \"children\": [");
    for (int v = 0; v < n; v++) {
      int k = 0;
      while (rank[k] != v) k++;
      int deg = k == 0 ? 0 : (int)rnd((unsigned)(max_arity < k ? max_arity : k) + 1);
      put(b, "%s[", v ? ", " : "");
      for (int c = 0; c < deg; c++) put(b, "%s%d", c ? ", " : "", rank[rnd((unsigned)k)]);
      put(b, "]");
    }
    put(b, "]}\n");
  }
  free(rank);
}

/* ---- F ------------------------------------------------------------------ */
enum { T_X, T_X2, T_HS, T_H, T_G1, T_G, T_E, T_XE, T_M, T_MS, T_U, T_SH, T_SG, T_R, T_SU, T_Q, NT };

typedef struct {
  hwt_graph *g;
  hwt_dyn_role roles[NT];
  int update[3];
  int at[2], ro_off[3], ro_out[2];
} fn_t;

static void build_fn(fn_t *f) {
  static const char *names[NT] = {"x", "x2", "hs", "h", "g1", "g", "e", "xe", "m", "ms",
                                  "u", "sh", "sg", "r", "su", "q"};
  f->g = hwt_graph_create();
  int64_t shape[2] = {1, W};
  for (int t = 0; t < NT; t++) {
    int input = t == T_X || t == T_HS || t == T_G1 || t == T_E || t == T_XE || t == T_MS ||
                t == T_SH || t == T_SG || t == T_SU;
    hwt_graph_add_tensor(f->g, names[t], 2, shape, input ? HWT_TENSOR_INPUT : HWT_TENSOR_ACTIVATION);
  }
  struct {
    const char *name, *type;
    int a, b, out;
  } ops[] = {{"x2", "add", T_X, T_X, T_X2},  {"h", "add", T_X2, T_HS, T_H},
             {"g", "add", T_H, T_G1, T_G},   {"m", "mul", T_E, T_XE, T_M},
             {"u", "add", T_MS, T_X, T_U},   {"r", "add", T_SH, T_SG, T_R},
             {"q", "mul", T_SU, T_SU, T_Q}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int in[2] = {ops[i].a, ops[i].b};
    hwt_graph_add_op(f->g, ops[i].name, ops[i].type, 2, in, 1, &ops[i].out);
  }
  for (int t = 0; t < NT; t++) f->roles[t] = (hwt_dyn_role){HWT_DYN_OP, 0, 0};
  f->roles[T_X] = (hwt_dyn_role){HWT_DYN_VERTEX_IN, 0, 0};
  f->roles[T_HS] = (hwt_dyn_role){HWT_DYN_CHILD_SUM, 0, 0};
  f->roles[T_G1] = (hwt_dyn_role){HWT_DYN_CHILD, 1, 1};
  f->roles[T_E] = (hwt_dyn_role){HWT_DYN_CHILD_EACH, 0, 0};
  f->roles[T_XE] = (hwt_dyn_role){HWT_DYN_TO_EDGES, T_X, 0};
  f->roles[T_MS] = (hwt_dyn_role){HWT_DYN_SUM_EDGES, T_M, 0};
  f->roles[T_SH] = (hwt_dyn_role){HWT_DYN_STATE, 0, 0};
  f->roles[T_SG] = (hwt_dyn_role){HWT_DYN_STATE, 0, 1};
  f->roles[T_SU] = (hwt_dyn_role){HWT_DYN_STATE, 1, 2};
  f->update[0] = T_H;
  f->update[1] = T_G;
  f->update[2] = T_U;
  f->at[0] = HWT_DYN_AT_EVERY;
  f->at[1] = HWT_DYN_AT_ROOT;
  f->ro_off[0] = 0;
  f->ro_off[1] = 1;
  f->ro_off[2] = 2;
  f->ro_out[0] = T_R;
  f->ro_out[1] = T_Q;
}

static hwt_dyn_fn as_fn(const fn_t *f) {
  hwt_dyn_fn fn = {0};
  fn.g = f->g;
  fn.roles = f->roles;
  fn.n_states = 3;
  fn.state_update = f->update;
  fn.embedding = -1;
  fn.n_readouts = 2;
  fn.readout_at = f->at;
  fn.readout_offsets = f->ro_off;
  fn.readout_outputs = f->ro_out;
  return fn;
}

/* ---- the reference: vertex by vertex, same float operations -------------- */
typedef struct {
  float *h, *g, *u, *r, *q;
  int64_t n_roots;
} ref_t;

static void reference(const hwt_samples *s, ref_t *ref) {
  int64_t nv = hwt_samples_n_vertices(s), count = hwt_samples_count(s);
  const int64_t *vo = hwt_samples_vertex_offsets(s), *co = hwt_samples_child_offsets(s);
  const int32_t *ch = hwt_samples_children(s);
  const float *x = hwt_samples_features(s);
  ref->h = calloc((size_t)nv * W, sizeof(float));
  ref->g = calloc((size_t)nv * W, sizeof(float));
  ref->u = calloc((size_t)nv * W, sizeof(float));
  ref->r = calloc((size_t)nv * W, sizeof(float));
  ref->q = calloc((size_t)nv * W, sizeof(float));
  unsigned char *done = calloc((size_t)nv, 1), *is_child = calloc((size_t)nv, 1);
  ref->n_roots = 0;
  for (int64_t i = 0; i < count; i++) {
    /* repeated sweeps: a vertex is computed once its children are (tiny samples) */
    int64_t left = vo[i + 1] - vo[i];
    while (left > 0)
      for (int64_t v = vo[i]; v < vo[i + 1]; v++) {
        if (done[v]) continue;
        int ready = 1;
        for (int64_t k = co[v]; k < co[v + 1]; k++) ready &= done[vo[i] + ch[k]];
        if (!ready) continue;
        for (int c = 0; c < W; c++) {
          float xv = x[v * W + c], x2 = xv + xv, hs = 0.0f, ms = 0.0f, g1 = 0.0f;
          for (int64_t k = co[v]; k < co[v + 1]; k++) {
            int64_t cv = vo[i] + ch[k];
            hs = k == co[v] ? ref->h[cv * W + c] : hs + ref->h[cv * W + c];
            ms = ms + ref->h[cv * W + c] * xv;
          }
          if (co[v + 1] - co[v] >= 2) g1 = ref->g[(vo[i] + ch[co[v] + 1]) * W + c];
          ref->h[v * W + c] = x2 + hs;
          ref->g[v * W + c] = ref->h[v * W + c] + g1;
          ref->u[v * W + c] = ms + xv;
          ref->r[v * W + c] = ref->h[v * W + c] + ref->g[v * W + c];
        }
        done[v] = 1;
        left--;
      }
    for (int64_t v = vo[i]; v < vo[i + 1]; v++)
      for (int64_t k = co[v]; k < co[v + 1]; k++) is_child[vo[i] + ch[k]] = 1;
    for (int64_t v = vo[i]; v < vo[i + 1]; v++)
      if (!is_child[v]) {
        for (int c = 0; c < W; c++)
          ref->q[ref->n_roots * W + c] = ref->u[v * W + c] * ref->u[v * W + c];
        ref->n_roots++;
      }
  }
  free(done);
  free(is_child);
}

static int same(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])))) return 0;
  return 1;
}

static void run_config(const fn_t *f, const hwt_samples *s, const ref_t *ref, int policy,
                       int batch, int chunk, int executors, int threads) {
  hwt_dyn_fn fn = as_fn(f);
  hwt_dyn_config cfg;
  hwt_dyn_config_init(&cfg);
  cfg.policy = policy;
  cfg.batch = batch;
  cfg.chunk = chunk;
  cfg.executors = executors;
  cfg.threads_per_executor = threads;
  cfg.pin = 0;
  hwt_dyn *d = NULL;
  char err[256] = "";
  int st = hwt_dyn_create(&fn, &cfg, &d, err, sizeof err);
  CHECK(st == HWT_OK, "create: %s", err);
  if (st) return;
  hwt_dyn_keep_states(d, 1);
  hwt_dyn_record(d, 1);
  st = hwt_dyn_prepare(d, s);
  CHECK(st == HWT_OK, "prepare: %s", hwt_dyn_error(d));
  for (int rep = 0; rep < 2 && st == HWT_OK; rep++) { /* a second run reuses everything */
    st = hwt_dyn_run(d);
    CHECK(st == HWT_OK, "run: %s", hwt_dyn_error(d));
    int64_t nv = hwt_samples_n_vertices(s);
    const int32_t *cnt = hwt_dyn_eval_count(d), *grp = hwt_dyn_eval_group(d);
    const int64_t *vo = hwt_samples_vertex_offsets(s), *co = hwt_samples_child_offsets(s);
    const int32_t *ch = hwt_samples_children(s);
    int64_t bad_count = 0, bad_order = 0;
    for (int64_t i = 0; i < hwt_samples_count(s); i++)
      for (int64_t v = vo[i]; v < vo[i + 1]; v++) {
        bad_count += cnt[v] != 1;
        for (int64_t k = co[v]; k < co[v + 1]; k++) bad_order += grp[vo[i] + ch[k]] >= grp[v];
      }
    CHECK(bad_count == 0, "policy %d batch %d chunk %d %dx%d: %lld vertices not evaluated once",
          policy, batch, chunk, executors, threads, (long long)bad_count);
    CHECK(bad_order == 0, "policy %d batch %d chunk %d %dx%d: %lld links evaluated out of order",
          policy, batch, chunk, executors, threads, (long long)bad_order);
    CHECK(same(hwt_dyn_states(d, 0), ref->h, nv * W), "policy %d batch %d chunk %d: state h",
          policy, batch, chunk);
    CHECK(same(hwt_dyn_states(d, 1), ref->g, nv * W), "policy %d batch %d chunk %d: state g",
          policy, batch, chunk);
    CHECK(same(hwt_dyn_states(d, 2), ref->u, nv * W), "policy %d batch %d chunk %d: state u",
          policy, batch, chunk);
    CHECK(hwt_dyn_readout_rows(d, 0) == nv, "readout 0 rows");
    CHECK(same(hwt_dyn_readout(d, 0, 0), ref->r, nv * W), "policy %d batch %d chunk %d: "
          "readout r", policy, batch, chunk);
    CHECK(hwt_dyn_readout_rows(d, 1) == ref->n_roots, "readout 1 rows %lld vs %lld",
          (long long)hwt_dyn_readout_rows(d, 1), (long long)ref->n_roots);
    CHECK(same(hwt_dyn_readout(d, 1, 0), ref->q, ref->n_roots * W), "policy %d batch %d "
          "chunk %d: readout q", policy, batch, chunk);
  }
  int64_t groups = 0, rows = 0;
  hwt_dyn_groups(d, &groups, &rows);
  CHECK(rows == hwt_samples_n_vertices(s), "group rows %lld", (long long)rows);
  if (policy == HWT_DYN_SERIAL) CHECK(groups == rows, "serial: one vertex per group");
  hwt_dyn_destroy(d);
}

/* ---- the reader's errors -------------------------------------------------- */
static void expect_error(const char *text, int input, int width, int arity, const char *want) {
  hwt_samples_options o;
  hwt_samples_options_init(&o);
  o.input = input;
  o.feature_width = width;
  o.vocab = 10;
  o.arity = arity;
  hwt_samples *s = NULL;
  char err[256] = "";
  int st = hwt_samples_parse(text, strlen(text), &o, &s, err, sizeof err);
  CHECK(st != HWT_OK && s == NULL, "accepted: %s", text);
  CHECK(strstr(err, want) != NULL, "error for %.60s: got \"%s\", want \"%s\"", text, err, want);
  hwt_samples_destroy(s);
}

static void reader_errors(void) {
  const int F = HWT_DYN_INPUT_FEATURES, T = HWT_DYN_INPUT_TOKENS;
  expect_error("{\"n\": 2}\n{\"n\": 3, \"children\": [[1], [2], [0]]}\n", 0, 0, 0,
               "line 2: cycle through vertices 0 -> 1 -> 2 -> 0");
  expect_error("{\"n\": 1, \"children\": [[0]]}", 0, 0, 0, "line 1: cycle: vertex 0 lists itself");
  expect_error("\n\n{\"n\": 3, \"children\": [[], [7], []]}", 0, 0, 0,
               "line 3: vertex 1 lists child 7, but the sample has 3 vertices");
  expect_error("{\"n\": 4, \"children\": [[1, 2, 3], [], [], []]}", 0, 0, 2,
               "line 1: vertex 0 has 3 children; the vertex function takes at most 2");
  expect_error("{\"tokens\": []}", T, 0, 0, "line 1: empty sample");
  expect_error("{}", 0, 0, 0, "line 1: no vertices");
  expect_error("{\"features\": [[1, 2], [1, 2, 3]]}", F, 2, 0,
               "line 1: vertex 1: feature row longer than the vertex input's 2 values");
  expect_error("{\"features\": [[1, 2], [1]]}", F, 2, 0,
               "line 1: vertex 1: feature row of 1 values; the vertex input takes 2");
  expect_error("{\"tokens\": [1, 12]}", T, 0, 0, "line 1: vertex 1: token 12 is outside");
  expect_error("{\"tokens\": [1, 2], \"children\": [[1]]}", T, 0, 0,
               "\"tokens\" gives 2 vertices, \"children\" 1");
  expect_error("{\"tokens\": [1, 2]}", F, 3, 0, "no \"features\"");
  expect_error("{\"tokens\": [1,\n 2]}", T, 0, 0, "line 1, column 15: a token must be an integer");
  expect_error("{\"tokens\": [1, 2], \"colour\": 3}", T, 0, 0, "unknown key \"colour\"");
  expect_error("{\"n\": 10000000}", 0, 0, 0, "more than 1000000 vertices");
  expect_error("{\"n\": 2, \"edges\": [[0, 1], [1, 0]]}", 0, 0, 0, "cycle through vertices");
  expect_error("{\"n\": 2, \"edges\": [[5, 1]]}", 0, 0, 0, "edge 0 names parent 5");
  expect_error("   \n\n", 0, 0, 0, "no samples");
  /* a long line is refused at the element past the limit */
  buf b = {0};
  put(&b, "{\"tokens\": [");
  for (int i = 0; i < 1000010; i++) put(&b, "%s1", i ? "," : "");
  put(&b, "]}");
  expect_error(b.p, T, 0, 0, "more than 1000000 vertices, the limit per sample (max_vertices)");
  free(b.p);
}

int main(void) {
  reader_errors();
  buf text = {0};
  for (int i = 0; i < N_SAMPLES; i++) make_sample(&text, i);
  hwt_samples_options o;
  hwt_samples_options_init(&o);
  o.input = HWT_DYN_INPUT_FEATURES;
  o.feature_width = W;
  hwt_samples *s = NULL;
  char err[256] = "";
  int st = hwt_samples_parse(text.p, text.n, &o, &s, err, sizeof err);
  CHECK(st == HWT_OK, "parse: %s", err);
  if (st != HWT_OK) return 1;
  CHECK(hwt_samples_count(s) == N_SAMPLES, "count %lld", (long long)hwt_samples_count(s));
  fn_t f;
  build_fn(&f);
  ref_t ref;
  reference(s, &ref);
  static const struct {
    int batch, chunk, executors, threads;
  } cfgs[] = {{64, 256, 1, 1}, {7, 4, 1, 1}, {1, 1, 1, 1}, {128, 16, 2, 1}, {33, 8, 1, 2},
              {1000, 2048, 1, 2}};
  for (int p = HWT_DYN_BATCHED; p <= HWT_DYN_SERIAL; p++)
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
      if (p == HWT_DYN_SERIAL && cfgs[i].batch > 64) continue; /* slow, nothing new */
      run_config(&f, s, &ref, p, cfgs[i].batch, cfgs[i].chunk, cfgs[i].executors,
                 cfgs[i].threads);
    }
  hwt_samples_destroy(s);
  hwt_graph_destroy(f.g);
  free(text.p);
  free(ref.h);
  free(ref.g);
  free(ref.u);
  free(ref.r);
  free(ref.q);
  return check_verdict("test_dynamic: ok\n");
}
