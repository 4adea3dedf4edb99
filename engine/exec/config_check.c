/* The configuration rules (hwtune/config_check.h): one function per kind
 * of value, each message saying what is allowed and what was given. */
#include "hwtune/config_check.h"

#include <math.h>
#include <stdio.h>

#include "exec_internal.h"
#include "hwtune/errorf.h"
#include "hwtune/pool.h"

_Static_assert(HWT_CONFIG_MAX_EXECUTORS == HWT_EXEC_MAX_EXECUTORS,
               "the executor limit has one value");

/* A refusal returns the field it is about (HWT_CFG_*), the reason in err. */
#define refuse(field, ...) hwt_errorf(field, __VA_ARGS__)

/* Threads an op may be given: one executor's team, or every worker of a
 * worker-group scheduler. */
static int op_workers(const hwt_engine_config *c, const hwt_sched_info *s) {
  return s && s->worker_groups ? c->executors * c->threads_per_executor
                               : c->threads_per_executor;
}

int hwt_config_check(const hwt_engine_config *c, int cpus, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!c) return refuse(HWT_CFG_SCHEDULER, err, errlen, "no configuration");
  const hwt_sched_info *s = hwt_sched_by_name(c->scheduler);
  if (!s) {
    char names[256];
    return refuse(HWT_CFG_SCHEDULER, err, errlen, "scheduler '%s': choose one of %s",
                  c->scheduler ? c->scheduler : "(none)", hwt_sched_list(names, sizeof names));
  }
  if (c->executors < 1 || c->executors > HWT_CONFIG_MAX_EXECUTORS)
    return refuse(HWT_CFG_EXECUTORS, err, errlen, "executors must be 1..%d, got %d",
                  HWT_CONFIG_MAX_EXECUTORS, c->executors);
  if (c->threads_per_executor < 1 || c->threads_per_executor > HWT_CONFIG_MAX_THREADS)
    return refuse(HWT_CFG_THREADS, err, errlen, "threads per executor must be 1..%d, got %d",
                  HWT_CONFIG_MAX_THREADS, c->threads_per_executor);
  if (s->single_team && c->executors != 1)
    return refuse(HWT_CFG_EXECUTORS, err, errlen,
                  "the %s scheduler runs one executor with all threads, got %d executors",
                  s->name, c->executors);
  if (c->pin != 0 && c->pin != 1)
    return refuse(HWT_CFG_PIN, err, errlen, "pin must be 0 or 1, got %d", c->pin);
  int total = c->executors * c->threads_per_executor;
  if (s->worker_groups && total > HWT_CONFIG_MAX_EXECUTORS)
    return refuse(HWT_CFG_EXECUTORS, err, errlen,
                  "%s runs executors x threads single-thread workers, at most %d, got %d",
                  s->name, HWT_CONFIG_MAX_EXECUTORS, total);
  if (cpus < 0) cpus = hwt_allowed_cpus(NULL, 0);
  if (cpus > 0 && total > cpus)
    return refuse(HWT_CFG_CPUS, err, errlen,
                  "%d threads but this process may use %d CPU%s; keep executors x threads "
                  "<= %d", total, cpus, cpus == 1 ? "" : "s", cpus);
  return HWT_CFG_OK;
}

static int is_count(double v, int lo, int hi) {
  return isfinite(v) && v == floor(v) && v >= lo && v <= hi;
}

int hwt_config_check_op(const hwt_engine_config *c, int field, double value, double value2,
                        char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!c) return refuse(field, err, errlen, "no configuration");
  const hwt_sched_info *s = hwt_sched_by_name(c->scheduler);
  int workers = op_workers(c, s);
  char team[96];
  if (s && s->worker_groups) snprintf(team, sizeof team, "%s's workers", s->name);
  else snprintf(team, sizeof team, "one executor");
  switch (field) {
    case HWT_CFG_OP_THREADS:
      if (!is_count(value, 1, workers))
        return refuse(field, err, errlen,
                      "thread count must be an integer in 1..%d (the threads of %s), got %g",
                      workers, team, value);
      return HWT_CFG_OK;
    case HWT_CFG_OP_COST:
      if (!isfinite(value) || value < 0)
        return refuse(field, err, errlen, "cost must be seconds >= 0, got %g", value);
      return HWT_CFG_OK;
    case HWT_CFG_OP_PRIORITY:
      if (!isfinite(value))
        return refuse(field, err, errlen, "priority must be a finite number, got %g", value);
      return HWT_CFG_OK;
    case HWT_CFG_OP_CANDIDATES:
      if (!is_count(value, 1, workers) || !isfinite(value2) || value2 < 0)
        return refuse(field, err, errlen,
                      "candidate [%g, %g]: each is [threads 1..%d (the threads of %s), "
                      "seconds >= 0]", value, value2, workers, team);
      return HWT_CFG_OK;
    default:
      return refuse(field, err, errlen, "field %d is not a per-op value", field);
  }
}

int hwt_config_limit(int which) {
  switch (which) {
    case HWT_CFG_EXECUTORS: return HWT_CONFIG_MAX_EXECUTORS;
    case HWT_CFG_THREADS: return HWT_CONFIG_MAX_THREADS;
    case HWT_CFG_OP_CANDIDATES: return HWT_CONFIG_MAX_CANDIDATES;
    default: return -1;
  }
}
