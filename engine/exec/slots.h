/* Single-op slots: how a dispatching scheduler hands an op to a waiting
 * executor or worker (critical-path, corun). Each waiter owns one slot, one
 * cache line, so that waiters polling their own slot do not invalidate each
 * other's lines. A slot holds op + 1, HWT_SLOT_FINISH once the run is over,
 * or 0 when empty; the poster writes it only while the owner waits (the
 * scheduler's idle set says so), the owner empties it. Inline: this is the
 * dispatch path. */
#ifndef HWTUNE_EXEC_SLOTS_H
#define HWTUNE_EXEC_SLOTS_H
#include <stdatomic.h>
#include <stdint.h>
#include "sched.h"
#include "../threads/park.h"

#define HWT_SLOT_FINISH UINT32_MAX

typedef struct {
  _Alignas(HWT_CACHELINE) _Atomic uint32_t v; /* op + 1, HWT_SLOT_FINISH, 0 when empty */
  _Atomic uint32_t asleep;                    /* the owner is (about to be) parked on v */
  int tid, nth;                               /* the part to run (corun): written before v */
} hwt_slot;

/* The spinning half of a wait: up to `spin` acquire loads of v, a pause
 * after each empty one; v's value, or 0 if it stayed empty. The planner
 * times this loop on the host (hwt_bench_spin_s, bench/wake.c). */
static inline uint32_t hwt_slot_poll(_Atomic uint32_t *v, int spin) {
  uint32_t x;
  for (int i = 0; i < spin; i++) {
    if ((x = atomic_load_explicit(v, memory_order_acquire)) != 0) return x;
    hwt_cpu_relax();
  }
  return 0;
}

/* A slot's wait and post. A futex wake is a system call even with nobody
 * asleep (~1 us, not separately measured here), paid per dispatch (1000 a
 * run on the wide graph) although the waiter usually still spins; so the
 * poster wakes only a waiter that said it sleeps. seq_cst on both sides
 * (post: store v, load asleep; wait: store asleep, load v): at least one sees
 * the other, so no wake-up is lost. */
static inline uint32_t hwt_slot_wait(hwt_slot *s, int spin) {
  uint32_t x = hwt_slot_poll(&s->v, spin);
  if (x != 0) return x;
  for (;;) {
    atomic_store(&s->asleep, 1);
    if ((x = atomic_load(&s->v)) != 0) break;
    if (hwt_exec_wait_hook) hwt_exec_wait_hook(1);
    hwt_park_wait(&s->v, 0);
    if (hwt_exec_wait_hook) hwt_exec_wait_hook(0);
  }
  atomic_store_explicit(&s->asleep, 0, memory_order_relaxed);
  return x;
}

static inline void hwt_slot_post(hwt_slot *s, uint32_t x) {
  atomic_store(&s->v, x);
  if (atomic_load(&s->asleep)) hwt_park_wake(&s->v);
}

/* Waits for the owner's next op and empties the slot: the op, or -1 when
 * the run is over. */
static inline int hwt_slot_take(hwt_slot *s, int spin) {
  uint32_t x = hwt_slot_wait(s, spin);
  if (x == HWT_SLOT_FINISH) return -1;
  atomic_store_explicit(&s->v, 0, memory_order_relaxed);
  return (int)x - 1;
}

static inline void hwt_slot_give(hwt_slot *s, int op) { hwt_slot_post(s, (uint32_t)op + 1); }

/* n slots for a scheduler's init (engine-owned memory); NULL if out of memory. */
static inline hwt_slot *hwt_slots_alloc(hwt_engine *e, int n) {
  return hwt_sched_alloc(e, sizeof(hwt_slot) * (size_t)(n > 0 ? n : 1));
}

/* Before a run: every slot empty, or FINISH already when there is nothing
 * to run (nobody would ever post it). */
static inline void hwt_slots_reset(hwt_slot *s, int n, int nothing_to_run) {
  for (int i = 0; i < n; i++) {
    atomic_store_explicit(&s[i].v, nothing_to_run ? HWT_SLOT_FINISH : 0, memory_order_relaxed);
    atomic_store_explicit(&s[i].asleep, 0, memory_order_relaxed);
  }
}

/* The run's last completion: every owner leaves its wait. */
static inline void hwt_slots_finish(hwt_slot *s, int n) {
  for (int i = 0; i < n; i++) hwt_slot_post(&s[i], HWT_SLOT_FINISH);
}

#endif
