/* The pool on its portable parking fallback (mutex + condition variable)
 * instead of futexes: this file defines hwt_park_wait/hwt_park_wake itself,
 * so the linker takes these over the library's futex versions. */
#define HWT_PARK_FORCE_CONDVAR 1
#include "../../engine/threads/park.c"
#include "test_pool_stress.h"

int main(void) {
  /* Spin budget 0: every wait goes through the fallback. */
  setenv("HWTUNE_POOL_SPIN_US", "0", 1);
  stress_pool("condvar 1x4", 1, 4, 0, 3000, 2, 0);
  stress_pool("condvar 3x2", 3, 2, 0, 2000, 3, 0);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  else printf("test_pool_condvar: ok\n");
  return failures != 0;
}
