/* A small strict JSON parser (RFC 8259) for the runner's database rows:
 * the whole document becomes a tree of hj_value; anything else (trailing
 * commas, comments, NaN, leading zeros, control characters in strings,
 * nesting deeper than HJ_MAX_DEPTH, text after the value) is refused with
 * the byte offset of the first offending character. */
#ifndef HWTUNE_RUNNER_JSON_H
#define HWTUNE_RUNNER_JSON_H
#include <stddef.h>

/* Lowered graphs nest 4 deep; 64 keeps a hostile row from exhausting the
 * stack of this recursive-descent parser. */
#define HJ_MAX_DEPTH 64

typedef enum { HJ_NULL, HJ_FALSE, HJ_TRUE, HJ_NUMBER, HJ_STRING, HJ_ARRAY, HJ_OBJECT } hj_type;

typedef struct hj_value {
  hj_type type;
  double num;              /* HJ_NUMBER */
  char *str;               /* HJ_STRING: UTF-8, NUL-terminated (may hold \0 inside) */
  size_t len;              /* string bytes, or array/object element count */
  struct hj_value *items;  /* HJ_ARRAY / HJ_OBJECT: len values */
  char **keys;             /* HJ_OBJECT: len keys, in document order */
} hj_value;

/* 0 on success (free *out with hj_free); -1 with "offset N: reason" in err. */
int hj_parse(const char *text, size_t n, hj_value *out, char *err, size_t errlen);
void hj_free(hj_value *v);
/* The value of key in an object (the last one if repeated), or NULL. */
const hj_value *hj_get(const hj_value *obj, const char *key);

#endif
