/* A seeded mutation fuzzer over the runner's JSON reader and the checks it
 * feeds (engine/standalone/src/json.c, runner_checks.c), built with the test
 * suite under AddressSanitizer + UndefinedBehaviorSanitizer: any
 * out-of-bounds read, leak, overflow or crash fails the program. Seeds are
 * the kinds of text hwtune-run reads from results.db (a lowered graph,
 * per-op maps, candidates, op_params); each mutant flips, inserts, deletes,
 * duplicates or truncates bytes. Accepted documents are walked in full and
 * fed to the config checks; refused ones must say where ("offset N: ").
 *
 *   test_json_fuzz [ITERATIONS] [SEED]     (default 20000 mutants, seed 1)
 */
#include "../../engine/standalone/src/json.c"
#include "../../engine/standalone/src/runner_checks.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwtune/config_check.h"

static const char *const SEEDS[] = {
    "{\"tensors\": [{\"name\": \"x\", \"kind\": \"input\", \"shape\": [8, 16], "
    "\"init\": {\"init\": \"uniform\", \"scale\": 0.5}}, {\"name\": \"w\", \"kind\": \"param\", "
    "\"shape\": [16, 16]}, {\"name\": \"y\", \"kind\": \"output\", \"shape\": [8, 16]}], "
    "\"ops\": [{\"name\": \"h\", \"type\": \"matmul\", \"inputs\": [0, 1], \"outputs\": [2], "
    "\"ints\": {\"trans\": [0]}, \"floats\": {\"alpha\": [1.5e-3]}}]}",
    "{\"L1.1.xw\": 1, \"L1.1.hw\": 2, \"y\": 0.25}",
    "{\"h1\": [[2, 1e-05], [1, 2e-05]], \"y2\": [[1, 0]]}",
    "{\"c1\": {\"ic_bn\": 8, \"oc_bn\": 16, \"reg_n\": 7, \"unroll_ker\": true}}",
    "[\"a\\u00e9\\ud83d\\ude00\", -0.0, 1E+308, null, true, false, {}, [], [[[]]]]",
    "{\"s\": \"tab\\there\\n\", \"n\": -12.5e-7, \"k\": {\"\": {\"x\": [1, 2, 3]}}}",
};

/* Bytes that steer a mutant into the parser's interesting states. */
static const char PICK[] = "[]{}\",:\\u0123456789.eE+-tfnrl \t\n\x80\xc3\xff";

static uint64_t rng_state;
static uint64_t next(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static int failures;

/* Visit every value: lengths, keys and strings must be readable. */
static size_t walk(const hj_value *v, int depth) {
  size_t n = 1;
  if (depth > HJ_MAX_DEPTH + 1) {
    fprintf(stderr, "walk: depth %d beyond the parser's limit\n", depth);
    failures++;
    return n;
  }
  if (v->type == HJ_STRING) (void)strlen(v->str); /* NUL-terminated within the buffer */
  if (v->type == HJ_ARRAY || v->type == HJ_OBJECT)
    for (size_t i = 0; i < v->len; i++) {
      if (v->type == HJ_OBJECT) {
        (void)strlen(v->keys[i]);
        if (hj_get(v, v->keys[i]) == NULL) {
          fprintf(stderr, "walk: key %zu not found by hj_get\n", i);
          failures++;
        }
      }
      n += walk(&v->items[i], depth + 1);
    }
  return n;
}

/* Accepted maps go through the per-op checks as hwtune-run applies them. */
static void check_values(const hj_value *v) {
  hwt_engine_config c;
  hwt_engine_config_init(&c);
  c.threads_per_executor = 2;
  char err[256];
  if (v->type != HJ_OBJECT) return;
  for (size_t i = 0; i < v->len; i++) {
    const hj_value *x = &v->items[i];
    if (x->type == HJ_NUMBER) {
      for (int f = HWT_CFG_OP_THREADS; f <= HWT_CFG_OP_PRIORITY; f++)
        (void)hr_check_op_value(&c, f, "op", v->keys[i], x->num, 0, err, sizeof err);
    } else if (x->type == HJ_ARRAY) {
      for (size_t k = 0; k < x->len; k++) {
        const hj_value *p = &x->items[k];
        if (p->type == HJ_ARRAY && p->len == 2 && p->items[0].type == HJ_NUMBER &&
            p->items[1].type == HJ_NUMBER)
          (void)hr_check_op_value(&c, HWT_CFG_OP_CANDIDATES, "op_candidates", v->keys[i],
                                  p->items[0].num, p->items[1].num, err, sizeof err);
      }
    }
  }
}

static void one(const char *buf, size_t n) {
  hj_value v;
  char err[160];
  err[0] = '\0';
  if (hj_parse(buf, n, &v, err, sizeof err) == 0) {
    walk(&v, 0);
    check_values(&v);
    hj_free(&v);
    /* op_params wants NUL-terminated text: the runner's columns are. */
    char *text = malloc(n + 1);
    if (!text) return;
    memcpy(text, buf, n);
    text[n] = '\0';
    if (strlen(text) == n) (void)hr_check_op_params(text, err, sizeof err);
    free(text);
  } else if (strncmp(err, "offset ", 7) != 0) {
    fprintf(stderr, "refusal without an offset: \"%s\"\n", err);
    failures++;
  }
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
  rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  const size_t n_seeds = sizeof SEEDS / sizeof SEEDS[0];
  for (size_t s = 0; s < n_seeds; s++) one(SEEDS[s], strlen(SEEDS[s]));
  for (long it = 0; it < iterations; it++) {
    const char *seed = SEEDS[below(n_seeds)];
    size_t len = strlen(seed), cap = len * 2 + 64;
    char *buf = malloc(cap);
    if (!buf) return 2;
    memcpy(buf, seed, len);
    int edits = 1 + (int)below(4);
    for (int e = 0; e < edits; e++) {
      size_t at = below(len + 1);
      switch (below(6)) {
        case 0: /* flip a bit */
          if (len) buf[below(len)] ^= (char)(1u << below(8));
          break;
        case 1: /* insert a steering byte */
          if (len + 1 < cap) {
            memmove(buf + at + 1, buf + at, len - at);
            buf[at] = PICK[below(sizeof PICK - 1)];
            len++;
          }
          break;
        case 2: { /* delete a range */
          size_t k = below(8) + 1;
          if (at + k > len) k = len - at;
          memmove(buf + at, buf + at + k, len - at - k);
          len -= k;
          break;
        }
        case 3: { /* duplicate a range (nesting, repeated keys) */
          size_t k = below(16) + 1;
          if (at + k > len) k = len - at;
          if (len + k < cap) {
            memmove(buf + at + k, buf + at, len - at);
            len += k;
          }
          break;
        }
        case 4: /* truncate */
          len = at;
          break;
        default: /* a byte replaced */
          if (len) buf[below(len)] = PICK[below(sizeof PICK - 1)];
      }
    }
    /* Exactly len bytes, no terminator: the parser is length-delimited and
     * must not read past the end (ASan sees it). */
    char *exact = malloc(len ? len : 1);
    if (!exact) return 2;
    memcpy(exact, buf, len);
    free(buf);
    one(exact, len);
    free(exact);
  }
  /* Nesting right at and past the limit. */
  for (int depth = HJ_MAX_DEPTH - 1; depth <= HJ_MAX_DEPTH + 2; depth++) {
    char *deep = malloc((size_t)depth * 2 + 1);
    if (!deep) return 2;
    memset(deep, '[', (size_t)depth);
    memset(deep + depth, ']', (size_t)depth);
    one(deep, (size_t)depth * 2);
    free(deep);
  }
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("json fuzz: %ld mutants, no failure\n", iterations);
  return 0;
}
