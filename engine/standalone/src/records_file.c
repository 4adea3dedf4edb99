#include "records_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwtune/errorf.h"
#include "json.h"

#ifndef HWTUNE_SCHEMA_LATEST
#error "HWTUNE_SCHEMA_LATEST comes from the build (standalone.cmake)"
#endif

/* A records file larger than this is not a config to run: the exporter
 * writes a tuned host's whole history in a few MiB (ResNet-18's full tune:
 * ~3 MiB). */
#define MAX_FILE_BYTES (1L << 30)

typedef struct {
  hj_value *items;
  size_t n, cap;
} records;

/* A refused file: -1, the reason in err. */
#define fail(...) hwt_errorf(-1, __VA_ARGS__)

static char *slurp(const char *path, size_t *n, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(err, errlen, "cannot read --config %s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 65536 + 1 > cap) {
      cap = cap ? cap * 2 : 1 << 20;
      if (cap > (size_t)MAX_FILE_BYTES + 65536 + 1) {
        fclose(f);
        free(buf);
        fail(err, errlen, "--config %s is over %ld MiB: not an exported config", path,
             MAX_FILE_BYTES >> 20);
        return NULL;
      }
      char *nb = realloc(buf, cap);
      if (!nb) {
        fclose(f);
        free(buf);
        fail(err, errlen, "out of memory reading %s", path);
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, 65536, f);
    len += got;
    if (got < 65536) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    fail(err, errlen, "cannot read --config %s", path);
    return NULL;
  }
  buf[len] = '\0';
  *n = len;
  return buf;
}

static const char *str_of(const hj_value *obj, const char *key) {
  const hj_value *v = obj ? hj_get(obj, key) : NULL;
  return v && v->type == HJ_STRING ? v->str : NULL;
}

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *c = malloc(n + 1);
  if (c) memcpy(c, s, n + 1);
  return c;
}

static int int_of(const hj_value *obj, const char *key, int *out) {
  const hj_value *v = hj_get(obj, key);
  if (!v || v->type != HJ_NUMBER || v->num != (double)(int)v->num) return -1;
  *out = (int)v->num;
  return 0;
}

/* A config row the runner may use: tuned or given by the user, and of the
 * named host when there is one. */
static int usable_config(const hj_value *row, const char *host) {
  const char *src = str_of(row, "source"), *hk = str_of(row, "host_key");
  return src && (!strcmp(src, "tuned") || !strcmp(src, "user")) &&
         (!host || (hk && !strcmp(hk, host)));
}

/* Kept record i (a graph or a config): its row, with its kind and the
 * hash of the graph it belongs to. */
static const hj_value *kept_row(const records *k, size_t i, const char **kind, const char **hash) {
  const hj_value *row = hj_get(&k->items[i], "row");
  *kind = str_of(&k->items[i], "record");
  *hash = str_of(row, "graph_hash");
  return row;
}

static int prefix_of(const char *hash, const char *prefix) {
  return hash && (!prefix || !strncmp(hash, prefix, strlen(prefix)));
}

int hr_records_load(const char *path, const char *graph_prefix, const char *host, graph_row *g,
                    config_row *c, char *err, size_t errlen) {
  memset(g, 0, sizeof *g);
  memset(c, 0, sizeof *c);
  size_t n;
  char *text = slurp(path, &n, err, errlen);
  if (!text) return -1;
  records keep = {NULL, 0, 0};
  int line = 0, header = 0, ended = 0, host_seen = host == NULL, rc = -1;
  char *p = text;
  while (p < text + n) {
    char *nl = memchr(p, '\n', (size_t)(text + n - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(text + n - p);
    line++;
    char *cur = p;
    p = nl ? nl + 1 : text + n;
    if (strspn(cur, " \t\r") >= len) continue;
    hj_value v;
    char why[256];
    if (hj_parse(cur, len, &v, why, sizeof why)) {
      fail(err, errlen, "--config %s:%d: not JSON (%s)", path, line, why);
      goto done;
    }
    const char *kind = v.type == HJ_OBJECT ? str_of(&v, "record") : NULL;
    if (!header) {
      int version, schema;
      const char *format = str_of(&v, "format");
      if (!kind || strcmp(kind, "header") || !format || strcmp(format, "hwtune-records")) {
        hj_free(&v);
        fail(err, errlen, "--config %s is not an hwtune records file (write one with `hwtune "
             "db export`)", path);
        goto done;
      }
      if (int_of(&v, "version", &version) || version > HR_RECORDS_VERSION ||
          int_of(&v, "schema", &schema) || schema > HWTUNE_SCHEMA_LATEST) {
        hj_free(&v);
        fail(err, errlen, "--config %s was written by a newer hwtune (records version or "
             "schema this runner does not read): upgrade hwtune", path);
        goto done;
      }
      header = 1;
      hj_free(&v);
      continue;
    }
    if (kind && !strcmp(kind, "end")) ended = 1;
    const hj_value *row = kind ? hj_get(&v, "row") : NULL;
    if (kind && !strcmp(kind, "host") && row && host && str_of(row, "host_key") &&
        !strcmp(str_of(row, "host_key"), host))
      host_seen = 1;
    if (kind && (!strcmp(kind, "graph") || !strcmp(kind, "config")) && row &&
        row->type == HJ_OBJECT) {
      if (keep.n == keep.cap) {
        keep.cap = keep.cap ? keep.cap * 2 : 16;
        hj_value *ni = realloc(keep.items, keep.cap * sizeof *ni);
        if (!ni) {
          hj_free(&v);
          fail(err, errlen, "out of memory reading %s", path);
          goto done;
        }
        keep.items = ni;
      }
      keep.items[keep.n++] = v;
    } else {
      hj_free(&v);
    }
  }
  if (!header) {
    fail(err, errlen, "--config %s is empty", path);
    goto done;
  }
  if (!ended) {
    fail(err, errlen, "--config %s has no end record: the file is truncated; export it again",
         path);
    goto done;
  }
  if (!host_seen) {
    fail(err, errlen, "--host %s is not a host of --config %s", host, path);
    goto done;
  }
  /* The graph: the prefix's, else the one graph the usable configs name. */
  const char *hash = NULL;
  for (size_t i = 0; i < keep.n; i++) {
    const char *kind, *h;
    const hj_value *row = kept_row(&keep, i, &kind, &h);
    int usable = graph_prefix ? !strcmp(kind, "graph")
                              : !strcmp(kind, "config") && usable_config(row, host);
    if (!usable || !prefix_of(h, graph_prefix)) continue;
    if (hash && strcmp(hash, h)) {
      if (graph_prefix)
        fail(err, errlen, "graph prefix %s is ambiguous in --config %s: give more digits",
             graph_prefix, path);
      else
        fail(err, errlen, "--config %s holds configs of several graphs: choose one with "
             "--graph HASH_PREFIX", path);
      goto done;
    }
    hash = h;
  }
  if (!hash) {
    if (graph_prefix)
      fail(err, errlen, "unknown graph %s in --config %s", graph_prefix, path);
    else
      fail(err, errlen, "--config %s holds no tuned or user engine config%s%s: export one with "
           "`hwtune db export`", path, host ? " of host " : "", host ? host : "");
    goto done;
  }
  const hj_value *best = NULL;
  for (size_t i = 0; i < keep.n; i++) {
    const char *kind, *h;
    const hj_value *row = kept_row(&keep, i, &kind, &h);
    if (!h || strcmp(h, hash)) continue;
    if (!strcmp(kind, "graph")) {
      if (!g->hash) {
        g->hash = dup_or_null(h);
        g->name = dup_or_null(str_of(row, "name"));
        g->lowered = dup_or_null(str_of(row, "lowered_json"));
      }
      continue;
    }
    if (!usable_config(row, host)) continue;
    const char *src = str_of(row, "source");
    if (!best) {
      best = row;
      continue;
    }
    /* tuned beats user for a host; without one, the newest (later wins a tie) */
    if (host) {
      if (!strcmp(src, "tuned") && strcmp(str_of(best, "source"), "tuned")) best = row;
    } else {
      const char *a = str_of(row, "created_at"), *b = str_of(best, "created_at");
      if (a && (!b || strcmp(a, b) >= 0)) best = row;
    }
  }
  if (!g->hash) {
    fail(err, errlen, "--config %s has a config of graph %.12s but not the graph: export it "
         "again", path, hash);
    goto done;
  }
  if (!g->lowered) {
    fail(err, errlen, "graph %.12s has no lowered form in --config %s: run `hwtune run` on it "
         "and export again", hash, path);
    goto done;
  }
  if (best) {
    c->found = 1;
    if (int_of(best, "executors", &c->executors) ||
        int_of(best, "threads_per_executor", &c->threads) || int_of(best, "pin", &c->pin)) {
      fail(err, errlen, "--config %s: the engine config of graph %.12s lacks executors, "
           "threads_per_executor or pin", path, hash);
      goto done;
    }
    c->scheduler = dup_or_null(str_of(best, "scheduler"));
    c->source = dup_or_null(str_of(best, "source"));
    c->host = dup_or_null(str_of(best, "host_key"));
    c->op_threads = dup_or_null(str_of(best, "op_threads_json"));
    c->op_priority = dup_or_null(str_of(best, "op_priority_json"));
    c->op_params = dup_or_null(str_of(best, "op_params_json"));
    c->op_cost = dup_or_null(str_of(best, "op_cost_json"));
    c->op_candidates = dup_or_null(str_of(best, "op_candidates_json"));
    c->lowered = dup_or_null(str_of(best, "lowered_json"));
    if (!c->scheduler) {
      fail(err, errlen, "--config %s: the engine config of graph %.12s names no scheduler",
           path, hash);
      goto done;
    }
  }
  rc = 0;
done:
  for (size_t i = 0; i < keep.n; i++) hj_free(&keep.items[i]);
  free(keep.items);
  free(text);
  return rc;
}
