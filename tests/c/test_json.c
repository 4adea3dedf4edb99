/* The runner's JSON parser: accepted documents round-trip into the right
 * tree, and every refused one names the byte offset of its first error.
 * The parser is not part of libhwtune (engine/standalone/src/ is a separate
 * program), so it is compiled into this test directly. */
#include "../../engine/standalone/src/json.c"

#include <stdio.h>
#include <string.h>
#include "check.h"


static int parse(const char *text, hj_value *v, char *err, size_t errlen) {
  return hj_parse(text, strlen(text), v, err, errlen);
}

static void test_tree(void) {
  const char *doc = " {\"tensors\": [{\"name\": \"x\", \"shape\": [1, 64]}], \"f\": -1.5e-3,"
                    " \"t\": true, \"n\": null, \"ok\": false, \"e\": {}, \"a\": [],"
                    " \"dup\": 1, \"dup\": 2}\n";
  hj_value v;
  char err[128];
  CHECK(parse(doc, &v, err, sizeof err) == 0);
  CHECK(v.type == HJ_OBJECT && v.len == 9);
  const hj_value *t = hj_get(&v, "tensors");
  CHECK(t && t->type == HJ_ARRAY && t->len == 1);
  const hj_value *shape = hj_get(&t->items[0], "shape");
  CHECK(shape && shape->len == 2 && shape->items[1].num == 64.0);
  CHECK(!strcmp(hj_get(&t->items[0], "name")->str, "x"));
  CHECK(hj_get(&v, "f")->num == -1.5e-3);
  CHECK(hj_get(&v, "t")->type == HJ_TRUE && hj_get(&v, "ok")->type == HJ_FALSE);
  CHECK(hj_get(&v, "n")->type == HJ_NULL);
  CHECK(hj_get(&v, "e")->type == HJ_OBJECT && hj_get(&v, "e")->len == 0);
  CHECK(hj_get(&v, "a")->type == HJ_ARRAY && hj_get(&v, "a")->len == 0);
  CHECK(hj_get(&v, "dup")->num == 2.0); /* the last of repeated keys */
  CHECK(hj_get(&v, "missing") == NULL && hj_get(t, "tensors") == NULL);
  hj_free(&v);
}

static void test_strings(void) {
  hj_value v;
  char err[128];
  /* Escapes, a BMP code point (U+00E9) and a surrogate pair (U+1F600). */
  CHECK(parse("\"a\\\"b\\\\c\\/\\n\\t\\u00e9\\ud83d\\ude00\"", &v, err, sizeof err) == 0);
  CHECK(v.type == HJ_STRING);
  CHECK(v.len == 14 && !memcmp(v.str, "a\"b\\c/\n\t\xc3\xa9\xf0\x9f\x98\x80", 14));
  hj_free(&v);
  CHECK(parse("\"x\\u0000y\"", &v, err, sizeof err) == 0);
  CHECK(v.len == 3 && v.str[1] == '\0' && v.str[2] == 'y');
  hj_free(&v);
}

static void test_numbers(void) {
  static const struct {
    const char *text;
    double value;
  } ok[] = {{"0", 0}, {"-0", 0}, {"12345", 12345}, {"1e3", 1000}, {"2.5E-1", 0.25},
            {"-7.0e+2", -700}, {"9007199254740993", 9007199254740992.0}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    hj_value v;
    char err[128];
    CHECK(parse(ok[i].text, &v, err, sizeof err) == 0);
    CHECK(v.type == HJ_NUMBER && v.num == ok[i].value);
    hj_free(&v);
  }
}

/* Refused documents and the offset the error must name. */
static void test_refused(void) {
  static const struct {
    const char *text;
    const char *offset;
  } bad[] = {
      {"", "offset 0:"},
      {"[1, 2,]", "offset 6:"},           /* trailing comma */
      {"{\"a\": 1,}", "offset 8:"},
      {"{\"a\" 1}", "offset 5:"},          /* missing colon */
      {"{a: 1}", "offset 1:"},             /* unquoted key */
      {"[01]", "offset 2:"},               /* leading zero */
      {"[1.]", "offset 3:"},
      {"[-]", "offset 2:"},
      {"[1e]", "offset 3:"},
      {"NaN", "offset 0:"},
      {"tru", "offset 0:"},
      {"\"abc", "offset 4:"},              /* unterminated */
      {"\"a\tb\"", "offset 2:"},           /* raw control character */
      {"\"\\x\"", "offset 2:"},            /* bad escape */
      {"\"\\u12g4\"", "offset 3:"},
      {"\"\\ud83d\"", "offset 7:"},        /* unpaired high surrogate */
      {"\"\\ude00\"", "offset 7:"},        /* lone low surrogate */
      {"[1] [2]", "offset 4:"},            /* text after the value */
      {"[1 2]", "offset 3:"},
      {"// c\n1", "offset 0:"},            /* no comments */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hj_value v;
    char err[128];
    int rc = parse(bad[i].text, &v, err, sizeof err);
    CHECK(rc == -1);
    if (rc == -1 && strncmp(err, bad[i].offset, strlen(bad[i].offset)) != 0) {
      fprintf(stderr, "case %zu (%s): got \"%s\", expected \"%s...\"\n", i, bad[i].text, err,
              bad[i].offset);
      failures++;
    }
    if (rc == 0) hj_free(&v);
  }
}

static void test_depth_and_length(void) {
  char deep[2 * (HJ_MAX_DEPTH + 2) + 1];
  hj_value v;
  char err[128];
  /* HJ_MAX_DEPTH + 1 nested arrays (depths 0..HJ_MAX_DEPTH) are accepted... */
  int n = HJ_MAX_DEPTH + 1;
  for (int i = 0; i < n; i++) deep[i] = '[';
  for (int i = 0; i < n; i++) deep[n + i] = ']';
  deep[2 * n] = '\0';
  CHECK(parse(deep, &v, err, sizeof err) == 0);
  hj_free(&v);
  /* ...one more is refused instead of recursing without bound. */
  n++;
  for (int i = 0; i < n; i++) deep[i] = '[';
  for (int i = 0; i < n; i++) deep[n + i] = ']';
  deep[2 * n] = '\0';
  CHECK(parse(deep, &v, err, sizeof err) == -1 && strstr(err, "nested too deeply"));
  /* The length bounds the parse: a NUL-free prefix of a valid document. */
  CHECK(hj_parse("[1, 2]", 3, &v, err, sizeof err) == -1 && !strncmp(err, "offset 3:", 9));
  CHECK(hj_parse("[1, 2]garbage", 6, &v, err, sizeof err) == 0 && v.len == 2);
  hj_free(&v);
}

int main(void) {
  test_tree();
  test_strings();
  test_numbers();
  test_refused();
  test_depth_and_length();
  if (failures) {
    fprintf(stderr, "test_json: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_json: ok\n");
  return 0;
}
