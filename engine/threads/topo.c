/* CPU topology from sched_getaffinity and sysfs; placement of pool teams. */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include "hwtune/pool.h"

/* First integer of a sysfs file (cpulists are printed ascending, so this is
 * the lowest CPU of a list); fallback when the file is missing. */
static int read_first_int(const char *path, int fallback) {
  FILE *f = fopen(path, "r");
  if (!f) return fallback;
  int v;
  int ok = fscanf(f, "%d", &v) == 1;
  fclose(f);
  return ok ? v : fallback;
}

static int read_word(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%31s", buf) == 1;
  buf[len - 1] = '\0';
  fclose(f);
  return ok;
}

/* The L2 is usually cache/index2, but the index numbering is not a contract:
 * find the level-2 data or unified cache. */
static int read_l2_key(int cpu, int fallback) {
  char path[128], word[32];
  for (int idx = 0; idx < 10; idx++) {
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu, idx);
    int level = read_first_int(path, -1);
    if (level < 0) break;
    if (level != 2) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/type", cpu, idx);
    if (read_word(path, word, sizeof word) && strcmp(word, "Instruction") == 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list",
             cpu, idx);
    return read_first_int(path, fallback);
  }
  return fallback;
}

static void fill_info(hwt_cpu_info *ci, int cpu) {
  char path[128];
  ci->cpu = cpu;
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
  ci->package = read_first_int(path, 0);
  if (ci->package < 0) ci->package = 0;
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
  ci->core = read_first_int(path, cpu);
  ci->l2 = read_l2_key(cpu, ci->core);
}

int hwt_topo_read(hwt_cpu_info *out, int max) {
  int n = 0;
#if defined(__linux__)
  /* Grow the mask until the kernel accepts it: machines may have more CPUs
   * than the default cpu_set_t (1024) holds. */
  for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
    cpu_set_t *set = CPU_ALLOC(ncpu);
    if (!set) return 0;
    size_t sz = CPU_ALLOC_SIZE(ncpu);
    CPU_ZERO_S(sz, set);
    if (sched_getaffinity(0, sz, set) == 0) {
      for (int c = 0; c < ncpu; c++) {
        if (!CPU_ISSET_S(c, sz, set)) continue;
        if (n < max) fill_info(&out[n], c);
        n++;
      }
      CPU_FREE(set);
      return n;
    }
    CPU_FREE(set);
  }
#endif
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1) online = 1;
  for (int c = 0; c < online; c++) {
    if (n < max) {
      out[n].cpu = c;
      out[n].package = 0;
      out[n].core = c;
      out[n].l2 = c;
    }
    n++;
  }
  return n;
}

/* Sort key: where a CPU sits in the machine (package, L2 domain, core), then
 * its SMT rank within the core when `by_rank` is set. */
typedef struct {
  hwt_cpu_info info;
  int rank;
} ranked_cpu;

static int cmp_place(const void *pa, const void *pb) {
  const hwt_cpu_info *a = &((const ranked_cpu *)pa)->info, *b = &((const ranked_cpu *)pb)->info;
  if (a->package != b->package) return a->package < b->package ? -1 : 1;
  if (a->l2 != b->l2) return a->l2 < b->l2 ? -1 : 1;
  if (a->core != b->core) return a->core < b->core ? -1 : 1;
  return (a->cpu > b->cpu) - (a->cpu < b->cpu);
}

static int cmp_rank_place(const void *pa, const void *pb) {
  int ra = ((const ranked_cpu *)pa)->rank, rb = ((const ranked_cpu *)pb)->rank;
  if (ra != rb) return ra < rb ? -1 : 1;
  return cmp_place(pa, pb);
}

/* Sorted by place, with each CPU's rank among its core's siblings. Caller
 * frees. */
static ranked_cpu *sort_by_place(const hwt_cpu_info *cpus, int n) {
  ranked_cpu *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (!r) return NULL;
  for (int i = 0; i < n; i++) r[i].info = cpus[i];
  qsort(r, (size_t)n, sizeof *r, cmp_place);
  for (int i = 0; i < n; i++)
    r[i].rank = (i > 0 && r[i - 1].info.core == r[i].info.core) ? r[i - 1].rank + 1 : 0;
  return r;
}

void hwt_topo_order(const hwt_cpu_info *cpus, int n, int *order) {
  ranked_cpu *r = sort_by_place(cpus, n);
  if (!r) { /* out of memory: id order is still a valid order */
    for (int i = 0; i < n; i++) order[i] = cpus[i].cpu;
    return;
  }
  qsort(r, (size_t)n, sizeof *r, cmp_rank_place);
  for (int i = 0; i < n; i++) order[i] = r[i].info.cpu;
  free(r);
}

/* More threads than cores: give every team an equal share of whole,
 * adjacent cores and fill them one thread per core first, so that a team
 * spreads over all the cores it owns. Returns -1 if a share holds too few
 * CPUs (uneven SMT), leaving the general placement to the caller. */
static int smt_split(const ranked_cpu *r, const int *start, const int *len, int nc, int n_teams,
                     int tpt, ranked_cpu *team, int *out) {
  int cpt = nc / n_teams;
  for (int t = 0; t < n_teams; t++) {
    int have = 0;
    for (int c = t * cpt; c < (t + 1) * cpt; c++) have += len[c];
    if (have < tpt) return -1;
  }
  for (int t = 0; t < n_teams; t++) {
    int m = 0;
    for (int rank = 0; m < tpt; rank++)
      for (int c = t * cpt; c < (t + 1) * cpt && m < tpt; c++)
        if (rank < len[c]) team[m++] = r[start[c] + rank];
    for (int i = 0; i < tpt; i++) out[(long)t * tpt + i] = team[i].info.cpu;
  }
  return 0;
}

/* Consecutive placement: whole cores (and L2 domains) per team while spare
 * CPUs allow skipping a partly used one. */
static void greedy_split(const ranked_cpu *r, const int *start, const int *len, int nc,
                         int n_teams, int tpt, ranked_cpu *team, int *out) {
  long total = (long)n_teams * tpt;
  /* Use k threads per core at most: the fewest that fit every team, so SMT
   * siblings are only shared when the cores run out. */
  int k = 1;
  long avail;
  for (;; k++) {
    avail = 0;
    for (int c = 0; c < nc; c++) avail += len[c] < k ? len[c] : k;
    if (avail >= total) break;
  }
  long slack = avail - total;
#define SLOTS(c) (len[c] < k ? len[c] : k)
  int ci = 0, u = 0;
  for (int t = 0; t < n_teams; t++) {
    /* Start each team on a fresh core, then on a fresh L2 domain, as long
     * as the CPUs skipped are spare: teams must not share caches. */
    if (u > 0 && SLOTS(ci) - u <= slack) {
      slack -= SLOTS(ci) - u;
      ci++, u = 0;
    }
    if (u == 0 && ci > 0 && ci < nc && r[start[ci]].info.l2 == r[start[ci - 1]].info.l2) {
      long waste = 0;
      int cj = ci;
      while (cj < nc && r[start[cj]].info.l2 == r[start[ci - 1]].info.l2) waste += SLOTS(cj++);
      if (waste <= slack) slack -= waste, ci = cj;
    }
    for (int m = 0; m < tpt; m++) {
      team[m] = r[start[ci] + u];
      if (++u == SLOTS(ci)) ci++, u = 0;
    }
    /* One thread per core first inside the team, so a region using fewer
     * threads than the team spreads over distinct cores. */
    qsort(team, (size_t)tpt, sizeof *team, cmp_rank_place);
    for (int m = 0; m < tpt; m++) out[(long)t * tpt + m] = team[m].info.cpu;
  }
#undef SLOTS
}

int hwt_topo_assign(const hwt_cpu_info *cpus, int n, int n_teams, int tpt, int *out) {
  long total = (long)n_teams * tpt;
  if (n_teams < 1 || tpt < 1 || total > n) return -1;
  ranked_cpu *r = sort_by_place(cpus, n);
  int *start = malloc((size_t)n * sizeof *start), *len = malloc((size_t)n * sizeof *len);
  ranked_cpu *team = malloc((size_t)tpt * sizeof *team);
  if (!r || !start || !len || !team) {
    free(r), free(start), free(len), free(team);
    return -1;
  }
  int nc = 0;
  for (int i = 0; i < n; i++) {
    if (r[i].rank == 0) start[nc++] = i;
    len[nc - 1] = r[i].rank + 1;
  }
  if (total <= nc || smt_split(r, start, len, nc, n_teams, tpt, team, out) != 0)
    greedy_split(r, start, len, nc, n_teams, tpt, team, out);
  free(r), free(start), free(len), free(team);
  return 0;
}

/* Allowed CPUs with their topology; *n gets the count. Caller frees. */
hwt_cpu_info *hwt_topo_read_all(int *n) {
  for (;;) { /* the count can change between the two reads if affinity changes */
    int want = hwt_topo_read(NULL, 0);
    hwt_cpu_info *info = malloc((size_t)(want > 0 ? want : 1) * sizeof *info);
    if (!info) return NULL;
    int got = hwt_topo_read(info, want);
    if (got <= want) {
      *n = got;
      return info;
    }
    free(info);
  }
}

int hwt_allowed_cpus(int *out, int max) {
  int n = 0;
  hwt_cpu_info *info = hwt_topo_read_all(&n);
  int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
  if (!info || !order) {
    free(info), free(order);
    return HWT_ENOMEM;
  }
  hwt_topo_order(info, n, order);
  for (int i = 0; i < n && i < max; i++) out[i] = order[i];
  free(info), free(order);
  return n;
}
