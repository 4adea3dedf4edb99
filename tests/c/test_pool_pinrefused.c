/* A machine that refuses pinning (a locked-down container, a cpuset that
 * forbids the CPU): this program defines sched_setaffinity itself, failing
 * with EPERM, and the linker takes it over libc's for the pool. The pool must
 * still create, run every region correctly, and say it is not pinned. */
#include <errno.h>
#include <sched.h>

#include "test_pool_stress.h"

static _Atomic int refusals;

int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask) {
  (void)pid, (void)size, (void)mask;
  atomic_fetch_add(&refusals, 1);
  errno = EPERM;
  return -1;
}

int main(void) {
  int cpus[1024];
  int n = hwt_allowed_cpus(cpus, 1024);
  CHECK(n >= 1, "allowed CPUs: %d", n);
  int tpt = n < 2 ? 1 : 2;
  hwt_pool_config cfg = {1, tpt, 1, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  CHECK(p != NULL, "create with pinning refused: %s", err);
  if (p) {
    CHECK(hwt_pool_pinned(p) == 0, "pool claims to be pinned although every pin was refused");
    for (int i = 0; i < tpt; i++)
      CHECK(hwt_pool_thread_cpu(p, 0, i) == -1, "thread %d reports a CPU it is not pinned to", i);
    CHECK(stress_team(p, 0, 2000, 0) == 0, "regions on the unpinned pool");
    hwt_pool_destroy(p);
  }
  /* The same through run_teams (which pins and restores the caller). */
  stress_pool("refused 2x1", n >= 2 ? 2 : 1, 1, 1, 1000, 2, 0);
  CHECK(atomic_load(&refusals) > 0, "the pool never tried to pin");
  return check_verdict("test_pool_pinrefused: ok (%d pins refused)\n",
                       atomic_load(&refusals));
}
