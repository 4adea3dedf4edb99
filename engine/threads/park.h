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

#endif
