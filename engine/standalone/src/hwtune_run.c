/* hwtune-run: time a graph stored in results.db without Python.
 *
 * `hwtune run` stores each graph's lowered form (graphs.lowered_json: shapes
 * inferred, attributes encoded as the Python lowering encodes them) and its
 * engine configs; this program rebuilds the same C graph through graph.h,
 * applies the stored config (or flags), and times hwt_engine_run. From
 * schema v4 a config may carry its own lowered graph (engine_configs.
 * lowered_json: the config's layout rewrites), which then replaces the
 * graph's; op names in its per-op maps (op_threads, op_priority, op_cost,
 * op_candidates) refer to the graph that runs.
 *
 * Values: params and inputs are drawn from this program's own generator
 * (splitmix64 seeded by the tensor name) with the model's init kind and
 * scale, so outputs do NOT match the Python reference's values; the work
 * done, and so the latency, is the same. Tensors whose init is "file" (an
 * imported model's real weights) are read from the weights file the
 * lowered graph names (weights.c). Every error is one line on stderr and
 * exit status 2. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwtune/abi.h"
#include "hwtune/bench.h"
#include "hwtune/config_check.h"
#include "hwtune/engine.h"
#include "hwtune/graph.h"
#include "hwtune/pool.h"
#include "json.h"
#include "records_file.h"
#include "rows.h"
#include "runner_checks.h"
#include "sqlite_dyn.h"
#include "weights.h"

/* Schema v4 added engine_configs.op_cost_json, op_candidates_json,
 * lowered_json (read only when present; the accepted range is in
 * runner_checks.h). */
#define CONFIG_V4 4
#define MAX_ITERATIONS 1000000

static const char *const USAGE =
    "usage: hwtune-run (--db PATH --graph HASH_PREFIX | --config RECORDS.jsonl [--graph "
    "HASH_PREFIX]) [--host KEY] [--iterations N] [--warmup N] [--executors K] [--threads T] "
    "[--scheduler NAME]";

/* The scheduler table's names (help and error texts). */
static const char *scheduler_names(void) {
  static char buf[512];
  return hwt_sched_list(buf, sizeof buf);
}

static void die(const char *fmt, ...) {
  va_list ap;
  char msg[1024];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One line, whatever the message carries (SQLite or JSON text). */
  for (char *c = msg; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  fprintf(stderr, "hwtune-run: error: %s\n", msg);
  exit(2);
}

typedef struct {
  const char *db, *graph, *host, *scheduler, *config;
  int iterations, warmup, executors, threads;
} options;

static int parse_int(const char *flag, const char *s, int lo, int hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    die("invalid %s %s: expected an integer in %d..%d", flag, s, lo, hi);
  return (int)v;
}

static options parse_args(int argc, char **argv) {
  options o = {NULL, NULL, NULL, NULL, NULL, 20, 3, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf("%s\n  NAME: %s\n", USAGE, scheduler_names());
      for (int k = 0; k < hwt_sched_count(); k++)
        printf("    %-14s %s\n", hwt_sched_at(k)->name, hwt_sched_at(k)->summary);
      exit(0);
    }
    if (i + 1 >= argc) die("%s needs a value (%s)", a, USAGE);
    const char *v = argv[++i];
    if (!strcmp(a, "--db")) o.db = v;
    else if (!strcmp(a, "--graph")) o.graph = v;
    else if (!strcmp(a, "--host")) o.host = v;
    else if (!strcmp(a, "--config")) o.config = v;
    else if (!strcmp(a, "--scheduler")) o.scheduler = v;
    else if (!strcmp(a, "--iterations")) o.iterations = parse_int(a, v, 1, MAX_ITERATIONS);
    else if (!strcmp(a, "--warmup")) o.warmup = parse_int(a, v, 0, MAX_ITERATIONS);
    else if (!strcmp(a, "--executors"))
      o.executors = parse_int(a, v, 1, HWT_CONFIG_MAX_EXECUTORS);
    else if (!strcmp(a, "--threads")) o.threads = parse_int(a, v, 1, HWT_CONFIG_MAX_THREADS);
    else die("unknown option %s (%s)", a, USAGE);
  }
  if (o.db && o.config) die("--db and --config are alternatives: give one (%s)", USAGE);
  if (o.config) {
    if (!o.graph) return o;
  } else if (!o.db || !o.graph) {
    die("--db and --graph are required, or --config (%s)", USAGE);
  }
  size_t n = strlen(o.graph);
  if (n == 0 || n > 64 || strspn(o.graph, "0123456789abcdef") != n)
    die("invalid --graph %s: expected 1..64 lowercase hex digits of a graph hash", o.graph);
  return o;
}

/* ---- results.db ------------------------------------------------------ */

typedef struct {
  hr_sqlite api;
  sqlite3 *db;
  const char *path;
  int version; /* PRAGMA user_version */
} store;

static sqlite3_stmt *prepare(store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (s->api.prepare_v2(s->db, sql, -1, &st, NULL) != HR_SQLITE_OK)
    die("%s: %s", s->path, s->api.errmsg(s->db));
  return st;
}

/* The next row (1), or 0 when done; dies on an SQLite error. */
static int step(store *s, sqlite3_stmt *st) {
  int rc = s->api.step(st);
  if (rc == HR_SQLITE_ROW) return 1;
  if (rc == HR_SQLITE_DONE) return 0;
  die("%s: %s", s->path, s->api.errmsg(s->db));
  return 0;
}

static char *column_dup(store *s, sqlite3_stmt *st, int col) {
  if (s->api.column_type(st, col) == HR_SQLITE_NULL) return NULL;
  const unsigned char *t = s->api.column_text(st, col);
  int n = s->api.column_bytes(st, col);
  char *c = malloc((size_t)n + 1);
  if (!c) die("out of memory");
  memcpy(c, t, (size_t)n);
  c[n] = '\0';
  return c;
}

static int pragma_int(store *s, const char *sql) {
  sqlite3_stmt *st = prepare(s, sql);
  int v = step(s, st) ? s->api.column_int(st, 0) : 0;
  s->api.finalize(st);
  return v;
}

/* As `hwtune` vets a database before trusting it: intact pages, then
 * hwtune's application id, a schema this build reads, the hwtune_meta
 * marker (runner_checks.c). */
static void check_store(store *s) {
  sqlite3_stmt *st = prepare(s, "PRAGMA quick_check");
  char *ok = step(s, st) ? column_dup(s, st, 0) : NULL;
  s->api.finalize(st);
  if (!ok || strcmp(ok, "ok") != 0)
    die("%s is corrupt (quick_check: %s); move it away", s->path, ok ? ok : "no answer");
  free(ok);
  int app = pragma_int(s, "PRAGMA application_id");
  s->version = pragma_int(s, "PRAGMA user_version");
  char *marker = NULL;
  if (app == HWTUNE_APPLICATION_ID && s->version > 0 && s->version <= HWTUNE_SCHEMA_LATEST &&
      pragma_int(s, "SELECT count(*) FROM sqlite_master WHERE name = 'hwtune_meta'")) {
    st = prepare(s, "SELECT value FROM hwtune_meta WHERE key = 'application'");
    marker = step(s, st) ? column_dup(s, st, 0) : NULL;
    s->api.finalize(st);
  }
  char err[256];
  int rc = hr_check_database(app, s->version, marker, err, sizeof err);
  free(marker);
  if (rc) die("%s %s", s->path, err);
}

static void open_store(store *s, const char *path) {
  char err[512];
  if (hr_sqlite_load(&s->api, err, sizeof err)) die("%s", err);
  s->path = path;
  /* Read-only: the runner never creates or migrates a database. */
  if (s->api.open_v2(path, &s->db, HR_SQLITE_OPEN_READONLY, NULL) != HR_SQLITE_OK)
    die("cannot open %s: %s", path, s->db ? s->api.errmsg(s->db) : "out of memory");
  check_store(s);
}

/* --host names a stored host (as `hwtune report --host` requires): a typo
 * must not fall back to the default config quietly. */
static void check_host(store *s, const char *host) {
  sqlite3_stmt *st = prepare(s, "SELECT count(*) FROM hosts WHERE host_key = ?1");
  s->api.bind_text(st, 1, host, -1, NULL);
  int n = step(s, st) ? s->api.column_int(st, 0) : 0;
  s->api.finalize(st);
  if (n == 0) die("--host %s is not a stored host in %s: `hwtune report` lists them", host,
                  s->path);
}

static graph_row find_graph(store *s, const char *prefix) {
  sqlite3_stmt *st = prepare(s, "SELECT graph_hash, name, lowered_json FROM graphs "
                                "WHERE substr(graph_hash, 1, length(?1)) = ?1 LIMIT 2");
  s->api.bind_text(st, 1, prefix, -1, NULL);
  graph_row g = {NULL, NULL, NULL};
  if (!step(s, st)) die("unknown graph %s in %s: `hwtune run` stores graphs", prefix, s->path);
  g.hash = column_dup(s, st, 0);
  g.name = column_dup(s, st, 1);
  g.lowered = column_dup(s, st, 2);
  if (step(s, st)) die("graph prefix %s is ambiguous in %s: give more digits", prefix, s->path);
  s->api.finalize(st);
  if (!g.lowered)
    die("graph %.12s has no lowered form in %s: run `hwtune run` on it with this hwtune "
        "version to store one", g.hash, s->path);
  return g;
}

/* Tuned beats user for one host (as hwtune.engine.config.resolve);
 * without a host, the newest tuned or user config of the graph. */
static config_row find_config(store *s, const char *graph_hash, const char *host) {
  static const char *const cols =
      "SELECT executors, threads_per_executor, scheduler, pin, source, host_key, "
      "op_threads_json, op_priority_json, op_params_json%s FROM engine_configs "
      "WHERE graph_hash = ?1 "
      "AND source IN ('tuned', 'user') ";
  char sel[512], sql[768];
  snprintf(sel, sizeof sel, cols,
           s->version >= CONFIG_V4 ? ", op_cost_json, op_candidates_json, lowered_json" : "");
  snprintf(sql, sizeof sql, "%s%s", sel,
           host ? "AND host_key = ?2 ORDER BY source = 'tuned' DESC LIMIT 1"
                : "ORDER BY created_at DESC, id DESC LIMIT 1");
  sqlite3_stmt *st = prepare(s, sql);
  s->api.bind_text(st, 1, graph_hash, -1, NULL);
  if (host) s->api.bind_text(st, 2, host, -1, NULL);
  config_row c;
  memset(&c, 0, sizeof c);
  if (step(s, st)) {
    c.found = 1;
    c.executors = s->api.column_int(st, 0);
    c.threads = s->api.column_int(st, 1);
    c.scheduler = column_dup(s, st, 2);
    c.pin = s->api.column_int(st, 3);
    c.source = column_dup(s, st, 4);
    c.host = column_dup(s, st, 5);
    c.op_threads = column_dup(s, st, 6);
    c.op_priority = column_dup(s, st, 7);
    c.op_params = column_dup(s, st, 8);
    if (s->version >= CONFIG_V4) {
      c.op_cost = column_dup(s, st, 9);
      c.op_candidates = column_dup(s, st, 10);
      c.lowered = column_dup(s, st, 11);
    }
  }
  s->api.finalize(st);
  return c;
}

/* ---- graph ----------------------------------------------------------- */

static const hj_value *member(const hj_value *obj, const char *key, hj_type type,
                              const char *where, size_t i) {
  const hj_value *v = hj_get(obj, key);
  if (!v || v->type != type)
    die("lowered_json: %s[%zu].%s missing or of the wrong type", where, i, key);
  return v;
}

/* An integer that a double holds exactly (JSON numbers are doubles here). */
static int64_t as_int(const hj_value *v, const char *what, size_t i) {
  if (v->type != HJ_NUMBER || v->num != floor(v->num) || fabs(v->num) > 9007199254740992.0)
    die("lowered_json: %s[%zu]: expected an integer", what, i);
  return (int64_t)v->num;
}

static int ids(const hj_value *arr, int *out, int n_tensors, const char *what, size_t op) {
  if (arr->len > 1024) die("lowered_json: ops[%zu].%s: too many tensors", op, what);
  for (size_t j = 0; j < arr->len; j++) {
    int64_t t = as_int(&arr->items[j], what, j);
    if (t < 0 || t >= n_tensors) die("lowered_json: ops[%zu].%s: bad tensor id %lld", op, what,
                                     (long long)t);
    out[j] = (int)t;
  }
  return (int)arr->len;
}

static void set_attrs(hwt_graph *g, int op, const hj_value *map, int floats, size_t opi) {
  for (size_t k = 0; k < map->len; k++) {
    const hj_value *arr = &map->items[k];
    if (arr->type != HJ_ARRAY || arr->len > INT_MAX)
      die("lowered_json: ops[%zu] attribute %s: expected an array", opi, map->keys[k]);
    int n = (int)arr->len, rc;
    if (floats) {
      double *v = malloc(sizeof *v * (arr->len ? arr->len : 1));
      if (!v) die("out of memory");
      for (size_t j = 0; j < arr->len; j++) {
        if (arr->items[j].type != HJ_NUMBER)
          die("lowered_json: ops[%zu] attribute %s: expected numbers", opi, map->keys[k]);
        v[j] = arr->items[j].num;
      }
      rc = hwt_graph_op_set_floats(g, op, map->keys[k], n, v);
      free(v);
    } else {
      int64_t *v = malloc(sizeof *v * (arr->len ? arr->len : 1));
      if (!v) die("out of memory");
      for (size_t j = 0; j < arr->len; j++) v[j] = as_int(&arr->items[j], map->keys[k], j);
      rc = hwt_graph_op_set_ints(g, op, map->keys[k], n, v);
      free(v);
    }
    if (rc < 0) die("lowered_json: ops[%zu]: %s", opi, hwt_graph_error(g));
  }
}

static hwt_graph *build_graph(const hj_value *doc) {
  if (doc->type != HJ_OBJECT) die("lowered_json: expected an object");
  const hj_value *tensors = hj_get(doc, "tensors"), *ops = hj_get(doc, "ops");
  if (!tensors || tensors->type != HJ_ARRAY || !ops || ops->type != HJ_ARRAY)
    die("lowered_json: expected \"tensors\" and \"ops\" arrays");
  if (tensors->len > INT_MAX || ops->len > INT_MAX) die("lowered_json: graph too large");
  hwt_graph *g = hwt_graph_create();
  if (!g) die("out of memory");
  for (size_t i = 0; i < tensors->len; i++) {
    const hj_value *t = &tensors->items[i];
    if (t->type != HJ_OBJECT) die("lowered_json: tensors[%zu]: expected an object", i);
    const hj_value *name = member(t, "name", HJ_STRING, "tensors", i);
    const hj_value *kind = member(t, "kind", HJ_STRING, "tensors", i);
    const hj_value *shape = member(t, "shape", HJ_ARRAY, "tensors", i);
    int k = hwt_abi_enum_value("hwt_tensor_kind", kind->str, -1);
    if (k < 0) die("lowered_json: tensors[%zu]: unknown kind \"%s\"", i, kind->str);
    if (shape->len > HWT_GRAPH_MAX_DIMS)
      die("lowered_json: tensors[%zu]: more than %d dimensions", i, HWT_GRAPH_MAX_DIMS);
    int64_t dims[HWT_GRAPH_MAX_DIMS];
    for (size_t d = 0; d < shape->len; d++) dims[d] = as_int(&shape->items[d], "shape", d);
    if (hwt_graph_add_tensor(g, name->str, (int)shape->len, dims, k) != (int)i)
      die("lowered_json: tensors[%zu]: %s", i, hwt_graph_error(g));
  }
  int in[1024], out[1024];
  for (size_t i = 0; i < ops->len; i++) {
    const hj_value *o = &ops->items[i];
    if (o->type != HJ_OBJECT) die("lowered_json: ops[%zu]: expected an object", i);
    const hj_value *name = member(o, "name", HJ_STRING, "ops", i);
    const hj_value *type = member(o, "type", HJ_STRING, "ops", i);
    int n_in = ids(member(o, "inputs", HJ_ARRAY, "ops", i), in, (int)tensors->len, "inputs", i);
    int n_out = ids(member(o, "outputs", HJ_ARRAY, "ops", i), out, (int)tensors->len,
                    "outputs", i);
    if (hwt_graph_add_op(g, name->str, type->str, n_in, in, n_out, out) != (int)i)
      die("lowered_json: ops[%zu]: %s", i, hwt_graph_error(g));
    set_attrs(g, (int)i, member(o, "ints", HJ_OBJECT, "ops", i), 0, i);
    set_attrs(g, (int)i, member(o, "floats", HJ_OBJECT, "ops", i), 1, i);
  }
  char err[512];
  if (hwt_graph_validate(g, err, sizeof err) != HWT_OK) die("lowered_json: %s", err);
  return g;
}

/* ---- values ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1.0p-53; }

/* hwtune.graph.reference.default_scale: LeCun 1/sqrt(fan_in) for weights,
 * 0.1 for vectors, 1 for graph inputs, so activations stay O(1) as there. */
static double default_scale(int ndim, const int64_t *shape, int is_param) {
  if (!is_param) return 1.0;
  double fan_in;
  if (ndim == 2) fan_in = (double)shape[0];
  else if (ndim == 4) fan_in = (double)(shape[1] * shape[2] * shape[3]);
  else if (ndim == 6) fan_in = (double)(shape[1] * shape[2] * shape[3] * shape[4]);
  else return 0.1;
  return 1.0 / sqrt(fan_in);
}

static double number_or(const hj_value *spec, const char *key, double dflt) {
  const hj_value *v = hj_get(spec, key);
  return v && v->type == HJ_NUMBER ? v->num : dflt;
}

static void fill(float *dst, int64_t n, const hj_value *tensor, const hwt_graph *g, int t,
                 hr_weights *weights) {
  const char *name = hwt_graph_tensor_name(g, t);
  uint64_t seed = 1469598103934665603ull; /* FNV-1a of the name */
  for (const char *c = name; *c; c++) seed = (seed ^ (unsigned char)*c) * 1099511628211ull;
  const hj_value *spec = hj_get(tensor, "init");
  if (spec && spec->type != HJ_OBJECT) die("lowered_json: tensors[%d].init: expected an object", t);
  static const char *const numbers[] = {"scale", "low", "high", "value"};
  char why[256];
  for (int k = 0; spec && k < 4; k++)
    if (hr_check_init_number(hj_get(spec, numbers[k]), numbers[k], (size_t)t, why, sizeof why))
      die("lowered_json: %s", why);
  const hj_value *kind_v = spec ? hj_get(spec, "init") : NULL;
  const char *kind = kind_v && kind_v->type == HJ_STRING ? kind_v->str : "uniform";
  if (!strcmp(kind, "file")) {
    char werr[512];
    if (!weights) die("tensor %s takes its values from a weights file, but the graph names none",
                      name);
    if (hr_weights_read(weights, name, hwt_graph_tensor_ndim(g, t), hwt_graph_tensor_shape(g, t),
                        dst, werr, sizeof werr))
      die("%s", werr);
    return;
  }
  double scale = number_or(spec, "scale",
                           default_scale(hwt_graph_tensor_ndim(g, t), hwt_graph_tensor_shape(g, t),
                                         hwt_graph_tensor_kind(g, t) == HWT_TENSOR_PARAM));
  if (!strcmp(kind, "zeros") || !strcmp(kind, "ones") || !strcmp(kind, "constant")) {
    float c = !strcmp(kind, "zeros") ? 0.0f : !strcmp(kind, "ones") ? 1.0f
                                                                  : (float)number_or(spec, "value", 0.0);
    for (int64_t i = 0; i < n; i++) dst[i] = c;
  } else if (!strcmp(kind, "normal")) {
    for (int64_t i = 0; i < n; i++) { /* Box-Muller; 1 - u keeps log away from 0 */
      double u = 1.0 - uniform01(&seed), w = uniform01(&seed);
      dst[i] = (float)(scale * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * w));
    }
  } else { /* uniform, and "data" (values not stored) as the default uniform */
    double lo = number_or(spec, "low", -scale), hi = number_or(spec, "high", scale);
    for (int64_t i = 0; i < n; i++) dst[i] = (float)(lo + (hi - lo) * uniform01(&seed));
  }
}

/* ---- config ---------------------------------------------------------- */

static int op_id(const hwt_graph *g, const char *name) {
  for (int i = 0; i < hwt_graph_n_ops(g); i++)
    if (!strcmp(hwt_graph_op_name(g, i), name)) return i;
  return -1;
}

/* op name -> number (a JSON object) as an array in op-id order, or NULL
 * when the map is empty; unlisted ops get dflt. Each value is checked as
 * `hwtune run` checks it (field: HWT_CFG_OP_*, under the stored config c). */
static void *per_op(const char *json, const hwt_graph *g, int as_int_array, double dflt,
                    const char *what, const hwt_engine_config *c, int field) {
  if (!json) return NULL;
  hj_value m;
  char err[256];
  if (hj_parse(json, strlen(json), &m, err, sizeof err)) die("engine config %s: %s", what, err);
  if (m.type != HJ_OBJECT) die("engine config %s: expected an object", what);
  if (m.len == 0) {
    hj_free(&m);
    return NULL;
  }
  int n = hwt_graph_n_ops(g);
  int *ai = as_int_array ? malloc(sizeof(int) * (size_t)n) : NULL;
  double *ad = as_int_array ? NULL : malloc(sizeof(double) * (size_t)n);
  if (!ai && !ad) die("out of memory");
  for (int i = 0; i < n; i++) {
    if (ai) ai[i] = (int)dflt;
    else ad[i] = dflt;
  }
  for (size_t k = 0; k < m.len; k++) {
    int op = op_id(g, m.keys[k]);
    if (op < 0) die("engine config %s names unknown op \"%s\"", what, m.keys[k]);
    if (m.items[k].type != HJ_NUMBER)
      die("engine config %s['%s']: must be a number", what, m.keys[k]);
    char why[512];
    if (hr_check_op_value(c, field, what, m.keys[k], m.items[k].num, 0, why, sizeof why))
      die("engine config %s", why);
    if (ai) ai[op] = (int)as_int(&m.items[k], what, k);
    else ad[op] = m.items[k].num;
  }
  hj_free(&m);
  return ai ? (void *)ai : (void *)ad;
}

/* op_candidates_json: op name -> [[threads, seconds], ...], best first, as
 * the engine's [n_ops * width] arrays (unlisted ops: no candidate). */
static int candidates(const char *json, const hwt_graph *g, int **threads, double **seconds,
                      const hwt_engine_config *cfg) {
  *threads = NULL;
  *seconds = NULL;
  if (!json) return 0;
  hj_value m;
  char err[256];
  if (hj_parse(json, strlen(json), &m, err, sizeof err)) die("engine config op_candidates: %s", err);
  if (m.type != HJ_OBJECT) die("engine config op_candidates: expected an object");
  size_t width = 0;
  for (size_t k = 0; k < m.len; k++) {
    if (m.items[k].type != HJ_ARRAY || m.items[k].len == 0)
      die("engine config op_candidates['%s']: must be a non-empty list of [threads, seconds] "
          "pairs", m.keys[k]);
    if (m.items[k].len > width) width = m.items[k].len;
  }
  if (width == 0 || width > HWT_CONFIG_MAX_CANDIDATES) {
    hj_free(&m);
    if (width > HWT_CONFIG_MAX_CANDIDATES)
      die("engine config op_candidates: more than %d candidates for one op",
          HWT_CONFIG_MAX_CANDIDATES);
    return 0;
  }
  size_t n = (size_t)hwt_graph_n_ops(g) * width;
  int *t = calloc(n ? n : 1, sizeof(int));
  double *sec = malloc(sizeof(double) * (n ? n : 1));
  if (!t || !sec) die("out of memory");
  for (size_t i = 0; i < n; i++) sec[i] = -1.0;
  for (size_t k = 0; k < m.len; k++) {
    int op = op_id(g, m.keys[k]);
    if (op < 0) die("engine config op_candidates names unknown op \"%s\"", m.keys[k]);
    for (size_t c = 0; c < m.items[k].len; c++) {
      const hj_value *p = &m.items[k].items[c];
      if (p->type != HJ_ARRAY || p->len != 2 || p->items[0].type != HJ_NUMBER ||
          p->items[1].type != HJ_NUMBER)
        die("engine config op_candidates['%s']: each candidate is a [threads, seconds] pair "
            "(not item %zu)", m.keys[k], c);
      char why[512];
      if (hr_check_op_value(cfg, HWT_CFG_OP_CANDIDATES, "op_candidates", m.keys[k],
                            p->items[0].num, p->items[1].num, why, sizeof why))
        die("engine config %s", why);
      t[(size_t)op * width + c] = (int)as_int(&p->items[0], "op_candidates", c);
      sec[(size_t)op * width + c] = p->items[1].num;
    }
  }
  hj_free(&m);
  *threads = t;
  *seconds = sec;
  return (int)width;
}

/* The row the scheduler table marks default_many: what several executors
 * get when no scheduler is named. */
static const hwt_sched_info *default_many(void) {
  for (int k = 0; k < hwt_sched_count(); k++)
    if (hwt_sched_at(k)->default_many) return hwt_sched_at(k);
  return NULL;
}

/* Flags replace the stored fields as `hwtune run` applies them
 * (hwtune.engine.config._apply_flags): a count given alone re-derives the
 * other when both no longer fit; several executors without a scheduler
 * leave a single-team scheduler for the default_many one; a single-team
 * --scheduler alone means one executor. Returns the row that runs. */
static const hwt_sched_info *apply_flags(hwt_engine_config *cfg, const options *o,
                                         const hwt_sched_info *s) {
  int cpus = hwt_allowed_cpus(NULL, 0);
  if (cpus < 1) cpus = 1;
  if (o->scheduler) {
    if (!(s = hwt_sched_by_name(o->scheduler)))
      die("invalid --scheduler %s: choose one of %s", o->scheduler, scheduler_names());
    if (s->single_team && !o->executors) cfg->executors = 1;
  }
  if (o->executors) {
    cfg->executors = o->executors;
    const hwt_sched_info *many = default_many();
    if (s->single_team && o->executors > 1 && !o->scheduler && many) {
      s = many;
      fprintf(stderr, "hwtune-run: notice: --executors %d runs several executors: using "
              "--scheduler %s (name another with --scheduler)\n", o->executors, s->name);
    }
    if (!o->threads && cfg->executors * cfg->threads_per_executor > cpus)
      cfg->threads_per_executor = cpus / o->executors > 1 ? cpus / o->executors : 1;
  }
  if (o->threads) {
    cfg->threads_per_executor = o->threads;
    if (!o->executors && cfg->executors * o->threads > cpus)
      cfg->executors = cpus / o->threads > 1 ? cpus / o->threads : 1;
  }
  cfg->scheduler = s->name;
  return s;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  options o = parse_args(argc, argv);
  store s;
  graph_row gr;
  config_row cr;
  char err[512];
  if (o.config) {
    /* An exported records file: no database is opened. */
    if (hr_records_load(o.config, o.graph, o.host, &gr, &cr, err, sizeof err)) die("%s", err);
  } else {
    open_store(&s, o.db);
    if (o.host) check_host(&s, o.host);
    gr = find_graph(&s, o.graph);
    cr = find_config(&s, gr.hash, o.host);
  }
  hj_value doc;
  /* The config's own lowered graph (its layout rewrites) when it has one. */
  const char *lowered = cr.lowered ? cr.lowered : gr.lowered;
  if (hj_parse(lowered, strlen(lowered), &doc, err, sizeof err))
    die("graph %.12s: corrupt %slowered_json: %s", gr.hash, cr.lowered ? "engine config " : "",
        err);
  hwt_graph *g = build_graph(&doc);

  hwt_engine_config cfg;
  hwt_engine_config_init(&cfg);
  const char *source = "default";
  const hwt_sched_info *sched = hwt_sched_by_name(NULL);
  if (!sched) die("this build's scheduler table has no default scheduler");
  if (cr.found) {
    /* A config written by a newer hwtune (or damaged) may name a scheduler
     * this build lacks: say so, as `hwtune run` does, unless a flag names
     * the one to use. */
    const hwt_sched_info *stored = hwt_sched_by_name(cr.scheduler);
    if (!stored && !o.scheduler)
      die("engine config of graph %.12s names scheduler '%s', unknown to this hwtune (one "
          "of: %s): pass --scheduler to override", gr.hash, cr.scheduler, scheduler_names());
    if (stored) sched = stored;
    else if (!(sched = hwt_sched_by_name(o.scheduler)))
      die("invalid --scheduler %s: choose one of %s", o.scheduler, scheduler_names());
    cfg.scheduler = sched->name;
    cfg.executors = cr.executors;
    cfg.threads_per_executor = cr.threads;
    cfg.pin = cr.pin;
    /* The stored row as `hwtune run` checks it: every field and value. */
    if (hr_check_stored_config(&cfg, err, sizeof err))
      die("engine config of graph %.12s: %s", gr.hash, err);
    if (hr_check_op_params(cr.op_params, err, sizeof err))
      die("engine config of graph %.12s: %s", gr.hash, err);
    cfg.op_threads = per_op(cr.op_threads, g, 1, 0, "op_threads", &cfg, HWT_CFG_OP_THREADS);
    /* -1: no override, the plan's level (as the Python binding passes). */
    cfg.op_priority = per_op(cr.op_priority, g, 0, -1.0, "op_priority", &cfg,
                             HWT_CFG_OP_PRIORITY);
    /* -1: no profile, the plan's estimate. */
    cfg.op_cost = per_op(cr.op_cost, g, 0, -1.0, "op_cost", &cfg, HWT_CFG_OP_COST);
    int *ct;
    double *cs;
    cfg.op_cand_n = candidates(cr.op_candidates, g, &ct, &cs, &cfg);
    cfg.op_cand_threads = ct;
    cfg.op_cand_seconds = cs;
    source = cr.source;
  } else if (!o.executors && !o.threads && !o.scheduler) {
    fprintf(stderr, "hwtune-run: notice: no tuned or user engine config for graph %.12s%s%s: "
            "using 1 executor x all CPUs, %s (set --executors/--threads/--scheduler "
            "to choose)\n", gr.hash, o.host ? " on host " : "", o.host ? o.host : "",
            sched->name);
  }
  sched = apply_flags(&cfg, &o, sched);
  /* What runs must fit the CPUs this process may use (taskset, cpusets),
   * as `hwtune run` requires. */
  if (hr_check_budget(&cfg, err, sizeof err)) {
    if (cr.found && !o.executors && !o.threads)
      die("engine config of graph %.12s runs %d executor(s) x %d thread(s): %s; choose a "
          "smaller config with --executors/--threads", gr.hash, cfg.executors,
          cfg.threads_per_executor, err);
    die("invalid --executors %d --threads %d: %s", cfg.executors, cfg.threads_per_executor, err);
  }

  /* Without a stored config, pin as `hwtune run` does (EngineConfig.pinned):
   * only schedulers that pin by default. A stored pin was measured for the
   * stored scheduler: --scheduler naming another starts from that one's
   * default, as `hwtune run` does (engine/config.py, _apply_flags). */
  if (!cr.found || (o.scheduler && strcmp(o.scheduler, cr.scheduler)))
    cfg.pin = sched && sched->pins == HWT_PIN_BY_DEFAULT;

  hwt_engine *e;
  if (hwt_engine_create(g, &cfg, &e, err, sizeof err) < 0) die("engine: %s", err);
  /* An imported model's real weights (lowered "weights": {"path", "sha256"}). */
  hr_weights wfile, *weights = NULL;
  const hj_value *wref = hj_get(&doc, "weights"), *wpath = wref ? hj_get(wref, "path") : NULL;
  if (wref) {
    if (!wpath || wpath->type != HJ_STRING) die("lowered_json: weights.path missing");
    if (hr_weights_open(&wfile, wpath->str, err, sizeof err)) die("%s", err);
    weights = &wfile;
  }
  int nt = hwt_graph_n_tensors(g);
  float **params = calloc((size_t)(nt ? nt : 1), sizeof *params);
  if (!params) die("out of memory");
  for (int t = 0; t < nt; t++) {
    if (hwt_graph_tensor_kind(g, t) != HWT_TENSOR_PARAM) continue;
    int64_t n = hwt_graph_tensor_bytes(g, t) / HWT_GRAPH_ELEM_BYTES;
    /* Params stay bound for the engine's life; 64-byte aligned like the
     * engine's own arena so prepacking sees the same alignment. */
    size_t bytes = ((size_t)(n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
    float *p = params[t] = aligned_alloc(64, bytes);
    if (!p) die("out of memory for param %s", hwt_graph_tensor_name(g, t));
    fill(p, n, &hj_get(&doc, "tensors")->items[t], g, t, weights);
    if (hwt_engine_bind(e, t, p) < 0) die("engine: %s", hwt_engine_error(e));
  }
  if (hwt_engine_prepare(e) < 0) die("engine: %s", hwt_engine_error(e));
  for (int t = 0; t < nt; t++)
    if (hwt_graph_tensor_kind(g, t) == HWT_TENSOR_INPUT)
      fill(hwt_engine_tensor(e, t), hwt_graph_tensor_bytes(g, t) / HWT_GRAPH_ELEM_BYTES,
           &hj_get(&doc, "tensors")->items[t], g, t, weights);

  double *samples = malloc(sizeof(double) * (size_t)o.iterations);
  if (!samples) die("out of memory");
  for (int i = 0; i < o.warmup + o.iterations; i++) {
    double t0 = hwt_now();
    if (hwt_engine_run(e) < 0) die("engine run: %s", hwt_engine_error(e));
    double dt = hwt_now() - t0;
    if (i >= o.warmup) samples[i - o.warmup] = dt;
  }
  qsort(samples, (size_t)o.iterations, sizeof *samples, cmp_double);
  int m = o.iterations;
  double med = m % 2 ? samples[m / 2] : 0.5 * (samples[m / 2 - 1] + samples[m / 2]);
  char folded[64] = "";
  if (hwt_engine_n_folded(e) > 0)
    snprintf(folded, sizeof folded, " (%d folded)", hwt_engine_n_folded(e));
  printf("graph %.12s (%s): %d ops%s%s; config %s: %d x %d, %s, %s\n", gr.hash, gr.name,
         hwt_graph_n_ops(g), folded, cr.lowered ? " from the config's lowered graph" : "", source,
         sched->single_team ? 1 : cfg.executors, cfg.threads_per_executor, sched->name,
         cfg.pin ? "pinned" : "unpinned");
  if (weights)
    printf("weights: %d tensors from %s\n", weights->n_read, weights->path);
  printf("latency: median %.4f ms, min %.4f ms, %.2f runs/s (%d iterations, %d warmup)\n",
         med * 1e3, samples[0] * 1e3, med > 0 ? 1.0 / med : 0.0, o.iterations, o.warmup);
  if (weights) hr_weights_close(weights);
  hwt_engine_destroy(e);
  hwt_graph_destroy(g);
  for (int t = 0; t < nt; t++) free(params[t]);
  free(params);
  free(samples);
  free((void *)cfg.op_threads);
  free((void *)cfg.op_priority);
  free((void *)cfg.op_cost);
  free((void *)cfg.op_cand_threads);
  free((void *)cfg.op_cand_seconds);
  hj_free(&doc);
  free(gr.hash);
  free(gr.name);
  free(gr.lowered);
  free(cr.scheduler);
  free(cr.source);
  free(cr.host);
  free(cr.op_threads);
  free(cr.op_priority);
  free(cr.op_params);
  free(cr.op_cost);
  free(cr.op_candidates);
  free(cr.lowered);
  if (!o.config) s.api.close(s.db);
  return 0;
}
