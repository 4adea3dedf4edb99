/* What an engine configuration may hold: the one set of rules that
 * hwt_engine_create, `hwtune run` (through ctypes) and the stand-alone
 * hwtune-run all apply, so a stored config that one of them refuses the
 * others refuse with the same words. Scalar fields are checked together
 * (hwt_config_check); a per-op value as stored in results.db (a map entry,
 * before it becomes an array slot where 0 / -1 mean "not given") one at a
 * time (hwt_config_check_op). Implementation: engine/exec/config_check.c. */
#ifndef HWTUNE_CONFIG_CHECK_H
#define HWTUNE_CONFIG_CHECK_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/engine.h"

/* Executors (and corun workers): the schedulers keep per-executor state in
 * 64-entry tables and 64-bit masks. */
#define HWT_CONFIG_MAX_EXECUTORS 64
/* Threads per executor: above any machine hwtune is designed for (256
 * cores), far below an int overflow of executors x threads. */
#define HWT_CONFIG_MAX_THREADS 4096
/* Thread-count candidates per op (corun). */
#define HWT_CONFIG_MAX_CANDIDATES 64

/* Which field a check refused (the return value), so a caller can name its
 * own flag or column. */
typedef enum {
  HWT_CFG_OK = 0,
  HWT_CFG_SCHEDULER = 1,
  HWT_CFG_EXECUTORS = 2,
  HWT_CFG_THREADS = 3,
  HWT_CFG_PIN = 4,
  HWT_CFG_CPUS = 5, /* executors x threads above the CPUs the run may use */
  HWT_CFG_OP_THREADS = 6,
  HWT_CFG_OP_COST = 7,
  HWT_CFG_OP_PRIORITY = 8,
  HWT_CFG_OP_CANDIDATES = 9
} hwt_config_field;

/* Scheduler, executors, threads per executor, pin, and the CPU budget:
 * cpus > 0 is how many CPUs the run may use (executors x threads must fit:
 * `hwtune run` and hwtune-run refuse to oversubscribe); 0 checks no budget
 * (hwt_engine_create: an oversubscribed engine runs unpinned); < 0 uses
 * this process's allowed CPUs (hwt_allowed_cpus: affinity, taskset).
 * Returns HWT_CFG_OK or the first field refused, with a one-line reason in
 * err. */
HWT_API int hwt_config_check(const hwt_engine_config *c, int cpus, char *err, size_t errlen);

/* One stored per-op value under config c (its scheduler's row and team
 * sizes: a worker-group scheduler's ops count all its workers):
 * field HWT_CFG_OP_THREADS (value: threads), HWT_CFG_OP_COST (value:
 * seconds), HWT_CFG_OP_PRIORITY (value), or HWT_CFG_OP_CANDIDATES (value:
 * threads, value2: seconds). Returns HWT_CFG_OK or field, with the reason
 * in err ("must be ..., got ..."; the caller names the op). */
HWT_API int hwt_config_check_op(const hwt_engine_config *c, int field, double value,
                                double value2, char *err, size_t errlen);

/* The limits above, for bindings: which is a hwt_config_field
 * (HWT_CFG_EXECUTORS, HWT_CFG_THREADS, HWT_CFG_OP_CANDIDATES); -1 else. */
HWT_API int hwt_config_limit(int which);

#endif
