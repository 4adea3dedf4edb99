/* Recursive descent over a length-delimited buffer; every failure path
 * frees what it built, so a refused row leaks nothing. */
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *s;
  size_t n, pos;
  char *err;
  size_t errlen;
} hj_parser;

static int fail(hj_parser *p, const char *why) {
  if (p->errlen) snprintf(p->err, p->errlen, "offset %zu: %s", p->pos, why);
  return -1;
}

static void skip_ws(hj_parser *p) {
  while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                           p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
    p->pos++;
}

static int literal(hj_parser *p, const char *word, hj_type t, hj_value *v) {
  size_t k = strlen(word);
  if (p->n - p->pos < k || memcmp(p->s + p->pos, word, k) != 0) return fail(p, "invalid literal");
  p->pos += k;
  v->type = t;
  return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int number(hj_parser *p, hj_value *v) {
  size_t start = p->pos;
  if (p->pos < p->n && p->s[p->pos] == '-') p->pos++;
  if (p->pos >= p->n || !is_digit(p->s[p->pos])) return fail(p, "expected a digit");
  if (p->s[p->pos] == '0') {
    p->pos++;
    if (p->pos < p->n && is_digit(p->s[p->pos])) return fail(p, "leading zero in number");
  } else {
    while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
  }
  if (p->pos < p->n && p->s[p->pos] == '.') {
    p->pos++;
    if (p->pos >= p->n || !is_digit(p->s[p->pos])) return fail(p, "expected a digit after '.'");
    while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
  }
  if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    p->pos++;
    if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    if (p->pos >= p->n || !is_digit(p->s[p->pos])) return fail(p, "expected an exponent digit");
    while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
  }
  /* strtod needs a terminated copy: the buffer is length-delimited. */
  char buf[128];
  size_t k = p->pos - start;
  if (k >= sizeof buf) {
    p->pos = start;
    return fail(p, "number too long");
  }
  memcpy(buf, p->s + start, k);
  buf[k] = '\0';
  v->type = HJ_NUMBER;
  v->num = strtod(buf, NULL);
  return 0;
}

static int hex4(hj_parser *p, unsigned *out) {
  if (p->n - p->pos < 4) return fail(p, "truncated \\u escape");
  unsigned u = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + (size_t)i];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return fail(p, "bad hex digit in \\u escape");
    u = u * 16 + d;
  }
  p->pos += 4;
  *out = u;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* At the opening quote. The decoded string is never longer than its
 * source (an escape of k bytes yields at most k bytes), so one
 * allocation of the remaining length bound suffices. */
static int string(hj_parser *p, char **out, size_t *len) {
  p->pos++;
  size_t end = p->pos;
  while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
  if (end > p->n) end = p->n;
  char *o = malloc(end - p->pos + 1);
  if (!o) return fail(p, "out of memory");
  size_t k = 0;
  for (;;) {
    if (p->pos >= p->n) { free(o); return fail(p, "unterminated string"); }
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') { p->pos++; break; }
    if (c < 0x20) { free(o); return fail(p, "control character in string"); }
    if (c != '\\') { o[k++] = (char)c; p->pos++; continue; }
    p->pos++;
    if (p->pos >= p->n) { free(o); return fail(p, "unterminated string"); }
    char e = p->s[p->pos++];
    switch (e) {
      case '"': o[k++] = '"'; break;
      case '\\': o[k++] = '\\'; break;
      case '/': o[k++] = '/'; break;
      case 'b': o[k++] = '\b'; break;
      case 'f': o[k++] = '\f'; break;
      case 'n': o[k++] = '\n'; break;
      case 'r': o[k++] = '\r'; break;
      case 't': o[k++] = '\t'; break;
      case 'u': {
        unsigned cp;
        if (hex4(p, &cp)) { free(o); return -1; }
        if (cp >= 0xD800 && cp < 0xDC00) {
          unsigned lo;
          if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
            free(o);
            return fail(p, "unpaired high surrogate");
          }
          p->pos += 2;
          if (hex4(p, &lo)) { free(o); return -1; }
          if (lo < 0xDC00 || lo >= 0xE000) { free(o); return fail(p, "bad low surrogate"); }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          free(o);
          return fail(p, "unpaired low surrogate");
        }
        k += put_utf8(o + k, cp);
        break;
      }
      default:
        p->pos--;
        free(o);
        return fail(p, "bad escape in string");
    }
  }
  o[k] = '\0';
  *out = o;
  *len = k;
  return 0;
}

static int value(hj_parser *p, hj_value *v, int depth);

static int grow(hj_parser *p, hj_value *v, size_t *cap, int with_keys) {
  if (v->len < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 8;
  hj_value *items = realloc(v->items, nc * sizeof *items);
  if (!items) return fail(p, "out of memory");
  v->items = items;
  if (with_keys) {
    char **keys = realloc(v->keys, nc * sizeof *keys);
    if (!keys) return fail(p, "out of memory");
    v->keys = keys;
  }
  *cap = nc;
  return 0;
}

static int container(hj_parser *p, hj_value *v, int depth, int is_object) {
  char close = is_object ? '}' : ']';
  size_t cap = 0;
  v->type = is_object ? HJ_OBJECT : HJ_ARRAY;
  p->pos++;
  skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == close) { p->pos++; return 0; }
  for (;;) {
    if (grow(p, v, &cap, is_object)) return -1;
    char *key = NULL;
    if (is_object) {
      size_t klen;
      if (p->pos >= p->n || p->s[p->pos] != '"') return fail(p, "expected a string key");
      if (string(p, &key, &klen)) return -1;
      skip_ws(p);
      if (p->pos >= p->n || p->s[p->pos] != ':') { free(key); return fail(p, "expected ':'"); }
      p->pos++;
    }
    hj_value item;
    if (value(p, &item, depth + 1)) { free(key); return -1; }
    if (is_object) v->keys[v->len] = key;
    v->items[v->len++] = item;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ',') {
      p->pos++;
      skip_ws(p);
      continue;
    }
    if (p->pos < p->n && p->s[p->pos] == close) { p->pos++; return 0; }
    return fail(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

/* On failure *v is left freed (empty), so callers need not clean it. */
static int value(hj_parser *p, hj_value *v, int depth) {
  memset(v, 0, sizeof *v);
  if (depth > HJ_MAX_DEPTH) return fail(p, "nested too deeply");
  skip_ws(p);
  if (p->pos >= p->n) return fail(p, "unexpected end of input");
  int rc;
  switch (p->s[p->pos]) {
    case '{': rc = container(p, v, depth, 1); break;
    case '[': rc = container(p, v, depth, 0); break;
    case '"':
      v->type = HJ_STRING;
      rc = string(p, &v->str, &v->len);
      break;
    case 't': rc = literal(p, "true", HJ_TRUE, v); break;
    case 'f': rc = literal(p, "false", HJ_FALSE, v); break;
    case 'n': rc = literal(p, "null", HJ_NULL, v); break;
    default: rc = number(p, v); break;
  }
  if (rc) {
    hj_free(v);
    memset(v, 0, sizeof *v);
  }
  return rc;
}

int hj_parse(const char *text, size_t n, hj_value *out, char *err, size_t errlen) {
  hj_parser p = {text, n, 0, err, errlen};
  if (errlen) err[0] = '\0';
  if (value(&p, out, 0)) return -1;
  skip_ws(&p);
  if (p.pos != p.n) {
    hj_free(out);
    memset(out, 0, sizeof *out);
    return fail(&p, "text after the JSON value");
  }
  return 0;
}

void hj_free(hj_value *v) {
  if (!v) return;
  for (size_t i = 0; i < v->len && v->items; i++) {
    hj_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
  v->items = NULL;
  v->keys = NULL;
  v->str = NULL;
  v->len = 0;
}

const hj_value *hj_get(const hj_value *obj, const char *key) {
  if (!obj || obj->type != HJ_OBJECT) return NULL;
  for (size_t i = obj->len; i-- > 0;)
    if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
  return NULL;
}
