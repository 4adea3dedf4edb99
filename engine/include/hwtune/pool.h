/* Thread pool of executor teams.
 *
 * A pool owns n_teams x threads_per_team threads. A team is an executor: the
 * unit the engine schedules ops onto. Thread 0 of a team is its master; it
 * runs the team's loop and forks work to the team's other threads with
 * hwt_team_parallel() (a low-overhead fork-join: workers spin briefly on a
 * padded generation counter, then sleep on a futex). A region's shares are
 * claimed, not assigned: a thread runs its own share and then any share no
 * thread has started, so a worker the OS has descheduled delays a region
 * only if it was preempted in the middle of a share.
 *
 * Pinning: with pin=1 every thread is bound to one CPU of the allowed set
 * (sched_getaffinity), teams get disjoint, topologically adjacent CPUs (cores
 * sharing an L2 stay in one team). A refused pin is not fatal: the pool keeps
 * running unpinned and hwt_pool_pinned() reports 0.
 *
 * The caller's thread is the master of team 0 while inside
 * hwt_pool_run_teams(); no thread sits idle as a dedicated scheduler.
 *
 * Waiting threads spin for HWTUNE_POOL_SPIN_US microseconds (environment,
 * read at create; default 200) before sleeping; 0 when the pool has more
 * threads than allowed CPUs. Neither entry point is reentrant: a task must
 * not fork on its own team, and one pool serves one caller at a time.
 */
#ifndef HWTUNE_POOL_H
#define HWTUNE_POOL_H
#include <stddef.h>
#include "hwtune/api.h"

typedef struct hwt_pool hwt_pool;

/* Share tid of nth (0 <= tid < nth): runs exactly once per region, usually
 * on the team's thread tid but on any of its first nth threads when that one
 * is late; per-share state must be indexed by tid, not by the thread. */
typedef void (*hwt_task_fn)(void *arg, int tid, int nth);
/* Runs on the master thread of each team. */
typedef void (*hwt_team_fn)(void *arg, int team);

typedef struct {
  int n_teams;           /* >= 1 */
  int threads_per_team;  /* >= 1; n_teams * threads_per_team <= allowed CPUs if pin */
  int pin;               /* 1: bind threads to disjoint CPUs; 0: leave placement to the OS */
  const int *cpus;       /* optional explicit CPU order (length n_cpus): team t gets
                            cpus[t*threads_per_team ...]; NULL: derive from topology */
  int n_cpus;
} hwt_pool_config;

/* Returns NULL on failure and writes a one-line reason into err. */
HWT_API hwt_pool *hwt_pool_create(const hwt_pool_config *cfg, char *err, size_t errlen);
/* Only while idle (no hwt_pool_run_teams / hwt_team_parallel in flight). */
HWT_API void hwt_pool_destroy(hwt_pool *p);
HWT_API int hwt_pool_n_teams(const hwt_pool *p);
HWT_API int hwt_pool_team_size(const hwt_pool *p);
HWT_API int hwt_pool_pinned(const hwt_pool *p);           /* 1 only if every pin succeeded */
HWT_API int hwt_pool_thread_cpu(const hwt_pool *p, int team, int idx); /* -1 if unpinned */

/* Fork-join on `team` with nth threads (1 <= nth <= team size). Must be called
 * from the team's master thread (inside hwt_pool_run_teams, or from the thread
 * that created the pool for team 0 outside it). The master runs share 0 and
 * any share no worker has started, and returns when every share is done.
 * Returns HWT_OK, or HWT_EINVAL (nothing ran) for a bad team or nth. */
HWT_API int hwt_team_parallel(hwt_pool *p, int team, hwt_task_fn fn, void *arg, int nth);

/* Runs fn(arg, team) on every team's master concurrently and waits for all.
 * The calling thread is team 0's master (pinned to team 0's first CPU for the
 * duration when the pool is pinned; its previous affinity is restored).
 * Returns HWT_OK, or HWT_EINVAL if the pool is already inside run_teams. */
HWT_API int hwt_pool_run_teams(hwt_pool *p, hwt_team_fn fn, void *arg);

/* CPUs this process may run on (sched_getaffinity), in topology order: the
 * first SMT thread of every core, then the second ones, ... Returns the
 * count (or HWT_ENOMEM), writes up to max ids. */
HWT_API int hwt_allowed_cpus(int *out, int max);

#endif
