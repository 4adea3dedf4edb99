/* A scheduler: one row of the table in sched_table.c, as an op is a row of
 * an op family (hwtune/op.h). A row is the scheduler's public properties
 * (hwt_sched_info, engine.h: what the engine, Python and the stand-alone
 * runner branch on) and three functions. Adding a scheduler touches three
 * files: its own sched_<name>.c (which defines `const hwt_sched_impl
 * hwt_sched_<name>`), its entry in sched_table.c (declaration and row), and
 * its row of expected properties in tests/test_sched_table.py. Nothing else
 * names it: the engine, Python, the database, the stand-alone runner, the
 * CLI help and tests/c/test_engine_sched.c (which runs every row on random
 * DAGs) read the table.
 *
 * Contract, per engine:
 *   init(e, &state)   once, at create, after the plan, the levels and tiny/
 *                     solo flags, the op thread counts and the pool exist.
 *                     Allocates what runs need with hwt_sched_alloc (freed
 *                     with the engine) and sets *state (the engine keeps it
 *                     opaque). On failure it returns a negative status and
 *                     has undone whatever is not hwt_sched_alloc memory.
 *                     May be NULL: no state.
 *   run(e, state)     one run: every op of e->run_order exactly once, each
 *                     after all its predecessors (e->pending holds their
 *                     counts, hwt_exec_complete counts them down), through
 *                     hwt_exec_run_op or the op's run(ctx, ws, tid, nth)
 *                     parts; no allocation. Returns HWT_OK or the pool's
 *                     status.
 *   release(e, state) at destroy, after the pool is gone, when init
 *                     succeeded: what init acquired besides hwt_sched_alloc
 *                     memory (locks, condition variables). May be NULL.
 * The engine applies the properties: executors (single_team, worker_groups),
 * the arena's reuse policy (in_order), pinning (pins). */
#ifndef HWTUNE_EXEC_SCHED_H
#define HWTUNE_EXEC_SCHED_H
#include "exec_internal.h"

struct hwt_sched_impl {
  hwt_sched_info info;
  int (*init)(hwt_engine *e, void **state);
  int (*run)(hwt_engine *e, void *state);
  void (*release)(hwt_engine *e, void *state);
};

/* Not part of the library: a test program may define it to add its own
 * schedulers (rows after every built-in one). */
HWT_API const hwt_sched_impl *hwt_scheds_test(int *n);

/* Row i of the whole table, or NULL; the row named name (NULL: the
 * default_one row), or NULL. */
const hwt_sched_impl *hwt_sched_row(int i);
const hwt_sched_impl *hwt_sched_find(const char *name);

/* Zeroed, cache-line aligned memory owned by the engine (freed at destroy);
 * NULL when out of memory. For a scheduler's init only. */
void *hwt_sched_alloc(hwt_engine *e, size_t bytes);

#endif
