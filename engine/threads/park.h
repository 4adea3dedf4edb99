/* Sleeping on a 32-bit word until another thread changes it: the slow path of
 * the pool's spin-then-sleep waits. Linux uses a private futex; elsewhere a
 * striped mutex + condition variable gives the same contract.
 *
 * Contract: hwt_park_wait() returns once *w != expected (it may also return
 * spuriously; callers re-check their own condition). A waker changes *w first
 * and then calls hwt_park_wake(). */
#ifndef HWTUNE_POOL_PARK_H
#define HWTUNE_POOL_PARK_H
#include <stdatomic.h>
#include <stdint.h>

void hwt_park_wait(_Atomic uint32_t *w, uint32_t expected);
void hwt_park_wake(_Atomic uint32_t *w);

/* The spin half's hint, one per empty poll: x86's pause (baseline on every
 * x86, so the generic build uses it too), aarch64's yield, nothing
 * elsewhere. Every spin-wait of the pool and the schedulers uses it. */
static inline void hwt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

#endif
