/* One line of error text into a caller's buffer: the engine's parts and the
 * stand-alone runner all refuse with a status plus a message in the
 * caller's err[errlen], and each file names its own refusal as a one-line
 * macro over this function (the status it returns). Internal, not part of
 * the library's API; header-only, because the pool's test build links
 * engine/threads alone and the runner sees only the library's exported
 * symbols. */
#ifndef HWTUNE_ERRORF_H
#define HWTUNE_ERRORF_H
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Formats into err (nothing when err is NULL or errlen is 0) and returns
 * status, so that a check reads `return hwt_errorf(HWT_EINVAL, err, errlen,
 * "...", ...)`. */
static inline int hwt_errorf(int status, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int hwt_errorf(int status, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return status;
}

#endif
