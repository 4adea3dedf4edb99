/* Placement of teams on synthetic topologies: SMT siblings used last, cores
 * sharing an L2 kept within one team, teams disjoint. */
#include <stdio.h>
#include <string.h>

#include "../../engine/threads/topo.h"

static int failures;

static void expect(const char *what, const int *got, const int *want, int n) {
  if (memcmp(got, want, (size_t)n * sizeof *got) == 0) return;
  failures++;
  fprintf(stderr, "FAIL %s: got", what);
  for (int i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
  fprintf(stderr, ", want");
  for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
  fputc('\n', stderr);
}

/* Xeon-like: 4 cores x 2 SMT, core c = CPUs c and c+4, private L2. */
static void xeon(hwt_cpu_info *t) {
  for (int c = 0; c < 8; c++) t[c] = (hwt_cpu_info){c, 0, c % 4, c % 4};
}

/* KNL-like: 8 cores in tiles of 2 sharing an L2, no SMT. */
static void tiles(hwt_cpu_info *t) {
  for (int c = 0; c < 8; c++) t[c] = (hwt_cpu_info){c, 0, c / 2 * 2, c};
}

/* Two packages of 2 cores x 2 SMT, ids interleaved across packages:
 * package p holds CPUs with c % 2 == p; core siblings are c and c+4. */
static void two_sockets(hwt_cpu_info *t) {
  for (int c = 0; c < 8; c++) t[c] = (hwt_cpu_info){c, c % 2, c % 4, c % 4};
}

int main(void) {
  hwt_cpu_info t[8];
  int out[8];

  xeon(t);
  hwt_topo_order(t, 8, out);
  expect("xeon order", out, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  hwt_topo_assign(t, 8, 2, 2, out);
  expect("xeon 2x2: one thread per core", out, (int[]){0, 1, 2, 3}, 4);
  hwt_topo_assign(t, 8, 2, 4, out);
  expect("xeon 2x4: a team owns whole cores", out, (int[]){0, 1, 4, 5, 2, 3, 6, 7}, 8);
  hwt_topo_assign(t, 8, 3, 2, out);
  expect("xeon 3x2: siblings stay in their team", out, (int[]){0, 4, 1, 5, 2, 6}, 6);
  hwt_topo_assign(t, 8, 1, 5, out);
  expect("xeon 1x5: cores first", out, (int[]){0, 1, 2, 3, 4}, 5);

  tiles(t);
  hwt_topo_assign(t, 8, 3, 2, out);
  expect("tiles 3x2", out, (int[]){0, 1, 2, 3, 4, 5}, 6);
  hwt_topo_assign(t, 8, 3, 1, out);
  expect("tiles 3x1: one tile per team", out, (int[]){0, 2, 4}, 3);
  hwt_topo_assign(t, 8, 2, 3, out);
  expect("tiles 2x3: second team starts on a fresh tile", out, (int[]){0, 1, 2, 4, 5, 6}, 6);
  hwt_topo_assign(t, 8, 2, 4, out);
  expect("tiles 2x4: no slack, plain order", out, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);

  two_sockets(t);
  hwt_topo_order(t, 8, out);
  expect("two sockets order", out, (int[]){0, 2, 1, 3, 4, 6, 5, 7}, 8);
  hwt_topo_assign(t, 8, 2, 2, out);
  expect("two sockets 2x2: a team per socket", out, (int[]){0, 2, 1, 3}, 4);

  if (hwt_topo_assign(t, 8, 3, 3, out) != -1) {
    failures++;
    fprintf(stderr, "FAIL 9 threads placed on 8 CPUs\n");
  }

  /* The real machine: every allowed CPU read, with sane keys. */
  hwt_cpu_info real[1024];
  int n = hwt_topo_read(real, 1024);
  if (n < 1) failures++, fprintf(stderr, "FAIL no allowed CPUs read\n");
  for (int i = 0; i < n && i < 1024; i++)
    if (real[i].cpu < 0 || real[i].core < 0 || real[i].l2 < 0 || real[i].package < 0)
      failures++, fprintf(stderr, "FAIL cpu %d: bad topology keys\n", real[i].cpu);

  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  else printf("test_pool_topo: ok\n");
  return failures != 0;
}
