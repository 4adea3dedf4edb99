/* hwt_now (hwtune/clock.h): beside the pool, the lowest layer that reads
 * it, so the pool's own tests link it alone. */
#include <time.h>

#include "hwtune/clock.h"

double hwt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
