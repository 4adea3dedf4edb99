/* This host's cache sizes for the GEMM blocking, read the way the Python
 * fingerprint reads them (src/hwtune/machine/topology.py): sysfs cache
 * directories of one CPU this process may run on. sysconf is the fallback
 * for L1d and L2 only: glibc derives its L3 figure from CPUID, which on this
 * project's KVM guests reported 256 MiB for a 32 MiB L3. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "hwtune/gemm.h"

/* First line of a small sysfs file into buf; 0 on success. */
static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* "32K", "512K", "32768K", "1M" -> bytes; 0 if malformed. */
static long parse_size(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || v <= 0) return 0;
  switch (*end) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    case '\0': return v;
    default: return 0;
  }
}

/* CPUs in a list such as "0-3,8,10-11"; 0 if malformed. */
static int count_cpus(const char *s) {
  int n = 0;
  while (*s) {
    char *end;
    long lo = strtol(s, &end, 10), hi = lo;
    if (end == s) return 0;
    s = end;
    if (*s == '-') {
      hi = strtol(s + 1, &end, 10);
      if (end == s + 1 || hi < lo) return 0;
      s = end;
    }
    n += (int)(hi - lo + 1);
    if (*s == ',') s++;
    else if (*s) return 0;
  }
  return n;
}

static int first_allowed_cpu(void) {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) return c;
#endif
  return 0;
}

static void from_sysfs(hwt_cache_sizes *out) {
  int cpu = first_allowed_cpu();
  char path[128], level[16], type[32], size[32], shared[256];
  for (int idx = 0; idx < 16; idx++) {
    int n = snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/", cpu, idx);
    if (n <= 0 || (size_t)n >= sizeof path - 20) return;
    char *tail = path + n;
    strcpy(tail, "level");
    if (read_line(path, level, sizeof level) != 0) return; /* no more caches */
    strcpy(tail, "type");
    if (read_line(path, type, sizeof type) != 0) continue;
    strcpy(tail, "size");
    if (read_line(path, size, sizeof size) != 0) continue;
    long bytes = parse_size(size);
    if (bytes == 0 || strcmp(type, "Instruction") == 0) continue;
    if (strcmp(level, "1") == 0 && strcmp(type, "Data") == 0) {
      out->l1d = bytes;
    } else if (strcmp(level, "2") == 0) {
      out->l2 = bytes;
    } else if (strcmp(level, "3") == 0) {
      strcpy(tail, "shared_cpu_list");
      int cpus = read_line(path, shared, sizeof shared) == 0 ? count_cpus(shared) : 0;
      out->l3 = bytes;
      out->l3_cpus = cpus > 0 ? cpus : 1;
    }
  }
}

static hwt_cache_sizes host;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_init(void) {
  memset(&host, 0, sizeof host);
  from_sysfs(&host);
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  if (host.l1d <= 0) {
    long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    host.l1d = v > 0 ? v : 0;
  }
  if (host.l2 <= 0) {
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    host.l2 = v > 0 ? v : 0;
  }
#endif
}

void hwt_cache_sizes_host(hwt_cache_sizes *out) {
  if (!out) return;
  pthread_once(&host_once, host_init);
  *out = host;
}
