/* A scheduler: one row of the table in sched_table.c, as an op is a row of
 * an op family (hwtune/op.h). A row is the scheduler's public properties
 * (hwt_sched_info, engine.h: what the engine, Python and the stand-alone
 * runner branch on), three functions for threaded runs and three for
 * virtual-time runs (the simulator, simulate.c). Adding a scheduler touches three
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
 * the arena's reuse policy (in_order), pinning (pins).
 *
 * Virtual time (vrun.h): the same scheduler on a simulated clock, driven
 * one event at a time by simulate.c. Its decisions (which ready op next, on
 * which executor or group of workers, what runs inline, what a master keeps)
 * are the functions the threaded run calls, shared inside sched_<name>.c;
 * only the control flow around them (locks, slots, waiting) is written twice,
 * and tests/c/test_engine_simulate.c checks that both give the same
 * schedule on random DAGs.
 *   vinit(e, &vstate)  once per simulated configuration, after what init
 *                      needs except the pool; hwt_sched_alloc memory only.
 *   vstart(v, vstate)  a run starts: every worker idle, e->roots ready.
 *   vdone(v, vstate, w, op, last)
 *                      a part of op ended on worker w (an executor, or a
 *                      worker_groups worker); last: it was the op's last
 *                      running part (a worker_groups op's part 0, which
 *                      the driver ends after the others: its worker waits
 *                      for them and completes the op). Starts what the
 *                      scheduler would start now, through hwt_vrun_start.
 *   vplaces            1: the scheduler decides which executor runs an op
 *                      (it pushes), so the simulated placement is the real
 *                      one; 0: executors pull, whichever comes first. */
#ifndef HWTUNE_EXEC_SCHED_H
#define HWTUNE_EXEC_SCHED_H
#include "exec_internal.h"
#include "vrun.h"

struct hwt_sched_impl {
  hwt_sched_info info;
  int (*init)(hwt_engine *e, void **state);
  int (*run)(hwt_engine *e, void *state);
  void (*release)(hwt_engine *e, void *state);
  int (*vinit)(hwt_engine *e, void **vstate);
  void (*vstart)(hwt_vrun *v, void *vstate);
  void (*vdone)(hwt_vrun *v, void *vstate, int w, int op, int last);
  int vplaces;
};

/* Not part of the library: a test program may define it to add its own
 * schedulers (rows after every built-in one). */
HWT_API const hwt_sched_impl *hwt_scheds_test(int *n);

/* Row i of the whole table, or NULL; the row named name (NULL: the
 * default_one row), or NULL. */
const hwt_sched_impl *hwt_sched_row(int i);
const hwt_sched_impl *hwt_sched_find(const char *name);

/* Zeroed, cache-line aligned memory owned by the engine (freed at destroy,
 * or by hwt_sched_free_all); NULL when out of memory. For a scheduler's init
 * and vinit only. */
void *hwt_sched_alloc(hwt_engine *e, size_t bytes);
void hwt_sched_free_all(hwt_engine *e);

/* Test-only, weak (NULL in the library): called by an executor that is about
 * to sleep waiting for work (entering 1) and when it woke (0), so a test can
 * tell when every thread has settled (tests/c/test_engine_simulate.c). The
 * slow path of a wait only, never the dispatch path. */
HWT_API void hwt_exec_wait_hook(int entering);
#pragma weak hwt_exec_wait_hook

#endif
