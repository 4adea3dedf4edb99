/* Marks for counting instructions under valgrind's callgrind: `hwtune check`
 * runs a counted figure between hwt_count_begin() and hwt_count_end(name),
 * so that callgrind instruments only those calls (--instr-atstart=no: the
 * Python start-up before them runs ~2x faster) and writes one profile dump
 * per figure. Outside valgrind the client requests are a few no-op
 * instructions. Built from valgrind's own header when the build machine has
 * it (Debian's valgrind package ships it); without it the marks do nothing
 * and hwt_count_marks() says so. */
#include "hwtune/bench.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HWT_HAVE_CALLGRIND 1
#endif
#endif

int hwt_count_marks(void) {
#ifdef HWT_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND ? 2 : 1;
#else
  return 0;
#endif
}

void hwt_count_begin(void) {
#ifdef HWT_HAVE_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
#endif
}

void hwt_count_end(const char *name) {
#ifdef HWT_HAVE_CALLGRIND
  CALLGRIND_DUMP_STATS_AT(name);
  CALLGRIND_STOP_INSTRUMENTATION;
#else
  (void)name;
#endif
}
