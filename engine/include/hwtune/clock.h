/* The library's one clock: monotonic seconds (CLOCK_MONOTONIC), read by the
 * pool's spin-then-park waits, the engine's profiling events, the
 * measurement loops (hwtune/bench.h) and, through hwtune.native.bench, the
 * Python measurement layer. */
#ifndef HWTUNE_CLOCK_H
#define HWTUNE_CLOCK_H
#include "hwtune/api.h"

HWT_API double hwt_now(void); /* monotonic seconds */

#endif
