/* Thread pool: fork-join stress (spinning and parked workers, varying nth,
 * several teams at once), pinning, argument checks, create/destroy churn. */
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>

#include "test_pool_stress.h"

static int allowed[1024];
static int n_allowed;

static int is_allowed(int cpu) {
  for (int i = 0; i < n_allowed; i++)
    if (allowed[i] == cpu) return 1;
  return 0;
}

typedef struct {
  hwt_pool *p;
  _Atomic int cpu_seen[STRESS_MAXT];
  _Atomic long thread_seen[STRESS_MAXT]; /* kernel thread id that ran the share */
  _Atomic int done;
} where_ctx;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Any thread of the team may run any share, so share 0 waits (up to 1 s)
 * for the others: the thread running it cannot take theirs, and each share
 * lands on a thread of its own. */
static void where_task(void *arg, int tid, int nth) {
  where_ctx *c = arg;
  atomic_store(&c->cpu_seen[tid], sched_getcpu());
  atomic_store(&c->thread_seen[tid], (long)syscall(SYS_gettid));
  if (tid == 0)
    for (double t0 = mono_s(); atomic_load(&c->done) < nth - 1 && mono_s() - t0 < 1.0;)
      sched_yield();
  else
    atomic_fetch_add(&c->done, 1);
}

static void where_team0(void *arg, int team) {
  where_ctx *c = arg;
  if (team == 0) hwt_team_parallel(c->p, 0, where_task, c, hwt_pool_team_size(c->p));
}

/* A pinned pool's threads run where hwt_pool_thread_cpu says, on distinct
 * allowed CPUs. */
static void test_pinning(void) {
  int tpt = n_allowed < STRESS_MAXT ? n_allowed : STRESS_MAXT;
  hwt_pool_config cfg = {1, tpt, 1, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  CHECK(p != NULL, "pinned 1x%d: %s", tpt, err);
  if (!p) return;
  if (!hwt_pool_pinned(p)) {
    printf("note: pinning refused here (restricted cpuset?); pool runs unpinned\n");
    for (int i = 0; i < tpt; i++) CHECK(hwt_pool_thread_cpu(p, 0, i) >= -1, "cpu id");
    hwt_pool_destroy(p);
    return;
  }
  for (int i = 0; i < tpt; i++) {
    int cpu = hwt_pool_thread_cpu(p, 0, i);
    CHECK(is_allowed(cpu), "thread %d on cpu %d, not allowed", i, cpu);
    for (int k = 0; k < i; k++) CHECK(hwt_pool_thread_cpu(p, 0, k) != cpu, "cpu %d twice", cpu);
  }
  /* A region whose shares ran on tpt distinct threads (a worker that is
   * late gives its share to another thread: try again) must have run on
   * exactly the team's pinned CPUs, the caller on thread 0's. */
  where_ctx c;
  int distinct = 0;
  for (int attempt = 0; attempt < 50 && !distinct; attempt++) {
    memset(&c, 0, sizeof c);
    c.p = p;
    CHECK(hwt_pool_run_teams(p, where_team0, &c) == HWT_OK, "run_teams");
    distinct = 1;
    for (int i = 0; i < tpt; i++)
      for (int k = 0; k < i; k++)
        distinct &= atomic_load(&c.thread_seen[i]) != atomic_load(&c.thread_seen[k]);
  }
  CHECK(distinct, "no region in 50 ran its %d shares on %d threads", tpt, tpt);
  long caller = (long)syscall(SYS_gettid);
  for (int i = 0; distinct && i < tpt; i++) {
    int cpu = atomic_load(&c.cpu_seen[i]), pinned = 0;
    for (int k = 0; k < tpt; k++) pinned |= hwt_pool_thread_cpu(p, 0, k) == cpu;
    CHECK(pinned, "share %d ran on cpu %d, no thread of the team is pinned there", i, cpu);
    for (int k = 0; k < i; k++)
      CHECK(atomic_load(&c.cpu_seen[k]) != cpu, "two threads on cpu %d", cpu);
    if (atomic_load(&c.thread_seen[i]) == caller)
      CHECK(cpu == hwt_pool_thread_cpu(p, 0, 0), "the caller ran on cpu %d, pinned to %d", cpu,
            hwt_pool_thread_cpu(p, 0, 0));
  }
  hwt_pool_destroy(p);

  /* An explicit CPU list is honoured in its order. */
  int rev[1024];
  for (int i = 0; i < n_allowed; i++) rev[i] = allowed[n_allowed - 1 - i];
  hwt_pool_config ex = {1, 1, 1, rev, n_allowed};
  p = hwt_pool_create(&ex, err, sizeof err);
  CHECK(p != NULL, "explicit list: %s", err);
  if (p) {
    CHECK(!hwt_pool_pinned(p) || hwt_pool_thread_cpu(p, 0, 0) == rev[0], "explicit cpu order");
    hwt_pool_destroy(p);
  }
  int dup[2] = {allowed[0], allowed[0]};
  hwt_pool_config dx = {2, 1, 1, dup, 2};
  p = hwt_pool_create(&dx, err, sizeof err);
  CHECK(p == NULL && strstr(err, "repeated"), "repeated CPU accepted: %s", err);
  if (p) hwt_pool_destroy(p);
}

typedef struct {
  hwt_pool *p;
  int inner_rc;
} reenter_ctx;

static void reenter_team(void *arg, int team) {
  reenter_ctx *c = arg;
  if (team == 0) c->inner_rc = hwt_pool_run_teams(c->p, reenter_team, arg);
}

static void noop_task(void *arg, int tid, int nth) {
  (void)arg, (void)tid, (void)nth;
}

static void test_bad_arguments(void) {
  char err[256];
  hwt_pool_config too_many = {n_allowed + 1, 1, 1, NULL, 0};
  hwt_pool *p = hwt_pool_create(&too_many, err, sizeof err);
  CHECK(p == NULL && strstr(err, "exceed"), "%d pinned threads on %d CPUs: '%s'", n_allowed + 1,
        n_allowed, err);
  if (p) hwt_pool_destroy(p);
  hwt_pool_config zero = {0, 1, 0, NULL, 0};
  p = hwt_pool_create(&zero, err, sizeof err);
  CHECK(p == NULL && err[0], "zero teams accepted");
  if (p) hwt_pool_destroy(p);
  /* Oversubscription is allowed unpinned. */
  hwt_pool_config over = {n_allowed + 1, 2, 0, NULL, 0};
  p = hwt_pool_create(&over, err, sizeof err);
  CHECK(p != NULL && !hwt_pool_pinned(p) && hwt_pool_thread_cpu(p, 0, 0) == -1, "unpinned: %s",
        err);
  if (!p) return;
  CHECK(hwt_team_parallel(p, 0, noop_task, NULL, 0) == HWT_EINVAL, "nth 0");
  CHECK(hwt_team_parallel(p, 0, noop_task, NULL, 3) == HWT_EINVAL, "nth > team size");
  CHECK(hwt_team_parallel(p, -1, noop_task, NULL, 1) == HWT_EINVAL, "team -1");
  CHECK(hwt_team_parallel(p, n_allowed + 1, noop_task, NULL, 1) == HWT_EINVAL, "team n");
  CHECK(hwt_team_parallel(p, 0, NULL, NULL, 1) == HWT_EINVAL, "NULL fn");
  reenter_ctx c = {p, 0};
  CHECK(hwt_pool_run_teams(p, reenter_team, &c) == HWT_OK, "run_teams");
  CHECK(c.inner_rc == HWT_EINVAL, "reentrant run_teams returned %d", c.inner_rc);
  hwt_pool_destroy(p);
}

static void test_churn(void) {
  char err[256];
  for (int i = 0; i < 150; i++) {
    int pin = (i % 3 == 0) && n_allowed >= 2;
    hwt_pool_config cfg = {1 + i % 3, 1 + (i / 3) % 3, pin, NULL, 0};
    if (pin) cfg.n_teams = 1, cfg.threads_per_team = 2;
    hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
    CHECK(p != NULL, "churn %d: %s", i, err);
    if (!p) return;
    /* Some pools run a region, some are destroyed straight away. */
    if (i % 2) CHECK(stress_team(p, 0, 3, 0) == 0, "churn %d region", i);
    hwt_pool_destroy(p);
  }
}

int main(void) {
  n_allowed = hwt_allowed_cpus(allowed, 1024);
  CHECK(n_allowed >= 1 && n_allowed <= 1024, "allowed cpus: %d", n_allowed);
  for (int i = 0; i < n_allowed; i++)
    for (int k = 0; k < i; k++) CHECK(allowed[i] != allowed[k], "cpu %d listed twice", allowed[i]);

  int tpt = n_allowed < 4 ? n_allowed : 4;
  if (tpt >= 2) stress_pool("pinned", 1, tpt, 1, 20000, 3, 0);
  stress_pool("oversubscribed 1x4", 1, 4, 0, 5000, 3, 0);
  stress_pool("3 teams x 2", 3, 2, 0, 4000, 5, 0);
  /* Naps longer than the spin budget: workers park between regions. */
  stress_pool("parking", 2, 2, 0, 1500, 2, 400);
  setenv("HWTUNE_POOL_SPIN_US", "0", 1);
  stress_pool("spin 0", 2, 3, 0, 4000, 3, 0);
  unsetenv("HWTUNE_POOL_SPIN_US");

  test_pinning();
  test_bad_arguments();
  test_churn();
  return check_verdict("test_pool: ok\n");
}
