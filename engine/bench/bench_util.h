/* Helpers shared by the measurement loops of engine/bench. */
#ifndef HWTUNE_BENCH_UTIL_H
#define HWTUNE_BENCH_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/pool.h"

/* n floats, 64-byte aligned, uninitialised; NULL on failure or n == 0. */
float *hwt_bench_alloc(size_t n);
/* Reproducible uniform values in [lo, hi). */
void hwt_bench_fill(float *x, size_t n, uint32_t seed, float lo, float hi);
/* HWT_OK if team 0 of p can run nth threads. */
int hwt_bench_check_team0(hwt_pool *p, int nth);
/* warmup >= 0, reps >= 1, inner >= 1 and somewhere to write the samples. */
int hwt_bench_loop_args_ok(int warmup, int reps, int inner, const double *samples);
/* Inside hwt_pool_run_teams: `warmup` untimed samples, then `reps` samples
 * of `inner` fork-joins of fn on team 0 with nth threads each, written as
 * seconds per fork-join into samples[reps]. */
int hwt_bench_run_timed(hwt_pool *p, int nth, hwt_task_fn fn, void *job, int warmup, int reps,
                        int inner, double *samples);

#endif
