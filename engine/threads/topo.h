/* CPU topology for placing pool threads: which CPUs this process may use,
 * which of them are SMT siblings of one core, and which cores share an L2. */
#ifndef HWTUNE_POOL_TOPO_H
#define HWTUNE_POOL_TOPO_H

typedef struct {
  int cpu;      /* OS CPU id */
  int package;  /* physical package (socket) */
  int l2;       /* lowest CPU id sharing this CPU's L2 cache: the L2 domain's key */
  int core;     /* lowest CPU id among this CPU's SMT siblings: the core's key */
} hwt_cpu_info;

/* Allowed CPUs (sched_getaffinity) with their topology from sysfs, ascending
 * CPU id. Returns the count (0 on failure); writes up to max entries. */
int hwt_topo_read(hwt_cpu_info *out, int max);
/* The same into a malloc'd array sized to fit; *n gets the count. */
hwt_cpu_info *hwt_topo_read_all(int *n);

/* Topology order of n CPUs: the first SMT thread of every core (cores sharing
 * an L2 adjacent, packages in order), then every core's second thread, ... */
void hwt_topo_order(const hwt_cpu_info *cpus, int n, int *order);

/* Places n_teams teams of tpt threads on n CPUs. Teams take whole, adjacent
 * cores: one thread per core while cores last (starting a team on a fresh
 * L2 domain when spare cores allow), otherwise an equal share of cores per
 * team filled one thread per core before SMT siblings. Writes team t's CPUs,
 * its master first, to out[t*tpt .. +tpt). Returns 0, or -1 if
 * n_teams * tpt > n. */
int hwt_topo_assign(const hwt_cpu_info *cpus, int n, int n_teams, int tpt, int *out);

#endif
