/* What every C test program shares: CHECK, which reports a failed condition
 * with its place and goes on (the program returns non-zero at the end if
 * `failures`), and seeded test data (frand, 64-byte aligned buffers).
 *
 *   CHECK(x == 3);                       FAIL test.c:12: x == 3
 *   CHECK(err < tol, "n=%d err=%g", n, e) FAIL test.c:13: err < tol: n=5 err=0.1
 *
 * failures is atomic: pool and engine tests check from worker threads
 * (TSan builds). After CHECK_MAX_REPORTS failed checks the rest are only
 * counted, so a broken kernel does not print a line per element. */
#ifndef HWTUNE_TEST_CHECK_H
#define HWTUNE_TEST_CHECK_H
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_MAX_REPORTS 25

static _Atomic int failures;

/* A CHECK without a message passes an empty format. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"
__attribute__((format(printf, 4, 5), unused)) static void check_failed_(const char *file,
                                                                       int line,
                                                                       const char *cond,
                                                                       const char *fmt, ...) {
  if (atomic_fetch_add(&failures, 1) >= CHECK_MAX_REPORTS) return;
  fprintf(stderr, "FAIL %s:%d: %s", file, line, cond);
  if (fmt[0]) {
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
}

#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) check_failed_(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)

/* main's exit status: 1 after a line counting the failed checks, 0 after
 * the program's success line (printf's format and arguments). */
__attribute__((format(printf, 1, 2), unused)) static int check_verdict(const char *fmt, ...) {
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  return 0;
}

/* Uniform in [-1, 1), the same sequence in every run (an LCG: test data,
 * not statistics). */
static unsigned frand_state = 12345u;
__attribute__((unused)) static float frand(void) {
  frand_state = frand_state * 1664525u + 1013904223u;
  return (float)((frand_state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* n floats (at least one) on a 64-byte boundary, as the engine's arena
 * gives; the size rounds up to whole lines, so ASan still flags a write
 * past them. Exits on out-of-memory. */
__attribute__((unused)) static float *alloc_floats(size_t n) {
  size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (!p) {
    fputs("out of memory\n", stderr);
    exit(1);
  }
  return p;
}

#endif
