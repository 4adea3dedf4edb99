/* Input graphs: a JSON Lines reader for the sample format of
 * docs/model-format.md ("Input graphs"), validating as it goes.
 *
 * The reader streams: a line is parsed value by value straight into the
 * set's arrays, so memory follows the data (never a document tree), and a
 * sample that breaks a size limit is refused at the element that crosses
 * it, before the rest of its line is read: a 10-million-vertex line costs
 * the time to scan one million elements, not to hold ten million.
 *
 * Each line is one JSON object:
 *   "tokens":   [id or null, ...]            one per vertex
 *   "features": [[f, ...] or null, ...]      one row per vertex
 *   "children": [[child, ...], ...]          one list per vertex
 *   "edges":    [[parent, child], ...]       instead of "children"
 *   "chain":    true                         vertex i's child is i - 1
 *   "n":        vertex count (when no per-vertex array gives it)
 *   "id", "label": any value, ignored
 * Children are the sample's own vertex indices (0-based). Then per sample:
 * every child index exists, no vertex has more children than the arity,
 * the graph is acyclic (Kahn's algorithm; a cycle is named vertex by
 * vertex), and the sample has a vertex. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/dynamic.h"
#include "hwtune/free_all.h"

struct hwt_samples {
  int64_t count, n_vertices, n_edges;
  int input, width;
  int64_t *vertex_off; /* [count + 1] */
  int64_t *child_off;  /* [n_vertices + 1] */
  int32_t *children;   /* [n_edges] */
  int32_t *tokens;     /* [n_vertices] or NULL */
  float *features;     /* [n_vertices * width] or NULL */
  int64_t *lines;      /* [count] */
  int64_t cap_samples, cap_vertices, cap_edges;
  int64_t bytes;       /* what the arrays hold, against max_total_bytes */
};

/* ---- growable arrays ------------------------------------------------------ */

typedef struct {
  void *p;
  int64_t n, cap;
  size_t elem;
} vec;

static int vec_reserve(vec *v, int64_t want) {
  if (want <= v->cap) return HWT_OK;
  int64_t cap = v->cap ? v->cap : 64;
  while (cap < want) cap *= 2;
  void *p = realloc(v->p, (size_t)cap * v->elem);
  if (!p) return HWT_ENOMEM;
  v->p = p;
  v->cap = cap;
  return HWT_OK;
}

static int vec_push(vec *v, const void *x) {
  if (v->n == v->cap && vec_reserve(v, v->n + 1) < 0) return HWT_ENOMEM;
  memcpy((char *)v->p + (size_t)v->n * v->elem, x, v->elem);
  v->n++;
  return HWT_OK;
}

/* ---- the character stream ------------------------------------------------- */

typedef struct {
  FILE *f;
  const char *mem;
  size_t mem_len, mem_pos;
  char buf[1 << 16];
  size_t len, pos;
  int64_t line, col; /* of the next character, 1-based */
  int io_error;
} reader;

static int rd_fill(reader *r) {
  if (r->mem) return 0;
  if (!r->f) return 0;
  r->len = fread(r->buf, 1, sizeof r->buf, r->f);
  r->pos = 0;
  if (r->len == 0 && ferror(r->f)) r->io_error = 1;
  return r->len > 0;
}

/* The next character, or -1 at the end. */
static int rd_peek(reader *r) {
  if (r->mem) return r->mem_pos < r->mem_len ? (unsigned char)r->mem[r->mem_pos] : -1;
  if (r->pos >= r->len && !rd_fill(r)) return -1;
  return (unsigned char)r->buf[r->pos];
}

static int rd_get(reader *r) {
  int c = rd_peek(r);
  if (c < 0) return c;
  if (r->mem)
    r->mem_pos++;
  else
    r->pos++;
  if (c == '\n') {
    r->line++;
    r->col = 1;
  } else {
    r->col++;
  }
  return c;
}

/* ---- parse state ---------------------------------------------------------- */

typedef struct {
  reader *r;
  const hwt_samples_options *o;
  hwt_samples *s;
  char *err;
  size_t errlen;
  int64_t line; /* of the sample being parsed */
  /* the sample being parsed */
  vec tokens;   /* int32: one per vertex */
  vec features; /* float: width per vertex */
  vec ccount;   /* int64: children per vertex ("children") */
  vec clist;    /* int32: children, flat */
  vec edges;    /* int32 pairs (parent, child) */
  vec scratch;  /* int64: validation work space */
  int64_t n_tokens, n_features, n_lists, n_given;
  int has_tokens, has_features, has_children, has_edges, has_n, chain;
} parser;

/* The message of syntax() and problem(); returns HWT_EINVAL so a caller can
 * `return syntax(...)`. */
static int report(parser *p, int at_reader, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int report(parser *p, int at_reader, const char *fmt, ...) {
  char what[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (!p->err || !p->errlen) return HWT_EINVAL;
  /* A sample's line ended early: the reader has consumed the newline and
   * stands on the next line, but the problem is the sample's. */
  if (at_reader && p->r->line == p->line)
    snprintf(p->err, p->errlen, "line %lld, column %lld: %s", (long long)p->r->line,
             (long long)p->r->col, what);
  else
    snprintf(p->err, p->errlen, "line %lld: %s", (long long)p->line, what);
  return HWT_EINVAL;
}
/* Malformed text, where the reader stands. */
#define syntax(p, ...) report(p, 1, __VA_ARGS__)
/* Well-formed JSON that is not a valid sample: the sample's line. */
#define problem(p, ...) report(p, 0, __VA_ARGS__)

static int oom(parser *p) {
  if (p->err && p->errlen) snprintf(p->err, p->errlen, "out of memory reading the samples");
  return HWT_ENOMEM;
}

/* Blanks inside a line; a newline inside a sample is an error (one sample
 * per line). */
static void skip_blanks(parser *p) {
  for (;;) {
    int c = rd_peek(p->r);
    if (c != ' ' && c != '\t' && c != '\r') return;
    rd_get(p->r);
  }
}

static int describe(int c, char *buf, size_t n) {
  if (c < 0)
    snprintf(buf, n, "the end of the file");
  else if (c == '\n')
    snprintf(buf, n, "the end of the line (one sample per line)");
  else if (c >= 32 && c < 127)
    snprintf(buf, n, "'%c'", c);
  else
    snprintf(buf, n, "byte 0x%02x", c);
  return HWT_EINVAL;
}

static int expect(parser *p, int want) {
  skip_blanks(p);
  int c = rd_peek(p->r);
  if (c == want) {
    rd_get(p->r);
    return HWT_OK;
  }
  char got[64];
  describe(c, got, sizeof got);
  return syntax(p, "expected '%c', got %s", want, got);
}

/* A JSON array or object, element by element: open_container returns 1
 * for an empty one (its close consumed), 0 when an element follows;
 * after_element, called after each element, 0 when another follows (','),
 * 1 at the close; both return the syntax error for anything else. */
static int open_container(parser *p, int open, int close) {
  int st = expect(p, open);
  if (st < 0) return st;
  skip_blanks(p);
  if (rd_peek(p->r) != close) return 0;
  rd_get(p->r);
  return 1;
}

static int after_element(parser *p, int close) {
  skip_blanks(p);
  int c = rd_get(p->r);
  if (c == ',') return 0;
  if (c == close) return 1;
  char got[64];
  describe(c, got, sizeof got);
  return syntax(p, "expected ',' or '%c', got %s", close, got);
}

/* A string; its first (keylen - 1) bytes go to key when given. */
static int parse_string(parser *p, char *key, size_t keylen) {
  int st = expect(p, '"');
  if (st < 0) return st;
  size_t k = 0;
  for (;;) {
    int c = rd_get(p->r);
    if (c < 0 || c == '\n') return syntax(p, "unterminated string");
    if (c == '"') break;
    if (c < 0x20) return syntax(p, "control character in a string");
    if (c == '\\') {
      int e = rd_get(p->r);
      if (e == 'u') {
        for (int i = 0; i < 4; i++) {
          int h = rd_get(p->r);
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
            return syntax(p, "bad \\u escape in a string");
        }
        c = '?';
      } else if (e == '"' || e == '\\' || e == '/') {
        c = e;
      } else if (e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        c = ' ';
      } else {
        return syntax(p, "bad escape in a string");
      }
    }
    if (key && k + 1 < keylen) key[k++] = (char)c;
  }
  if (key && keylen) key[k] = '\0';
  return HWT_OK;
}

/* A JSON number's characters into buf; *is_int when it has no fraction or
 * exponent. */
static int scan_number(parser *p, char *buf, size_t n, int *is_int) {
  size_t k = 0;
  *is_int = 1;
  for (;;) {
    int c = rd_peek(p->r);
    int digit = c >= '0' && c <= '9';
    if (!(digit || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) break;
    if (!digit && c != '-') *is_int = 0;
    if (k + 1 >= n) return syntax(p, "number too long");
    buf[k++] = (char)rd_get(p->r);
  }
  buf[k] = '\0';
  if (k == 0) return syntax(p, "expected a number");
  /* JSON's grammar: no leading '+', no leading zeros, digits around '.' */
  const char *q = buf + (buf[0] == '-');
  if (!(*q >= '0' && *q <= '9') || (q[0] == '0' && q[1] >= '0' && q[1] <= '9'))
    return syntax(p, "malformed number \"%s\"", buf);
  return HWT_OK;
}

static int parse_literal(parser *p, const char *word) {
  for (const char *w = word; *w; w++)
    if (rd_get(p->r) != *w) return syntax(p, "expected %s", word);
  return HWT_OK;
}

/* "null" when next: consumes it and returns 1; 0 otherwise. */
static int take_null(parser *p, int *st) {
  skip_blanks(p);
  if (rd_peek(p->r) != 'n') return 0;
  *st = parse_literal(p, "null");
  return 1;
}

/* An integer (no fraction or exponent) that fits int64. */
static int parse_int(parser *p, int64_t *out, const char *what) {
  char buf[64];
  int is_int, st;
  skip_blanks(p);
  int c = rd_peek(p->r);
  if (!(c == '-' || (c >= '0' && c <= '9'))) {
    char got[64];
    describe(c, got, sizeof got);
    return syntax(p, "%s must be an integer, got %s", what, got);
  }
  if ((st = scan_number(p, buf, sizeof buf, &is_int)) < 0) return st;
  if (!is_int) return syntax(p, "%s must be an integer, got %s", what, buf);
  errno = 0;
  long long v = strtoll(buf, NULL, 10);
  if (errno == ERANGE) return syntax(p, "%s %s is out of range", what, buf);
  *out = v;
  return HWT_OK;
}

static int skip_value(parser *p, int depth);

static int skip_container(parser *p, int depth, int open, int close) {
  if (depth > 64) return syntax(p, "values nested more than 64 deep");
  int st = open_container(p, open, close);
  while (st == 0) {
    if (open == '{') {
      if ((st = parse_string(p, NULL, 0)) < 0 || (st = expect(p, ':')) < 0) return st;
    }
    if ((st = skip_value(p, depth + 1)) < 0) return st;
    st = after_element(p, close);
  }
  return st < 0 ? st : HWT_OK;
}

static int skip_value(parser *p, int depth) {
  skip_blanks(p);
  int c = rd_peek(p->r), is_int;
  char buf[64];
  if (c == '"') return parse_string(p, NULL, 0);
  if (c == '{') return skip_container(p, depth, '{', '}');
  if (c == '[') return skip_container(p, depth, '[', ']');
  if (c == 't') return parse_literal(p, "true");
  if (c == 'f') return parse_literal(p, "false");
  if (c == 'n') return parse_literal(p, "null");
  if (c == '-' || (c >= '0' && c <= '9')) return scan_number(p, buf, sizeof buf, &is_int);
  char got[64];
  describe(c, got, sizeof got);
  return syntax(p, "expected a value, got %s", got);
}

/* Calls item(p, index) for each element of an array; item parses it. */
static int parse_array(parser *p, int (*item)(parser *, int64_t), int64_t *count) {
  int64_t i = 0;
  int st = open_container(p, '[', ']');
  while (st == 0) {
    if ((st = item(p, i)) < 0) return st;
    i++;
    st = after_element(p, ']');
  }
  if (st < 0) return st;
  *count = i;
  return HWT_OK;
}

/* ---- the sample's fields -------------------------------------------------- */

static int vertex_limit(parser *p, int64_t index) {
  if (index < p->o->max_vertices) return HWT_OK;
  return problem(p, "a sample of more than %lld vertices, the limit per sample "
                 "(max_vertices)", (long long)p->o->max_vertices);
}

static int edge_limit(parser *p, int64_t n) {
  if (n <= p->o->max_edges) return HWT_OK;
  return problem(p, "a sample of more than %lld child links, the limit per sample "
                 "(max_edges)", (long long)p->o->max_edges);
}

static int token_item(parser *p, int64_t i) {
  int st = vertex_limit(p, i);
  if (st < 0) return st;
  int32_t tok = -1;
  if (!take_null(p, &st)) {
    int64_t v;
    if ((st = parse_int(p, &v, "a token")) < 0) return st;
    if (v < 0) return problem(p, "vertex %lld: token %lld is negative", (long long)i,
                              (long long)v);
    if (p->o->input == HWT_DYN_INPUT_TOKENS && v >= p->o->vocab)
      return problem(p, "vertex %lld: token %lld is outside the vocabulary of %lld",
                     (long long)i, (long long)v, (long long)p->o->vocab);
    if (v > INT32_MAX) return problem(p, "vertex %lld: token %lld is too large", (long long)i,
                                      (long long)v);
    tok = (int32_t)v;
  } else if (st < 0) {
    return st;
  }
  return vec_push(&p->tokens, &tok) < 0 ? oom(p) : HWT_OK;
}

static int feature_value(parser *p, int64_t j) {
  char buf[64];
  int is_int, st;
  int64_t v = p->n_features; /* the vertex this row belongs to */
  if (j >= p->s->width)
    return problem(p, "vertex %lld: feature row longer than the vertex input's %d values",
                   (long long)v, p->s->width);
  skip_blanks(p);
  int c = rd_peek(p->r);
  if (!(c == '-' || (c >= '0' && c <= '9'))) {
    char got[64];
    describe(c, got, sizeof got);
    return syntax(p, "a feature must be a number, got %s", got);
  }
  if ((st = scan_number(p, buf, sizeof buf, &is_int)) < 0) return st;
  float f = strtof(buf, NULL);
  return vec_push(&p->features, &f) < 0 ? oom(p) : HWT_OK;
}

static int feature_item(parser *p, int64_t i) {
  int st = vertex_limit(p, i);
  if (st < 0) return st;
  const int width = p->s->width;
  p->n_features = i;
  if (width <= 0) return skip_value(p, 0); /* the model reads no feature rows */
  if (take_null(p, &st)) {
    if (st < 0) return st;
    if (vec_reserve(&p->features, p->features.n + width) < 0) return oom(p);
    memset((float *)p->features.p + p->features.n, 0, (size_t)width * sizeof(float));
    p->features.n += width;
    return HWT_OK;
  }
  int64_t got = 0;
  if ((st = parse_array(p, feature_value, &got)) < 0) return st;
  if (got != width)
    return problem(p, "vertex %lld: feature row of %lld values; the vertex input takes %d",
                   (long long)i, (long long)got, width);
  return HWT_OK;
}

static int child_value(parser *p, int64_t j) {
  int64_t v;
  int st;
  if ((st = edge_limit(p, p->clist.n + 1)) < 0) return st;
  if ((st = parse_int(p, &v, "a child")) < 0) return st;
  if (v < INT32_MIN || v > INT32_MAX) v = INT32_MAX; /* reported as out of range below */
  int32_t c = (int32_t)v;
  (void)j;
  return vec_push(&p->clist, &c) < 0 ? oom(p) : HWT_OK;
}

static int children_item(parser *p, int64_t i) {
  int st = vertex_limit(p, i);
  if (st < 0) return st;
  int64_t got = 0;
  if ((st = parse_array(p, child_value, &got)) < 0) return st;
  return vec_push(&p->ccount, &got) < 0 ? oom(p) : HWT_OK;
}

static int edge_end(parser *p, int64_t j) {
  int64_t v;
  int st;
  if (j >= 2) return syntax(p, "an edge is [parent, child]: two vertices");
  if ((st = parse_int(p, &v, "an edge's vertex")) < 0) return st;
  if (v < INT32_MIN || v > INT32_MAX) v = INT32_MAX;
  int32_t c = (int32_t)v;
  return vec_push(&p->edges, &c) < 0 ? oom(p) : HWT_OK;
}

static int edge_item(parser *p, int64_t i) {
  int st = edge_limit(p, i + 1);
  if (st < 0) return st;
  int64_t got = 0;
  if ((st = parse_array(p, edge_end, &got)) < 0) return st;
  if (got != 2) return syntax(p, "an edge is [parent, child]: two vertices");
  return HWT_OK;
}

static void reset_sample(parser *p) {
  p->tokens.n = p->features.n = p->ccount.n = p->clist.n = p->edges.n = 0;
  p->n_tokens = p->n_features = p->n_lists = p->n_given = 0;
  p->has_tokens = p->has_features = p->has_children = p->has_edges = p->has_n = 0;
  p->chain = 0;
}

/* A sample's array field: at most once per sample, each element parsed by
 * item; the element count goes to *count when the caller keeps it. */
static int array_field(parser *p, const char *key, int *seen, int (*item)(parser *, int64_t),
                       int64_t *count) {
  if (*seen) return problem(p, "\"%s\" given twice", key);
  *seen = 1;
  int64_t n = 0;
  int st = parse_array(p, item, &n);
  if (count) *count = n;
  return st;
}

static int parse_field(parser *p, const char *key) {
  int st;
  if (!strcmp(key, "tokens")) return array_field(p, key, &p->has_tokens, token_item, &p->n_tokens);
  if (!strcmp(key, "features"))
    return array_field(p, key, &p->has_features, feature_item, &p->n_features);
  if (!strcmp(key, "children"))
    return array_field(p, key, &p->has_children, children_item, &p->n_lists);
  if (!strcmp(key, "edges")) return array_field(p, key, &p->has_edges, edge_item, NULL);
  if (!strcmp(key, "chain")) {
    skip_blanks(p);
    int c = rd_peek(p->r);
    if (c == 't') {
      p->chain = 1;
      return parse_literal(p, "true");
    }
    if (c == 'f') return parse_literal(p, "false");
    return syntax(p, "\"chain\" must be true or false");
  }
  if (!strcmp(key, "n")) {
    int64_t v;
    if ((st = parse_int(p, &v, "\"n\"")) < 0) return st;
    if (v < 0) return problem(p, "\"n\" must be >= 0, got %lld", (long long)v);
    if ((st = vertex_limit(p, v - 1)) < 0) return st;
    p->has_n = 1;
    p->n_given = v;
    return HWT_OK;
  }
  if (!strcmp(key, "id") || !strcmp(key, "label")) return skip_value(p, 0);
  return problem(p, "unknown key \"%s\" (a sample has tokens, features, children, edges, "
                 "chain, n, id, label)", key);
}

/* ---- one whole sample ------------------------------------------------------- */

/* The vertex count every given array agrees on, or an error. */
static int vertex_count(parser *p, int64_t *n) {
  struct {
    int given;
    int64_t n;
    const char *name;
  } src[] = {{p->has_n, p->n_given, "\"n\""},
             {p->has_tokens, p->n_tokens, "\"tokens\""},
             {p->has_features, p->n_features, "\"features\""},
             {p->has_children, p->n_lists, "\"children\""}};
  int first = -1;
  for (int i = 0; i < 4; i++) {
    if (!src[i].given) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    if (src[i].n != src[first].n)
      return problem(p, "%s gives %lld vertices, %s %lld", src[first].name,
                     (long long)src[first].n, src[i].name, (long long)src[i].n);
  }
  if (first < 0)
    return problem(p, "no vertices: a sample needs \"tokens\", \"features\", \"children\" "
                   "or \"n\"");
  *n = src[first].n;
  return HWT_OK;
}

static int grow_set(parser *p, int64_t n, int64_t e) {
  hwt_samples *s = p->s;
  int64_t want_v = s->n_vertices + n, want_e = s->n_edges + e, want_s = s->count + 1;
  int64_t per_vertex = (int64_t)sizeof(int64_t) + (s->input == HWT_DYN_INPUT_TOKENS ? 4 : 0) +
                       (int64_t)s->width * 4;
  int64_t bytes = want_v * per_vertex + want_e * 4 + want_s * 16;
  if (bytes > p->o->max_total_bytes)
    return problem(p, "the samples so far need %lld MiB, more than the %lld MiB limit "
                   "(max_total_bytes)", (long long)(bytes >> 20),
                   (long long)(p->o->max_total_bytes >> 20));
  if (want_s > p->o->max_samples)
    return problem(p, "more than %lld samples, the limit per file (max_samples)",
                   (long long)p->o->max_samples);
  if (want_s + 1 > s->cap_samples) {
    int64_t cap = s->cap_samples ? s->cap_samples * 2 : 1024;
    while (cap < want_s + 1) cap *= 2;
    int64_t *vo = realloc(s->vertex_off, (size_t)cap * sizeof *vo);
    if (!vo) return oom(p);
    s->vertex_off = vo;
    int64_t *ln = realloc(s->lines, (size_t)cap * sizeof *ln);
    if (!ln) return oom(p);
    s->lines = ln;
    s->cap_samples = cap;
  }
  if (want_v + 1 > s->cap_vertices) {
    int64_t cap = s->cap_vertices ? s->cap_vertices : 4096;
    while (cap < want_v + 1) cap *= 2;
    int64_t *co = realloc(s->child_off, (size_t)cap * sizeof *co);
    if (!co) return oom(p);
    s->child_off = co;
    if (s->input == HWT_DYN_INPUT_TOKENS) {
      int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
      if (!t) return oom(p);
      s->tokens = t;
    }
    if (s->input == HWT_DYN_INPUT_FEATURES) {
      float *f = realloc(s->features, (size_t)cap * (size_t)s->width * sizeof *f);
      if (!f) return oom(p);
      s->features = f;
    }
    s->cap_vertices = cap;
  }
  if (want_e > s->cap_edges) {
    int64_t cap = s->cap_edges ? s->cap_edges : 4096;
    while (cap < want_e) cap *= 2;
    int32_t *c = realloc(s->children, (size_t)cap * sizeof *c);
    if (!c) return oom(p);
    s->children = c;
    s->cap_edges = cap;
  }
  s->bytes = bytes;
  return HWT_OK;
}

/* Describes a cycle among the vertices Kahn's algorithm left (left[v] = 1):
 * each of them still waits for a child that is left too, so walking such
 * children from any of them must come back to a vertex already seen. */
static int report_cycle(parser *p, const int64_t *off, const int32_t *ch, int64_t n,
                        const unsigned char *left) {
  int64_t *seen_at = (int64_t *)p->scratch.p; /* reuse: n entries, -1 unseen */
  for (int64_t v = 0; v < n; v++) seen_at[v] = -1;
  int64_t start = 0;
  while (!left[start]) start++;
  int64_t v = start, step = 0;
  /* path[k] kept in the second half of scratch */
  int64_t *path = seen_at + n;
  while (seen_at[v] < 0) {
    seen_at[v] = step;
    path[step++] = v;
    int64_t next = -1;
    for (int64_t k = off[v]; k < off[v + 1]; k++)
      if (left[ch[k]]) {
        next = ch[k];
        break;
      }
    v = next;
  }
  char text[160] = "";
  size_t len = 0;
  int64_t first = seen_at[v], shown = 0;
  for (int64_t k = first; k < step && len + 24 < sizeof text; k++, shown++)
    len += (size_t)snprintf(text + len, sizeof text - len, "%lld -> ", (long long)path[k]);
  if (len + 24 < sizeof text)
    snprintf(text + len, sizeof text - len, "%lld", (long long)v);
  else
    snprintf(text + len, sizeof text - len, "...");
  if (step - first == 1)
    return problem(p, "cycle: vertex %lld lists itself as a child", (long long)v);
  return problem(p, "cycle through vertices %s (each lists the next as a child)", text);
}

/* Children in CSR (local indices) for the sample into the set; validates. */
static int finish_sample(parser *p) {
  hwt_samples *s = p->s;
  int64_t n = 0;
  int st;
  if ((st = vertex_count(p, &n)) < 0) return st;
  if (n == 0) return problem(p, "empty sample: no vertices");
  if ((st = vertex_limit(p, n - 1)) < 0) return st;
  if (p->has_children + p->has_edges + p->chain > 1)
    return problem(p, "give one of \"children\", \"edges\" and \"chain\"");
  if (s->input == HWT_DYN_INPUT_TOKENS && !p->has_tokens)
    return problem(p, "no \"tokens\": the model's vertex input is a token id per vertex");
  if (s->input == HWT_DYN_INPUT_FEATURES && !p->has_features)
    return problem(p, "no \"features\": the model's vertex input is a feature row per "
                   "vertex");
  int64_t e = p->has_children ? p->clist.n : p->has_edges ? p->edges.n / 2 : p->chain ? n - 1 : 0;
  if ((st = grow_set(p, n, e)) < 0) return st;
  const int64_t v0 = s->n_vertices, e0 = s->n_edges;
  int64_t *off = s->child_off + v0; /* local CSR: off[0] = e0 */
  int32_t *ch = s->children + e0;
  if (p->has_children) {
    off[0] = e0;
    for (int64_t v = 0; v < n; v++) off[v + 1] = off[v] + ((int64_t *)p->ccount.p)[v];
    memcpy(ch, p->clist.p, (size_t)e * sizeof *ch);
  } else if (p->has_edges) {
    /* counting sort by parent, stable: a parent's children keep the order
     * the edges list them in */
    const int32_t *ed = p->edges.p;
    for (int64_t v = 0; v <= n; v++) off[v] = 0;
    for (int64_t k = 0; k < e; k++) {
      int32_t par = ed[2 * k];
      if (par < 0 || par >= n)
        return problem(p, "edge %lld names parent %lld, but the sample has %lld vertices",
                       (long long)k, (long long)par, (long long)n);
      off[par + 1]++;
    }
    off[0] = e0;
    for (int64_t v = 0; v < n; v++) off[v + 1] += off[v];
    if (vec_reserve(&p->scratch, n + 1) < 0) return oom(p);
    int64_t *fill = p->scratch.p;
    for (int64_t v = 0; v < n; v++) fill[v] = off[v];
    for (int64_t k = 0; k < e; k++) s->children[fill[ed[2 * k]]++] = ed[2 * k + 1];
  } else {
    off[0] = e0;
    for (int64_t v = 0; v < n; v++) off[v + 1] = off[v] + (p->chain && v > 0);
    for (int64_t v = 1; p->chain && v < n; v++) ch[v - 1] = (int32_t)(v - 1);
  }
  /* offsets stored globally; validate with local indices */
  const int32_t *cs = s->children;
  for (int64_t v = 0; v < n; v++) {
    int64_t deg = off[v + 1] - off[v];
    if (p->o->arity > 0 && deg > p->o->arity)
      return problem(p, "vertex %lld has %lld children; the vertex function takes at most %d "
                     "(its arity)", (long long)v, (long long)deg, p->o->arity);
    for (int64_t k = off[v]; k < off[v + 1]; k++)
      if (cs[k] < 0 || cs[k] >= n)
        return problem(p, "vertex %lld lists child %lld, but the sample has %lld vertices "
                       "(0..%lld)", (long long)v, (long long)cs[k], (long long)n,
                       (long long)(n - 1));
  }
  /* Kahn: a vertex is done once its children are */
  if (vec_reserve(&p->scratch, 3 * n + 2) < 0) return oom(p);
  int64_t *pending = p->scratch.p;      /* [n] */
  int64_t *poff = pending + n;          /* [n + 1] parent CSR offsets */
  int64_t *queue = poff + n + 1;        /* [n] reuses nothing else */
  int32_t *parents = malloc((size_t)(e > 0 ? e : 1) * sizeof *parents);
  unsigned char *left = calloc((size_t)n, 1);
  if (!parents || !left) {
    free(parents);
    free(left);
    return oom(p);
  }
  for (int64_t v = 0; v <= n; v++) poff[v] = 0;
  for (int64_t v = 0; v < n; v++) {
    pending[v] = off[v + 1] - off[v];
    for (int64_t k = off[v]; k < off[v + 1]; k++) poff[cs[k] + 1]++;
  }
  for (int64_t v = 0; v < n; v++) poff[v + 1] += poff[v];
  for (int64_t v = 0; v < n; v++)
    for (int64_t k = off[v]; k < off[v + 1]; k++) parents[poff[cs[k]]++] = (int32_t)v;
  for (int64_t v = n; v > 0; v--) poff[v] = poff[v - 1];
  poff[0] = 0;
  int64_t head = 0, tail = 0;
  for (int64_t v = 0; v < n; v++)
    if (pending[v] == 0) queue[tail++] = v;
  while (head < tail) {
    int64_t v = queue[head++];
    for (int64_t k = poff[v]; k < poff[v + 1]; k++)
      if (--pending[parents[k]] == 0) queue[tail++] = parents[k];
  }
  free(parents);
  if (tail < n) {
    for (int64_t v = 0; v < n; v++) left[v] = pending[v] > 0;
    if (vec_reserve(&p->scratch, 2 * n + 2) < 0) {
      free(left);
      return oom(p);
    }
    /* off is global-based; rebase a copy for the walk */
    int64_t *loc = malloc((size_t)(n + 1) * sizeof *loc);
    if (!loc) {
      free(left);
      return oom(p);
    }
    for (int64_t v = 0; v <= n; v++) loc[v] = off[v] - e0;
    st = report_cycle(p, loc, ch, n, left);
    free(loc);
    free(left);
    return st;
  }
  free(left);
  /* commit */
  if (s->tokens) memcpy(s->tokens + v0, p->tokens.p, (size_t)n * sizeof(int32_t));
  if (s->features)
    memcpy(s->features + v0 * s->width, p->features.p,
           (size_t)n * (size_t)s->width * sizeof(float));
  s->vertex_off[s->count] = v0;
  s->lines[s->count] = p->line;
  s->count++;
  s->n_vertices += n;
  s->n_edges += e;
  s->vertex_off[s->count] = s->n_vertices;
  s->child_off[s->n_vertices] = s->n_edges;
  return HWT_OK;
}

static int parse_sample(parser *p) {
  int st;
  char key[64];
  reset_sample(p);
  st = open_container(p, '{', '}');
  while (st == 0) {
    skip_blanks(p);
    if ((st = parse_string(p, key, sizeof key)) < 0) return st;
    if ((st = expect(p, ':')) < 0) return st;
    skip_blanks(p);
    if ((st = parse_field(p, key)) < 0) return st;
    st = after_element(p, '}');
  }
  if (st < 0) return st;
  skip_blanks(p);
  int c = rd_peek(p->r);
  if (c >= 0 && c != '\n') {
    char got[64];
    describe(c, got, sizeof got);
    return syntax(p, "expected the end of the line after the sample, got %s", got);
  }
  return finish_sample(p);
}

void hwt_samples_options_init(hwt_samples_options *o) {
  memset(o, 0, sizeof *o);
  o->input = HWT_DYN_INPUT_NONE;
  /* SST's longest parse tree has 2 x 54 - 1 = 107 vertices; Tree-FC's 511.
   * A million vertices is far past any sentence or program tree and still
   * parses in well under a second. */
  o->max_vertices = 1000000;
  o->max_edges = 4000000;
  o->max_samples = 10000000;
  o->max_total_bytes = (int64_t)4 << 30;
}

static int check_options(const hwt_samples_options *o, char *err, size_t errlen) {
  const char *bad = NULL;
  if (o->input < HWT_DYN_INPUT_NONE || o->input > HWT_DYN_INPUT_FEATURES)
    bad = "unknown input kind";
  else if (o->input == HWT_DYN_INPUT_TOKENS && o->vocab <= 0)
    bad = "token input needs vocab > 0";
  else if (o->input == HWT_DYN_INPUT_FEATURES && o->feature_width <= 0)
    bad = "feature input needs feature_width > 0";
  else if (o->arity < 0 || o->max_vertices < 1 || o->max_edges < 0 || o->max_samples < 1 ||
           o->max_total_bytes < 1)
    bad = "negative or zero limit";
  if (!bad) return HWT_OK;
  if (err && errlen) snprintf(err, errlen, "samples options: %s", bad);
  return HWT_EINVAL;
}

static int read_all(reader *r, const hwt_samples_options *opt, hwt_samples **out, char *err,
                    size_t errlen) {
  hwt_samples_options def;
  if (!opt) {
    hwt_samples_options_init(&def);
    opt = &def;
  }
  *out = NULL;
  int st = check_options(opt, err, errlen);
  if (st < 0) return st;
  hwt_samples *s = calloc(1, sizeof *s);
  if (!s) return HWT_ENOMEM;
  s->input = opt->input;
  s->width = opt->input == HWT_DYN_INPUT_FEATURES ? opt->feature_width : 0;
  parser p = {0};
  p.r = r;
  p.o = opt;
  p.s = s;
  p.err = err;
  p.errlen = errlen;
  p.tokens.elem = sizeof(int32_t);
  p.features.elem = sizeof(float);
  p.ccount.elem = sizeof(int64_t);
  p.clist.elem = sizeof(int32_t);
  p.edges.elem = sizeof(int32_t);
  p.scratch.elem = sizeof(int64_t);
  /* an empty set still has valid offset arrays */
  st = HWT_OK;
  s->vertex_off = calloc(2, sizeof(int64_t));
  s->child_off = calloc(2, sizeof(int64_t));
  s->lines = calloc(1, sizeof(int64_t));
  if (!s->vertex_off || !s->child_off || !s->lines) st = HWT_ENOMEM;
  s->cap_samples = 1;
  s->cap_vertices = 2;
  while (st == HWT_OK) {
    skip_blanks(&p);
    int c = rd_peek(r);
    if (c < 0) break;
    if (c == '\n') {
      rd_get(r);
      continue;
    }
    p.line = r->line;
    st = parse_sample(&p);
    if (st < 0) break;
    c = rd_peek(r);
    if (c == '\n') rd_get(r);
  }
  if (st == HWT_OK && r->io_error) {
    if (err && errlen) snprintf(err, errlen, "read error after line %lld", (long long)r->line);
    st = HWT_ESYS;
  }
  if (st == HWT_OK && s->count == 0) {
    if (err && errlen) snprintf(err, errlen, "no samples: every line is blank");
    st = HWT_EINVAL;
  }
  HWT_FREE_ALL(p.tokens.p, p.features.p, p.ccount.p, p.clist.p, p.edges.p, p.scratch.p);
  if (st < 0) {
    hwt_samples_destroy(s);
    return st;
  }
  *out = s;
  return HWT_OK;
}

int hwt_samples_parse(const char *text, size_t len, const hwt_samples_options *o,
                      hwt_samples **out, char *err, size_t errlen) {
  if (!out || (!text && len)) return HWT_EINVAL;
  reader *r = calloc(1, sizeof *r);
  if (!r) return HWT_ENOMEM;
  r->mem = text ? text : "";
  r->mem_len = len;
  r->line = r->col = 1;
  int st = read_all(r, o, out, err, errlen);
  free(r);
  return st;
}

int hwt_samples_read(const char *path, const hwt_samples_options *o, hwt_samples **out,
                     char *err, size_t errlen) {
  if (!out || !path) return HWT_EINVAL;
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (err && errlen) snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return HWT_ESYS;
  }
  reader *r = calloc(1, sizeof *r);
  if (!r) {
    fclose(f);
    return HWT_ENOMEM;
  }
  r->f = f;
  r->line = r->col = 1;
  int st = read_all(r, o, out, err, errlen);
  free(r);
  fclose(f);
  return st;
}

void hwt_samples_destroy(hwt_samples *s) {
  if (!s) return;
  HWT_FREE_ALL(s->vertex_off, s->child_off, s->children, s->tokens, s->features, s->lines);
  free(s);
}

int64_t hwt_samples_count(const hwt_samples *s) { return s ? s->count : 0; }
int64_t hwt_samples_n_vertices(const hwt_samples *s) { return s ? s->n_vertices : 0; }
int64_t hwt_samples_n_edges(const hwt_samples *s) { return s ? s->n_edges : 0; }
int hwt_samples_input(const hwt_samples *s) { return s ? s->input : HWT_DYN_INPUT_NONE; }
int hwt_samples_feature_width(const hwt_samples *s) { return s ? s->width : 0; }
const int64_t *hwt_samples_vertex_offsets(const hwt_samples *s) { return s ? s->vertex_off : NULL; }
const int64_t *hwt_samples_child_offsets(const hwt_samples *s) { return s ? s->child_off : NULL; }
const int32_t *hwt_samples_children(const hwt_samples *s) { return s ? s->children : NULL; }
const int32_t *hwt_samples_tokens(const hwt_samples *s) { return s ? s->tokens : NULL; }
const float *hwt_samples_features(const hwt_samples *s) { return s ? s->features : NULL; }
const int64_t *hwt_samples_lines(const hwt_samples *s) { return s ? s->lines : NULL; }
