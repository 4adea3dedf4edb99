/* The scheduler table: name -> row. Rows are looked up once, at create (and
 * by callers listing names or properties), never on the hot path. A test
 * program may append rows through the weak hwt_scheds_test hook, as it can
 * append op types through hwt_ops_test (registry.c). */
#include <stdio.h>
#include <string.h>
#include "sched.h"

#pragma weak hwt_scheds_test

/* One per sched_*.c. */
extern const hwt_sched_impl hwt_sched_sequential;
extern const hwt_sched_impl hwt_sched_shared_queue;
extern const hwt_sched_impl hwt_sched_critical_path;
extern const hwt_sched_impl hwt_sched_corun;

/* Row order is the order names are listed in (help texts, errors). */
static const hwt_sched_impl *const BUILTIN[] = {
    &hwt_sched_sequential,
    &hwt_sched_shared_queue,
    &hwt_sched_critical_path,
    &hwt_sched_corun,
};
#define N_BUILTIN ((int)(sizeof BUILTIN / sizeof BUILTIN[0]))

static const hwt_sched_impl *test_rows(int *n) {
  *n = 0;
  return hwt_scheds_test ? hwt_scheds_test(n) : NULL;
}

const hwt_sched_impl *hwt_sched_row(int i) {
  if (i < 0) return NULL;
  if (i < N_BUILTIN) return BUILTIN[i];
  int n;
  const hwt_sched_impl *t = test_rows(&n);
  return i - N_BUILTIN < n ? &t[i - N_BUILTIN] : NULL;
}

const hwt_sched_impl *hwt_sched_find(const char *name) {
  const hwt_sched_impl *r;
  for (int i = 0; (r = hwt_sched_row(i)) != NULL; i++)
    if (name ? strcmp(r->info.name, name) == 0 : r->info.default_one) return r;
  return NULL;
}

int hwt_sched_count(void) {
  int n;
  test_rows(&n);
  return N_BUILTIN + n;
}

const hwt_sched_info *hwt_sched_at(int i) {
  const hwt_sched_impl *r = hwt_sched_row(i);
  return r ? &r->info : NULL;
}

const char *hwt_sched_list(char *buf, size_t n) {
  size_t used = 0;
  const hwt_sched_impl *r;
  if (n) buf[0] = '\0';
  for (int i = 0; (r = hwt_sched_row(i)) != NULL && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", r->info.name);
  return buf;
}

const hwt_sched_info *hwt_sched_by_name(const char *name) {
  const hwt_sched_impl *r = hwt_sched_find(name);
  return r ? &r->info : NULL;
}
