/* Persistent pool of executor teams with a spin-then-sleep fork-join.
 *
 * One `channel` carries fork-join between a forker and its participants:
 * team t's master forks to the team's workers (idx 1..tpt-1) through
 * team_ch[t]; the caller of hwt_pool_run_teams forks to the team masters
 * (idx 1..n_teams-1) through pool_ch. A fork publishes the task and bumps a
 * 64-bit generation word (sequence << 16 | nth) on its own cache line;
 * participants spin on it, then park.
 *
 * A team region is nth shares that any of its first nth threads may run:
 * share i is claimed by a CAS of the region's sequence into share i's own
 * cache line. Each thread claims its own share first (share i stays on
 * thread i, so a partition stays in the cache that ran it last region), then
 * any share still unclaimed. So a master never waits for a worker that the
 * OS has not yet run (on a loaded machine that is a whole scheduler tick):
 * it runs that share itself, and the late worker finds nothing left. The
 * runner of share i writes the sequence into share i's done word on the same
 * line, so a join is a scan of independent lines (the loads overlap) rather
 * than nth atomic increments serialised on one line. Team masters of
 * pool_ch are not claimable: a team's function must run on its own master.
 *
 * nth travels in the generation word so that threads outside a region
 * (idx >= nth) never read fn/arg, which the forker rewrites as soon as the
 * region's shares are done; a thread reads fn/arg only after its claim
 * succeeded, and the region cannot finish before that share's done word is
 * written. Sequences are 48 bits and never wrap, and a claim only moves a
 * share's word from an older sequence to the thread's own, so a thread
 * descheduled across many regions can neither mistake a new region for the
 * last it saw nor claim a share of a later region by mistake. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hwtune/pool.h"
#include "hwtune/clock.h"
#include "hwtune/errorf.h"
#include "hwtune/free_all.h"
#include "park.h"
#include "topo.h"

#define NTH_BITS 16
#define NTH_MASK ((UINT64_C(1) << NTH_BITS) - 1)
/* Far above any machine we target (256 CPUs) and below NTH_MASK. */
#define POOL_MAX_THREADS 4096
/* Spin budget before parking when every thread has its own CPU. Parking
 * every region (HWTUNE_POOL_SPIN_US=0) measured 9.7 us per empty 2-thread
 * region against 1.3 us spinning (medians, this 2-core Cascade Lake VM under
 * load ~8). 200 us covers the gaps between regions of an engine or bench
 * loop, including a Python call between C calls, while an idle pool stops
 * burning a shared machine's CPUs within 0.2 ms. */
#define POOL_SPIN_US_DEFAULT 200.0
/* Pause instructions between clock reads while spinning: a pause measured
 * 4.6 ns here and a clock read 22 ns, so reading every 64 pauses keeps the
 * clock under 10% of the spin (pause is ~10x longer on Skylake-SP hosts). */
#define SPINS_PER_CLOCK 64

/* On an unpinned pool, a thread that has spun on the pool's channel (the
 * once-per-run hand-off between teams, never a team's per-op fork-join)
 * for YIELD_AFTER_S goes on spinning with a sched_yield() at each clock
 * read: the OS may have queued the thread being waited for on the
 * spinner's own CPU. A 2-executor shared-queue run of a 0.13 ms LSTM
 * (deepcpu_lstm_i64_h64, unpinned) took 400-490 us in a third of its
 * batches of 20 runs: its second master, woken at the run's end, sat on
 * the caller's CPU (the caller switched involuntarily 5-10 times a batch)
 * while the other CPU idled, and the caller's join spun out its budget
 * (AMD EPYC Zen 4, 2 vCPUs). Yielding after 20 us left
 * batch medians of 167-181 us, yielding from the first clock read 148 us
 * (120 batches each, alternating builds): once a run, a
 * yield with nothing else to run costs a system call. Yielding in every
 * spin of an unpinned pool (team regions too) removed the slow batches
 * but slowed one-team configurations: pathnet_small's sequential 1x2
 * 17.4 ms against 8.6 (the revert of 2026-11-28, e70498e); one team never
 * spins here. */
#define YIELD_AFTER_S 0.0
/* Tests define this to count the yields (test_pool_yield.c). */
#ifndef HWT_POOL_YIELD
#define HWT_POOL_YIELD() sched_yield()
#endif

/* Tests define this to hold a worker between seeing a region and claiming a
 * share, i.e. to play a thread the OS has not run yet (test_pool_late.c). */
#ifndef HWT_POOL_LATE_HOOK
#define HWT_POOL_LATE_HOOK(team, idx) ((void)0)
#endif

/* Line i of a channel: share i's claim and completion (team regions; on
 * pool_ch participant i's completion) and thread i's parking. */
typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint64_t done_seq; /* last region whose share i finished */
  _Atomic uint64_t claim_seq;                        /* last region whose share i was claimed */
  _Atomic uint32_t word;                             /* park word */
  _Atomic uint32_t asleep;                           /* parked or about to */
} slot_t;

typedef union {
  hwt_task_fn task;
  hwt_team_fn team;
} fn_u;

typedef struct {
  /* Written by the forker once per region, read by every participant. */
  _Alignas(HWT_CACHELINE) _Atomic uint64_t gen;
  _Atomic int stop;
  fn_u fn;
  void *arg;
  /* Written only on the slow (sleeping) paths. */
  _Alignas(HWT_CACHELINE) _Atomic uint32_t sleepers;
  _Atomic uint32_t forker_waiting;
  _Atomic uint32_t join_word;
  slot_t *slots; /* [n]; slot 0: share 0 on a team channel, unused on pool_ch */
  int n;
  int yields;    /* spinners yield after YIELD_AFTER_S (unpinned pool_ch) */
} channel;

/* One pause of a spin loop's k-th turn; every SPINS_PER_CLOCK turns a clock
 * read, the first of which starts *t0. 1 once spin_s has passed since then
 * (the caller parks); on the way, spinners of a yielding channel yield
 * after YIELD_AFTER_S. The one spin phase of both waits below. */
static inline int spin_spent(const channel *c, long k, double *t0, double spin_s) {
  hwt_cpu_relax();
  if (k % SPINS_PER_CLOCK != SPINS_PER_CLOCK - 1) return 0;
  const double t = hwt_now();
  if (*t0 == 0) *t0 = t;
  else if (t - *t0 >= spin_s) return 1;
  if (c->yields && t - *t0 >= YIELD_AFTER_S) HWT_POOL_YIELD();
  return 0;
}

typedef struct {
  hwt_pool *p;
  int team, idx;
} thread_arg;

struct hwt_pool {
  channel pool_ch;
  int n_teams, tpt, pin;
  double spin_s;
  _Atomic int pinned;
  _Atomic int busy;      /* run_teams in progress: guards against reentry */
  _Atomic int started;   /* threads that finished pinning */
  int *cpu;              /* [n_teams * tpt] target CPU, -1 when unpinned */
  int *pin_ok;           /* [n_teams * tpt] 1 if that thread's pin held */
  channel *team_ch;      /* [n_teams] */
  pthread_t *threads;    /* [n_teams * tpt]; entry 0 is the caller's */
  char *created;
  thread_arg *targs;
};

static void *alloc_lines(size_t bytes) {
  size_t sz = (bytes + HWT_CACHELINE - 1) / HWT_CACHELINE * HWT_CACHELINE;
  void *m = aligned_alloc(HWT_CACHELINE, sz ? sz : HWT_CACHELINE);
  if (m) memset(m, 0, sz ? sz : HWT_CACHELINE);
  return m;
}

static int chan_init(channel *c, int n) {
  atomic_init(&c->gen, 0);
  atomic_init(&c->stop, 0);
  atomic_init(&c->sleepers, 0);
  atomic_init(&c->forker_waiting, 0);
  atomic_init(&c->join_word, 0);
  c->n = n;
  c->yields = 0;
  c->slots = alloc_lines((size_t)n * sizeof(slot_t));
  if (!c->slots) return -1;
  for (int i = 0; i < n; i++) {
    atomic_init(&c->slots[i].done_seq, 0);
    atomic_init(&c->slots[i].claim_seq, 0);
    atomic_init(&c->slots[i].word, 0);
    atomic_init(&c->slots[i].asleep, 0);
  }
  return 0;
}

/* Forker: publish fn/arg (already stored by the caller) to nth-1
 * participants. Returns the region's sequence number. */
static uint64_t chan_fork(channel *c, int nth) {
  uint64_t seq = (atomic_load_explicit(&c->gen, memory_order_relaxed) >> NTH_BITS) + 1;
  /* seq_cst store then seq_cst load of `sleepers`: pairs with the
   * participant's increment-then-recheck so that either it sees the new
   * generation or we see it about to sleep (no lost wake-up). */
  atomic_store(&c->gen, (seq << NTH_BITS) | (uint64_t)nth);
  if (atomic_load(&c->sleepers) != 0) {
    for (int i = 1; i < nth; i++) {
      slot_t *s = &c->slots[i];
      if (atomic_load(&s->asleep)) {
        atomic_fetch_add(&s->word, 1);
        hwt_park_wake(&s->word);
      }
    }
  }
  return seq;
}

/* Participant: wait until the generation differs from `seen`. */
static uint64_t chan_wait(channel *c, int idx, uint64_t seen, double spin_s) {
  uint64_t g;
  double t0 = 0;
  for (long k = 0;; k++) {
    g = atomic_load_explicit(&c->gen, memory_order_acquire);
    if (g != seen) return g;
    if (spin_spent(c, k, &t0, spin_s)) break;
  }
  slot_t *s = &c->slots[idx];
  for (;;) {
    uint32_t w = atomic_load(&s->word);
    atomic_store(&s->asleep, 1);
    atomic_fetch_add(&c->sleepers, 1);
    g = atomic_load(&c->gen);
    if (g == seen) hwt_park_wait(&s->word, w);
    atomic_fetch_sub(&c->sleepers, 1);
    atomic_store(&s->asleep, 0);
    g = atomic_load_explicit(&c->gen, memory_order_acquire);
    if (g != seen) return g;
  }
}

/* Report share (or participant) idx of region `seq` finished. */
static void chan_done(channel *c, int idx, uint64_t seq) {
  atomic_store(&c->slots[idx].done_seq, seq); /* seq_cst: see chan_join */
  if (atomic_load(&c->forker_waiting)) {
    atomic_fetch_add(&c->join_word, 1);
    hwt_park_wake(&c->join_word);
  }
}

/* Forker: wait until shares first..nth-1 of region `seq` are done. */
static void chan_join(channel *c, int first, int nth, uint64_t seq, double spin_s) {
  int i = first;
  double t0 = 0;
  for (long k = 0;; k++) {
    while (i < nth && atomic_load_explicit(&c->slots[i].done_seq, memory_order_acquire) == seq) i++;
    if (i == nth) return;
    if (spin_spent(c, k, &t0, spin_s)) break;
  }
  for (;;) {
    uint32_t w = atomic_load(&c->join_word);
    /* seq_cst store then loads: pairs with chan_done's store then load. */
    atomic_store(&c->forker_waiting, 1);
    while (i < nth && atomic_load(&c->slots[i].done_seq) == seq) i++;
    if (i == nth) break;
    hwt_park_wait(&c->join_word, w);
  }
  atomic_store_explicit(&c->forker_waiting, 0, memory_order_relaxed);
}

/* 1 if this thread won share i of region `seq` and must run it. Claim words
 * only ever rise, so a word at or past seq means the share is taken (or, for
 * a thread that slept through the region, that the region is over); a word
 * below seq cannot belong to a finished region, because a region finishes
 * only after each of its shares was claimed and done. */
static int share_claim(channel *c, int i, uint64_t seq) {
  _Atomic uint64_t *w = &c->slots[i].claim_seq;
  uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
  return v < seq && atomic_compare_exchange_strong_explicit(w, &v, seq, memory_order_acq_rel,
                                                            memory_order_relaxed);
}

/* Runs the shares of team region `seq` that this thread claims: its own
 * share first, then the others in rotation from there, so that threads
 * looking for leftovers start at different shares. fn/arg are read only
 * after a claim, while the region cannot finish. */
static void run_shares(channel *c, int self, int nth, uint64_t seq) {
  for (int k = 0; k < nth; k++) {
    int i = self + k < nth ? self + k : self + k - nth;
    if (!share_claim(c, i, seq)) continue;
    c->fn.task(c->arg, i, nth);
    chan_done(c, i, seq);
  }
}

static void participant_loop(hwt_pool *p, channel *c, int idx, int team) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = chan_wait(c, idx, seen, p->spin_s);
    seen = g;
    if (atomic_load_explicit(&c->stop, memory_order_relaxed)) return;
    int nth = (int)(g & NTH_MASK);
    if (idx >= nth) continue;
    if (c == &p->pool_ch) {
      c->fn.team(c->arg, team);
      chan_done(c, idx, g >> NTH_BITS);
    } else {
      HWT_POOL_LATE_HOOK(team, idx);
      run_shares(c, idx, nth, g >> NTH_BITS);
    }
  }
}

/* ---- affinity ---- */

#if defined(__linux__)
typedef struct {
  cpu_set_t *set;
  size_t size;
} cpumask;

static int mask_get(cpumask *m) {
  for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
    m->set = CPU_ALLOC(ncpu);
    if (!m->set) return -1;
    m->size = CPU_ALLOC_SIZE(ncpu);
    if (sched_getaffinity(0, m->size, m->set) == 0) return 0;
    CPU_FREE(m->set);
    if (errno != EINVAL) break;
  }
  m->set = NULL;
  return -1;
}

/* Binds the calling thread to one CPU; 0 on success. */
static int pin_self(int cpu) {
  cpumask m;
  m.size = CPU_ALLOC_SIZE(cpu + 1);
  m.set = CPU_ALLOC(cpu + 1);
  if (!m.set) return -1;
  CPU_ZERO_S(m.size, m.set);
  CPU_SET_S(cpu, m.size, m.set);
  int rc = sched_setaffinity(0, m.size, m.set);
  CPU_FREE(m.set);
  return rc;
}

/* 1 if the calling thread may be bound to `cpu`; its affinity is restored. */
static int caller_can_pin(int cpu) {
  cpumask saved;
  if (mask_get(&saved) != 0) return 0;
  int ok = pin_self(cpu) == 0;
  if (ok) sched_setaffinity(0, saved.size, saved.set);
  CPU_FREE(saved.set);
  return ok;
}
#else
static int pin_self(int cpu) {
  (void)cpu;
  return -1; /* no portable way: the pool runs unpinned and says so */
}

static int caller_can_pin(int cpu) { return pin_self(cpu) == 0; }
#endif

static void *thread_main(void *va) {
  thread_arg *a = va;
  hwt_pool *p = a->p;
  int slot = a->team * p->tpt + a->idx;
  if (p->pin) {
    p->pin_ok[slot] = pin_self(p->cpu[slot]) == 0;
    if (!p->pin_ok[slot]) atomic_store(&p->pinned, 0);
  }
  atomic_fetch_add(&p->started, 1);
  if (a->idx == 0) participant_loop(p, &p->pool_ch, a->team, a->team);
  else participant_loop(p, &p->team_ch[a->team], a->idx, a->team);
  return NULL;
}

/* ---- create / destroy ---- */

/* "0-3,8" for error messages. */
static void format_cpus(const int *cpu, int n, char *buf, size_t len) {
  int *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
  buf[0] = '\0';
  if (!s) return;
  memcpy(s, cpu, (size_t)n * sizeof *s);
  for (int i = 1; i < n; i++) /* insertion sort: n is a CPU count */
    for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
      int t = s[j];
      s[j] = s[j - 1], s[j - 1] = t;
    }
  size_t used = 0;
  for (int i = 0; i < n && used + 1 < len;) {
    int j = i;
    while (j + 1 < n && s[j + 1] == s[j] + 1) j++;
    int w = j > i ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", s[i], s[j])
                  : snprintf(buf + used, len - used, "%s%d", used ? "," : "", s[i]);
    if (w < 0 || (size_t)w >= len - used) break;
    used += (size_t)w;
    i = j + 1;
  }
  free(s);
}

/* Why create refused, into the caller's err. */
#define set_err(...) ((void)hwt_errorf(0, __VA_ARGS__))

static void stop_and_free(hwt_pool *p) {
  int total = p->n_teams * p->tpt;
  if (p->team_ch) {
    for (int t = 0; t < p->n_teams; t++) {
      if (!p->team_ch[t].slots) continue;
      atomic_store(&p->team_ch[t].stop, 1);
      chan_fork(&p->team_ch[t], p->tpt);
    }
  }
  if (p->pool_ch.slots) {
    atomic_store(&p->pool_ch.stop, 1);
    chan_fork(&p->pool_ch, p->n_teams);
  }
  if (p->created)
    for (int i = 1; i < total; i++)
      if (p->created[i]) pthread_join(p->threads[i], NULL);
  if (p->team_ch)
    for (int t = 0; t < p->n_teams; t++) free(p->team_ch[t].slots);
  HWT_FREE_ALL(p->pool_ch.slots, p->team_ch, p->cpu, p->pin_ok, p->threads, p->created, p->targs);
  free(p);
}

/* Fills p->cpu; returns 0 or writes err and returns -1. */
static int place_threads(hwt_pool *p, const hwt_pool_config *cfg, char *err, size_t errlen) {
  int total = p->n_teams * p->tpt;
  int n = 0;
  hwt_cpu_info *info = hwt_topo_read_all(&n);
  int *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
  char list[256];
  if (!info || !ids) {
    free(info), free(ids);
    set_err(err, errlen, "out of memory reading the CPU topology");
    return -1;
  }
  for (int i = 0; i < n; i++) ids[i] = info[i].cpu;
  format_cpus(ids, n, list, sizeof list);
  int rc = 0;
  /* Spinning while more threads than CPUs exist would steal the CPU from
   * the very thread being waited for. */
  if (total > n) p->spin_s = 0;
  if (!p->pin) {
    for (int i = 0; i < total; i++) p->cpu[i] = -1;
  } else if (cfg->cpus) {
    if (cfg->n_cpus < total) {
      set_err(err, errlen, "%d x %d threads to pin but the CPU list has only %d CPUs (allowed: %s)",
              p->n_teams, p->tpt, cfg->n_cpus, list);
      rc = -1;
    }
    for (int i = 0; rc == 0 && i < total; i++) {
      int c = cfg->cpus[i], ok = 0;
      for (int j = 0; j < n; j++) ok |= ids[j] == c;
      for (int j = 0; j < i; j++) ok &= cfg->cpus[j] != c;
      if (!ok) {
        set_err(err, errlen, "CPU %d in the CPU list is repeated or not allowed (allowed: %s)", c,
                list);
        rc = -1;
      }
      p->cpu[i] = c;
    }
  } else if (hwt_topo_assign(info, n, p->n_teams, p->tpt, p->cpu) != 0) {
    set_err(err, errlen,
            "executors x threads = %d x %d = %d pinned threads exceed the allowed CPUs (%s); "
            "use fewer or disable pinning",
            p->n_teams, p->tpt, total, list);
    rc = -1;
  }
  free(info), free(ids);
  return rc;
}

hwt_pool *hwt_pool_create(const hwt_pool_config *cfg, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!cfg || cfg->n_teams < 1 || cfg->threads_per_team < 1 ||
      (long)cfg->n_teams * cfg->threads_per_team > POOL_MAX_THREADS) {
    set_err(err, errlen, "executors x threads = %d x %d: both must be >= 1 and the product <= %d",
            cfg ? cfg->n_teams : 0, cfg ? cfg->threads_per_team : 0, POOL_MAX_THREADS);
    return NULL;
  }
  hwt_pool *p = alloc_lines(sizeof *p);
  if (!p) return NULL;
  p->n_teams = cfg->n_teams;
  p->tpt = cfg->threads_per_team;
  p->pin = cfg->pin != 0;
  atomic_init(&p->pinned, p->pin);
  atomic_init(&p->busy, 0);
  atomic_init(&p->started, 0);
  p->spin_s = POOL_SPIN_US_DEFAULT * 1e-6;
  const char *env = getenv("HWTUNE_POOL_SPIN_US");
  if (env && *env) p->spin_s = atof(env) * 1e-6;
  int total = p->n_teams * p->tpt;
  p->cpu = malloc((size_t)total * sizeof *p->cpu);
  p->pin_ok = calloc((size_t)total, sizeof *p->pin_ok);
  p->threads = calloc((size_t)total, sizeof *p->threads);
  p->created = calloc((size_t)total, 1);
  p->targs = calloc((size_t)total, sizeof *p->targs);
  p->team_ch = alloc_lines((size_t)p->n_teams * sizeof(channel));
  int ok = p->cpu && p->pin_ok && p->threads && p->created && p->targs && p->team_ch &&
           chan_init(&p->pool_ch, p->n_teams) == 0;
  for (int t = 0; ok && t < p->n_teams; t++) ok = chan_init(&p->team_ch[t], p->tpt) == 0;
  if (ok) p->pool_ch.yields = !p->pin; /* before any thread reads it */
  if (!ok) {
    set_err(err, errlen, "out of memory creating a pool of %d x %d threads", p->n_teams, p->tpt);
    stop_and_free(p);
    return NULL;
  }
  if (place_threads(p, cfg, err, errlen) != 0) {
    stop_and_free(p);
    return NULL;
  }
  /* The caller is team 0's master, pinned only inside hwt_pool_run_teams:
   * try that pin once now (and restore), so that a refusal shows in
   * hwt_pool_pinned() and hwt_pool_thread_cpu() from the start. */
  p->pin_ok[0] = p->pin && caller_can_pin(p->cpu[0]);
  if (p->pin && !p->pin_ok[0]) atomic_store(&p->pinned, 0);

  /* Pool threads never take signals: Ctrl-C must reach the caller. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int failed = 0;
  for (int t = 0; t < p->n_teams && !failed; t++) {
    for (int i = (t == 0); i < p->tpt; i++) {
      int k = t * p->tpt + i;
      p->targs[k] = (thread_arg){p, t, i};
      if (pthread_create(&p->threads[k], NULL, thread_main, &p->targs[k]) != 0) {
        failed = 1;
        break;
      }
      p->created[k] = 1;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (failed) {
    set_err(err, errlen, "cannot create %d x %d threads: pthread_create failed", p->n_teams,
            p->tpt);
    stop_and_free(p);
    return NULL;
  }
  /* Wait until every thread has tried its pin so hwt_pool_pinned() is final. */
  while (atomic_load(&p->started) < total - 1) sched_yield();
  return p;
}

void hwt_pool_destroy(hwt_pool *p) {
  if (p) stop_and_free(p);
}

int hwt_pool_n_teams(const hwt_pool *p) { return p->n_teams; }
int hwt_pool_team_size(const hwt_pool *p) { return p->tpt; }
int hwt_pool_pinned(const hwt_pool *p) { return atomic_load(&((hwt_pool *)p)->pinned); }

int hwt_pool_thread_cpu(const hwt_pool *p, int team, int idx) {
  if (team < 0 || team >= p->n_teams || idx < 0 || idx >= p->tpt) return -1;
  int k = team * p->tpt + idx;
  return p->pin && p->pin_ok[k] ? p->cpu[k] : -1;
}

/* ---- fork-join ---- */

int hwt_team_parallel(hwt_pool *p, int team, hwt_task_fn fn, void *arg, int nth) {
  if (!p || !fn || team < 0 || team >= p->n_teams || nth < 1 || nth > p->tpt) return HWT_EINVAL;
  if (nth == 1) {
    fn(arg, 0, 1);
    return HWT_OK;
  }
  channel *c = &p->team_ch[team];
  c->fn.task = fn;
  c->arg = arg;
  uint64_t seq = chan_fork(c, nth);
  run_shares(c, 0, nth, seq);
  chan_join(c, 0, nth, seq, p->spin_s);
  return HWT_OK;
}

int hwt_pool_run_teams(hwt_pool *p, hwt_team_fn fn, void *arg) {
  if (!p || !fn) return HWT_EINVAL;
  int idle = 0;
  if (!atomic_compare_exchange_strong(&p->busy, &idle, 1)) return HWT_EINVAL;
#if defined(__linux__)
  cpumask saved = {NULL, 0};
  if (p->pin) {
    if (mask_get(&saved) != 0 || pin_self(p->cpu[0]) != 0) {
      p->pin_ok[0] = 0;
      atomic_store(&p->pinned, 0);
    }
  }
#endif
  uint64_t seq = 0;
  if (p->n_teams > 1) {
    p->pool_ch.fn.team = fn;
    p->pool_ch.arg = arg;
    seq = chan_fork(&p->pool_ch, p->n_teams);
  }
  fn(arg, 0);
  if (p->n_teams > 1) chan_join(&p->pool_ch, 1, p->n_teams, seq, p->spin_s);
#if defined(__linux__)
  if (saved.set) {
    sched_setaffinity(0, saved.size, saved.set);
    CPU_FREE(saved.set);
  }
#endif
  atomic_store(&p->busy, 0);
  return HWT_OK;
}
