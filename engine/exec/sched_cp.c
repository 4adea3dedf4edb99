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
 *      breadth-first and overflows the L2; with no slack, when nothing
 *      waiting is more critical and it has no tiny ops to run: cp_offers);
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
 * completion is the last one writes FINISH into every slot (slots.h). */
#include "prio_heap.h"
#include "slots.h"

typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic int token;   /* 1 while someone schedules */
  _Alignas(HWT_CACHELINE) _Atomic uint64_t idle; /* bit x: executor x waits */
  _Alignas(HWT_CACHELINE) _Atomic int inbox_tail;
  _Alignas(HWT_CACHELINE) _Atomic int inbox_head; /* written by the token holder */
  _Alignas(HWT_CACHELINE) _Atomic int completed;
  _Atomic int *inbox;        /* [n_ops] ready ops, -1 until published */
  int *heap;                 /* [n_ops] max-heap on prio, token holder only */
  int heap_size;             /* token holder only */
  hwt_slot *slot;            /* [executors] */
  int *local;                /* [executors * n_ops] per-master inline stacks */
} cp_state;

/* ---- the decisions (shared with the virtual-time version below) ---- */

/* What a master does with a successor s of the op it finished, as it
 * becomes ready: run it inline (tiny), consider keeping it (the first heavy
 * one), or publish it for the scheduling role. */
enum { CP_INLINE, CP_CONSIDER, CP_PUBLISH };
static inline int cp_on_ready(const hwt_engine *e, int s, int have_candidate) {
  if (e->tiny[s]) return CP_INLINE;
  if (!have_candidate) return CP_CONSIDER;
  return CP_PUBLISH;
}

/* Whether the considered successor is offered to keep_successor at all.
 * With no slack too, it is kept when nothing waiting is more critical,
 * where the dispatch would have given it to the lowest idle executor, on
 * a chain always the other one: the masters took turns op by op, and
 * resnet18's critical-path 2x1 switched executors on 63 of its 70 ops (the
 * shared queue's 6), each op's input in the other core's cache, and ran
 * 39.1-40.0 ms (two reps) against 36.3-41.1 ms for the shared queue's 2x1;
 * keeping, 32.2 ms against 34.8 (one rep; 2-vCPU AMD EPYC Zen 3, avx2).
 * But with no slack only while the master
 * has no tiny ops waiting (n_inline): the kept op runs first and would
 * hold them up, where dispatched it runs beside them. */
static inline int cp_offers(const hwt_engine *e, int n_inline) {
  return e->slack > 0 || n_inline == 0;
}

/* Graphi's dispatch step: the most critical ready op goes to the lowest
 * idle executor. Returns that executor (removed from *idle) with the op in
 * *op, or -1 when no executor is idle or nothing is ready. */
static inline int cp_assign(const hwt_engine *e, uint64_t *idle, int *heap, int *heap_size,
                            int *op) {
  if (!*idle || *heap_size == 0) return -1;
  int x = __builtin_ctzll(*idle);
  *idle &= *idle - 1;
  *op = hwt_prio_heap_pop(e, heap, heap_size);
  return x;
}

static int cp_init(hwt_engine *e, void **state) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1);
  cp_state *c = hwt_sched_alloc(e, sizeof *c);
  if (!c) return HWT_ENOMEM;
  c->inbox = hwt_sched_alloc(e, sizeof(_Atomic int) * n);
  c->heap = hwt_sched_alloc(e, sizeof(int) * n);
  c->local = hwt_sched_alloc(e, sizeof(int) * n * (size_t)e->executors);
  c->slot = hwt_slots_alloc(e, e->executors);
  if (!c->inbox || !c->heap || !c->local || !c->slot) return HWT_ENOMEM;
  *state = c;
  return HWT_OK;
}

/* ---- scheduling role (token holder) ---- */

/* Moves the published ops into the heap; returns the inbox position reached. */
static int drain_inbox(hwt_engine *e, cp_state *c) {
  int h = atomic_load_explicit(&c->inbox_head, memory_order_relaxed), op;
  while (h < e->n_ops && (op = atomic_load(&c->inbox[h])) >= 0) {
    hwt_prio_heap_push(e, c->heap, &c->heap_size, op);
    h++;
  }
  atomic_store_explicit(&c->inbox_head, h, memory_order_relaxed);
  return h;
}

static void cp_schedule(hwt_engine *e) {
  cp_state *c = e->sched_state;
  for (;;) {
    int free_token = 0;
    if (!atomic_compare_exchange_strong(&c->token, &free_token, 1)) return;
    int h = drain_inbox(e, c);
    uint64_t idle = atomic_load(&c->idle);
    int x, op;
    while ((x = cp_assign(e, &idle, c->heap, &c->heap_size, &op)) >= 0) {
      atomic_fetch_and(&c->idle, ~((uint64_t)1 << x));
      hwt_slot_give(&c->slot[x], op);
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
  cp_state *c;
  int *stack, n; /* this master's tiny ops waiting to run inline */
  int published;
  int cont;      /* a heavy successor this master may keep, or -1 */
} ready_ctx;

static void publish(ready_ctx *r, int s) {
  int i = atomic_fetch_add(&r->c->inbox_tail, 1);
  atomic_store(&r->c->inbox[i], s);
  r->published = 1;
}

static void on_ready(void *arg, int s) {
  ready_ctx *r = arg;
  switch (cp_on_ready(r->e, s, r->cont >= 0)) {
    case CP_INLINE: r->stack[r->n++] = s; break;
    case CP_CONSIDER: r->cont = s; break;
    default: publish(r, s);
  }
}

/* Whether the master that made s ready runs it next: nothing waiting is more
 * critical than s by more than the graph's slack (levels.c). Decided with
 * the token (the heap is the holder's); without it, s goes the usual way. */
static int keep_successor(hwt_engine *e, cp_state *c, int s) {
  int free_token = 0;
  if (!atomic_compare_exchange_strong(&c->token, &free_token, 1)) return 0;
  drain_inbox(e, c);
  int keep = hwt_prio_heap_keeps(e, c->heap, c->heap_size, s);
  atomic_store(&c->token, 0);
  /* What was drained may be owed to idle executors. */
  cp_schedule(e);
  return keep;
}

/* Runs op, then every tiny op it (transitively) makes ready. */
static void execute(hwt_engine *e, cp_state *c, int team, int op) {
  ready_ctx r = {e, c, c->local + (size_t)team * (size_t)e->n_ops, 0, 0, -1};
  for (;;) {
    hwt_exec_prefetch_succ(e, op);
    hwt_exec_run_op(e, team, op);
    r.published = 0;
    r.cont = -1;
    hwt_exec_complete(e, op, on_ready, &r);
    if (r.cont >= 0) {
      if (cp_offers(e, r.n) && keep_successor(e, c, r.cont))
        r.stack[r.n++] = r.cont;
      else
        publish(&r, r.cont);
    }
    if (atomic_fetch_add(&c->completed, 1) == e->n_run - 1) hwt_slots_finish(c->slot, e->executors);
    /* Hand the heavy successors to idle executors before running the tiny
     * ones here, so they start as early as possible. */
    if (r.published) cp_schedule(e);
    if (r.n == 0) return;
    op = r.stack[--r.n];
  }
}

/* The first ops were handed out before the teams started (cp_run). */
static void cp_team(void *arg, int team) {
  hwt_engine *e = arg;
  cp_state *c = e->sched_state;
  for (;;) {
    int op = hwt_slot_take(&c->slot[team], e->spin);
    if (op < 0) return;
    execute(e, c, team, op);
    atomic_fetch_or(&c->idle, (uint64_t)1 << team);
    cp_schedule(e);
  }
}

/* Every executor idle (bits 0 .. executors-1). */
static uint64_t all_idle(const hwt_engine *e) {
  return e->executors >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << e->executors) - 1;
}

static int cp_run(hwt_engine *e, void *state) {
  cp_state *c = state;
  atomic_store(&c->token, 0);
  atomic_store(&c->idle, 0);
  atomic_store(&c->inbox_tail, 0);
  atomic_store(&c->inbox_head, 0);
  atomic_store(&c->completed, 0);
  for (int i = 0; i < e->n_ops; i++) atomic_store_explicit(&c->inbox[i], -1, memory_order_relaxed);
  hwt_slots_reset(c->slot, e->executors, e->n_run == 0);
  hwt_prio_heap_roots(e, c->heap, &c->heap_size);
  /* The roots go out before any team starts, so which executor gets which
   * does not depend on which thread wakes first. */
  atomic_store(&c->idle, all_idle(e));
  cp_schedule(e);
  return hwt_pool_run_teams(e->pool, cp_team, e);
}

/* ---- virtual time ----
 * The threaded control flow step by step: a master finishes an op
 * (execute's loop body), runs its inline stack, then goes idle and
 * schedules (cp_team). The token is the serial section. */

typedef struct {
  int *heap, heap_size;
  uint64_t idle;
  int *stack, *n;  /* [executors * n_ops], [executors]: each master's inline stack */
} cp_vstate;

static int cp_vinit(hwt_engine *e, void **vstate) {
  size_t n = (size_t)(e->n_ops > 0 ? e->n_ops : 1), x = (size_t)e->executors;
  cp_vstate *c = hwt_sched_alloc(e, sizeof *c);
  if (!c || !(c->heap = hwt_sched_alloc(e, sizeof(int) * n)) ||
      !(c->stack = hwt_sched_alloc(e, sizeof(int) * n * x)) ||
      !(c->n = hwt_sched_alloc(e, sizeof(int) * x)))
    return HWT_ENOMEM;
  *vstate = c;
  return HWT_OK;
}

/* cp_schedule: heap tops to idle executors; `self` continues without a
 * wake-up when it gets one. */
static void cp_vschedule(hwt_vrun *v, cp_vstate *c, int self) {
  hwt_engine *e = v->e;
  hwt_vrun_section(v);
  int x, op;
  uint64_t idle = c->idle;
  while ((x = cp_assign(e, &idle, c->heap, &c->heap_size, &op)) >= 0) {
    c->idle &= ~((uint64_t)1 << x);
    hwt_vrun_start(v, x, op, 0, e->op_nth[op], x != self);
  }
}

static void cp_vstart(hwt_vrun *v, void *vstate) {
  cp_vstate *c = vstate;
  hwt_engine *e = v->e;
  hwt_prio_heap_roots(e, c->heap, &c->heap_size);
  for (int x = 0; x < e->executors; x++) c->n[x] = 0;
  c->idle = all_idle(e);
  cp_vschedule(v, c, -1);
}

typedef struct {
  const hwt_engine *e;
  cp_vstate *c;
  int *stack, *n;
  int cont, published;
} cp_vready;

static void cp_von_ready(void *arg, int s) {
  cp_vready *r = arg;
  switch (cp_on_ready(r->e, s, r->cont >= 0)) {
    case CP_INLINE: r->stack[(*r->n)++] = s; break;
    case CP_CONSIDER: r->cont = s; break;
    default:
      hwt_prio_heap_push(r->e, r->c->heap, &r->c->heap_size, s);
      r->published = 1;
  }
}

static void cp_vdone(hwt_vrun *v, void *vstate, int w, int op, int last) {
  (void)last;
  cp_vstate *c = vstate;
  hwt_engine *e = v->e;
  cp_vready r = {e, c, c->stack + (size_t)w * (size_t)e->n_ops, &c->n[w], -1, 0};
  hwt_exec_complete(e, op, cp_von_ready, &r);
  if (r.cont >= 0) {
    if (!cp_offers(e, *r.n)) {
      hwt_prio_heap_push(e, c->heap, &c->heap_size, r.cont);  /* publish */
      r.published = 1;
    } else {
      /* keep_successor: decided with the token, then what it drained goes out */
      hwt_vrun_section(v);
      if (hwt_prio_heap_keeps(e, c->heap, c->heap_size, r.cont)) {
        r.stack[(*r.n)++] = r.cont;
      } else {
        hwt_prio_heap_push(e, c->heap, &c->heap_size, r.cont);
        r.published = 1;
      }
      cp_vschedule(v, c, w);
    }
  }
  if (r.published) cp_vschedule(v, c, w);
  if (hwt_vrun_next_inline(v, w, r.stack, r.n)) return;
  c->idle |= (uint64_t)1 << w;
  cp_vschedule(v, c, w);
}

const hwt_sched_impl hwt_sched_critical_path = {
    .info = {.name = "critical-path",
             .summary = "Graphi: pinned executor teams, the most critical ready op first "
                        "(levels from op costs)",
             .needs_costs = 1,
             .pins = HWT_PIN_BY_DEFAULT,
             .default_many = 1},
    .init = cp_init,
    .run = cp_run,
    .vinit = cp_vinit,
    .vstart = cp_vstart,
    .vdone = cp_vdone,
    .vplaces = 1,
};
