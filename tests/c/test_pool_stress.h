/* Fork-join stress shared by test_pool.c (futex parking) and
 * test_pool_condvar.c (the condition-variable fallback): thousands of
 * regions with varying nth, parked and spinning workers, several teams at
 * once; every share must run exactly once and its writes must be visible to
 * the master after the join. */
#ifndef HWTUNE_TEST_POOL_STRESS_H
#define HWTUNE_TEST_POOL_STRESS_H
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwtune/pool.h"
#include "check.h"


#define STRESS_MAXT 8

typedef struct {
  _Alignas(64) _Atomic long hits; /* atomic: counts runs even if tids collide */
  long plain;                     /* plain: only its own tid writes it */
} stress_cell;

typedef struct {
  stress_cell cell[STRESS_MAXT];
  long region;     /* written by the master before each fork */
  _Atomic int bad; /* a task saw an impossible tid/nth */
} stress_job;

static void stress_task(void *arg, int tid, int nth) {
  stress_job *j = arg;
  if (tid < 0 || tid >= nth || nth > STRESS_MAXT) {
    atomic_store(&j->bad, 1);
    return;
  }
  atomic_fetch_add(&j->cell[tid].hits, 1);
  j->cell[tid].plain += j->region + tid;
}

/* Runs `regions` regions on `team` with nth cycling through 1..tpt, and
 * checks every share ran once with its writes visible. Sleeps `nap_us`
 * before every 64th region so that workers park. Returns failures. */
static int stress_team(hwt_pool *p, int team, long regions, int nap_us) {
  int tpt = hwt_pool_team_size(p), fails = 0;
  stress_job *j = aligned_alloc(64, sizeof *j);
  long want_hits[STRESS_MAXT] = {0}, want_plain[STRESS_MAXT] = {0};
  memset(j, 0, sizeof *j);
  for (long r = 0; r < regions; r++) {
    int nth = 1 + (int)((r * 7 + r / 5) % tpt);
    if (nap_us && r % 64 == 0) usleep((useconds_t)nap_us);
    j->region = r;
    if (hwt_team_parallel(p, team, stress_task, j, nth) != HWT_OK) fails++;
    for (int t = 0; t < nth; t++) {
      want_hits[t]++;
      want_plain[t] += r + t;
      /* Checked every region: a lost or doubled share shows up here. */
      if (atomic_load(&j->cell[t].hits) != want_hits[t] || j->cell[t].plain != want_plain[t]) {
        fails++;
        fprintf(stderr, "FAIL team %d region %ld nth %d tid %d: hits %ld/%ld\n", team, r, nth, t,
                atomic_load(&j->cell[t].hits), want_hits[t]);
        r = regions;
        break;
      }
    }
  }
  if (atomic_load(&j->bad)) fails++;
  free(j);
  return fails;
}

typedef struct {
  hwt_pool *p;
  long regions;
  int nap_us;
  _Atomic int fails;
  _Atomic long calls[STRESS_MAXT];
} stress_teams_ctx;

static void stress_team_fn(void *arg, int team) {
  stress_teams_ctx *c = arg;
  if (team < 0 || team >= hwt_pool_n_teams(c->p) || team >= STRESS_MAXT) {
    atomic_fetch_add(&c->fails, 1);
    return;
  }
  atomic_fetch_add(&c->calls[team], 1);
  atomic_fetch_add(&c->fails, stress_team(c->p, team, c->regions, c->nap_us));
}

/* The whole stress on one pool: team 0 alone from the creating thread, then
 * every team at once through hwt_pool_run_teams, `rounds` times. */
static void stress_pool(const char *what, int n_teams, int tpt, int pin, long regions, int rounds,
                        int nap_us) {
  hwt_pool_config cfg = {n_teams, tpt, pin, NULL, 0};
  char err[256];
  hwt_pool *p = hwt_pool_create(&cfg, err, sizeof err);
  CHECK(p != NULL, "%s: create %dx%d pin=%d: %s", what, n_teams, tpt, pin, err);
  if (!p) return;
  CHECK(stress_team(p, 0, regions, nap_us) == 0, "%s: team 0 from the creator", what);
  stress_teams_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p, c.regions = regions / 4 + 1, c.nap_us = nap_us;
  for (int r = 0; r < rounds; r++) CHECK(hwt_pool_run_teams(p, stress_team_fn, &c) == HWT_OK,
                                         "%s: run_teams", what);
  CHECK(atomic_load(&c.fails) == 0, "%s: %d failures inside run_teams", what,
        atomic_load(&c.fails));
  for (int t = 0; t < n_teams && t < STRESS_MAXT; t++)
    CHECK(atomic_load(&c.calls[t]) == rounds, "%s: team %d ran %ld of %d times", what, t,
          atomic_load(&c.calls[t]), rounds);
  hwt_pool_destroy(p);
}

#endif
