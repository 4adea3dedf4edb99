/* The critical-path scheduler: Graphi's design (sections 4.2-4.3) without a
 * dedicated scheduler thread.
 *
 * Executors are pinned teams. Ready ops wait in one max-heap ordered by
 * priority (the level: longest remaining path to the sink, from estimated or
 * profiled op costs, or the configured priority), so the op on the critical
 * path starts first. The heap is owned by whoever holds the "scheduler
 * token", an atomic flag: on a 2-core machine a scheduler thread would take
 * a core from compute, so the scheduling role moves between executor masters
 * instead. A master that finishes an op
 *   1. decrements its successors' dependency counters; successors that
 *      become ready are published to an MPSC inbox (an array of n_ops slots:
 *      every op is published once per run, so a fetch_add index suffices),
 *      except tiny ops (estimated below HWT_EXEC_TINY_S), which it runs
 *      inline: a dispatch would cost more than the op;
 *      One heavy successor it may keep and run next itself, inputs still in
 *      its cache, when nothing waiting is more critical by more than the
 *      graph's slack (levels.c: strict level order walks equal chains
 *      breadth-first and overflows the L2);
 *   2. tries to take the token; the holder drains the inbox into the heap and
 *      hands the highest-priority ops to idle executors, found through an
 *      idle bitmap, by writing the op into the executor's single-slot SPSC
 *      buffer and waking it;
 *      (depth 1, unlike Graphi's rings: an op is never committed to a busy
 *      executor, so priority decides at the last moment);
 *   3. marks itself idle in the bitmap, schedules again (it may get work
 *      itself) and waits on its slot (spin, then futex).
 * Lost wake-ups: a publisher or newly idle executor that fails to take the
 * token relies on the holder re-checking, after releasing it, for
 * published-but-undrained ops and for idle executors with a non-empty heap
 * (all seq_cst, so one of the two sides sees the other). The master whose
 * completion is the last one writes a FINISH value into every slot. */
#include <stdlib.h>
#include "exec_internal.h"
#include "prio_heap.h"

#define FINISH UINT32_MAX


int hwt_sched_cp_init(hwt_engine *e) {
  hwt_cp_state *c = &e->cp;
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  c->inbox = malloc(sizeof(_Atomic int) * n);
  c->heap = malloc(sizeof(int) * n);
  c->local = malloc(sizeof(int) * n * (size_t)e->executors);
  c->slot = aligned_alloc(HWT_CACHELINE, sizeof(hwt_padded_u32) * (size_t)e->executors);
  if (!c->inbox || !c->heap || !c->local || !c->slot) {
    hwt_sched_cp_free(e);
    return HWT_ENOMEM;
  }
  return HWT_OK;
}

void hwt_sched_cp_free(hwt_engine *e) {
  hwt_cp_state *c = &e->cp;
  free(c->inbox);
  free(c->heap);
  free(c->local);
  free(c->slot);
  c->inbox = NULL;
  c->heap = NULL;
  c->local = NULL;
  c->slot = NULL;
}

/* ---- the heap (prio_heap.h): token holder only ---- */

static void heap_push(hwt_engine *e, int *h, int *n, int op) { hwt_prio_heap_push(e, h, n, op); }
static int heap_pop(hwt_engine *e, int *h, int *n) { return hwt_prio_heap_pop(e, h, n); }

/* ---- scheduling role ---- */
static void cp_schedule(hwt_engine *e) {
  hwt_cp_state *c = &e->cp;
  for (;;) {
    int free_token = 0;
    if (!atomic_compare_exchange_strong(&c->token, &free_token, 1)) return;
    int h = atomic_load_explicit(&c->inbox_head, memory_order_relaxed);
    int op;
    while (h < e->n_ops && (op = atomic_load(&c->inbox[h])) >= 0) {
      heap_push(e, c->heap, &c->heap_size, op);
      h++;
    }
    atomic_store_explicit(&c->inbox_head, h, memory_order_relaxed);
    uint64_t idle = atomic_load(&c->idle);
    while (idle && c->heap_size > 0) {
      int x = __builtin_ctzll(idle);
      idle &= idle - 1;
      atomic_fetch_and(&c->idle, ~((uint64_t)1 << x));
      hwt_slot_post(&c->slot[x].v, &c->slot[x].asleep,
                    (uint32_t)heap_pop(e, c->heap, &c->heap_size) + 1);
    }
    int left = c->heap_size;
    atomic_store(&c->token, 0);
    int more = (h < e->n_ops && atomic_load(&c->inbox[h]) >= 0) ||
               (left > 0 && atomic_load(&c->idle) != 0);
    if (!more) return;
  }
}

/* ---- executor side ---- */
typedef struct {
  hwt_engine *e;
  int *stack, n; /* this master's tiny ops waiting to run inline */
  int published;
  int cont;      /* a heavy successor this master may keep, or -1 */
} ready_ctx;

static void publish(ready_ctx *r, int s) {
  hwt_cp_state *c = &r->e->cp;
  int i = atomic_fetch_add(&c->inbox_tail, 1);
  atomic_store(&c->inbox[i], s);
  r->published = 1;
}

static void on_ready(void *arg, int s) {
  ready_ctx *r = arg;
  if (r->e->tiny[s]) {
    r->stack[r->n++] = s;
    return;
  }
  if (r->cont < 0 && r->e->slack > 0)
    r->cont = s;
  else
    publish(r, s);
}

/* Whether the master that made s ready runs it next: nothing waiting is more
 * critical than s by more than the graph's slack (levels.c). Decided with
 * the token (the heap is the holder's); without it, s goes the usual way. */
static int keep_successor(hwt_engine *e, int s) {
  hwt_cp_state *c = &e->cp;
  int free_token = 0;
  if (!atomic_compare_exchange_strong(&c->token, &free_token, 1)) return 0;
  int h = atomic_load_explicit(&c->inbox_head, memory_order_relaxed), op;
  while (h < e->n_ops && (op = atomic_load(&c->inbox[h])) >= 0) {
    heap_push(e, c->heap, &c->heap_size, op);
    h++;
  }
  atomic_store_explicit(&c->inbox_head, h, memory_order_relaxed);
  int keep = c->heap_size == 0 || e->prio[c->heap[0]] - e->prio[s] <= e->slack;
  atomic_store(&c->token, 0);
  /* What was drained may be owed to idle executors. */
  cp_schedule(e);
  return keep;
}

static void finish_run(hwt_engine *e) {
  hwt_cp_state *c = &e->cp;
  for (int x = 0; x < e->executors; x++) {
    hwt_slot_post(&c->slot[x].v, &c->slot[x].asleep, FINISH);
  }
}

/* Runs op, then every tiny op it (transitively) makes ready. */
static void execute(hwt_engine *e, int team, int op) {
  hwt_cp_state *c = &e->cp;
  ready_ctx r = {e, c->local + (size_t)team * (size_t)e->n_ops, 0, 0, -1};
  for (;;) {
    hwt_exec_prefetch_succ(e, op);
    hwt_exec_run_op(e, team, op);
    r.published = 0;
    r.cont = -1;
    hwt_exec_complete(e, op, on_ready, &r);
    if (r.cont >= 0) {
      if (keep_successor(e, r.cont))
        r.stack[r.n++] = r.cont;
      else
        publish(&r, r.cont);
    }
    if (atomic_fetch_add(&c->completed, 1) == e->n_run - 1) finish_run(e);
    /* Hand the heavy successors to idle executors before running the tiny
     * ones here, so they start as early as possible. */
    if (r.published) cp_schedule(e);
    if (r.n == 0) return;
    op = r.stack[--r.n];
  }
}

static int wait_slot(hwt_engine *e, int team) {
  _Atomic uint32_t *w = &e->cp.slot[team].v;
  uint32_t v = hwt_slot_wait(w, &e->cp.slot[team].asleep, e->spin);
  if (v == FINISH) return -1;
  atomic_store_explicit(w, 0, memory_order_relaxed);
  return (int)v - 1;
}

static void cp_team(void *arg, int team) {
  hwt_engine *e = arg;
  hwt_cp_state *c = &e->cp;
  for (;;) {
    atomic_fetch_or(&c->idle, (uint64_t)1 << team);
    cp_schedule(e);
    int op = wait_slot(e, team);
    if (op < 0) return;
    execute(e, team, op);
  }
}

int hwt_sched_cp_run(hwt_engine *e) {
  hwt_cp_state *c = &e->cp;
  atomic_store(&c->token, 0);
  atomic_store(&c->idle, 0);
  atomic_store(&c->inbox_tail, 0);
  atomic_store(&c->inbox_head, 0);
  atomic_store(&c->completed, 0);
  for (int i = 0; i < e->n_ops; i++) atomic_store_explicit(&c->inbox[i], -1, memory_order_relaxed);
  for (int x = 0; x < e->executors; x++) {
    atomic_store_explicit(&c->slot[x].v, e->n_run == 0 ? FINISH : 0, memory_order_relaxed);
    atomic_store_explicit(&c->slot[x].asleep, 0, memory_order_relaxed);
  }
  c->heap_size = 0;
  for (int i = 0; i < e->n_roots; i++) heap_push(e, c->heap, &c->heap_size, e->roots[i]);
  return hwt_pool_run_teams(e->pool, cp_team, e);
}
