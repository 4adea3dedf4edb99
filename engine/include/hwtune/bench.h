/* Timed measurement loops for `hwtune scan`, in C so that microsecond-sized
 * ops are timed without interpreter overhead. Every function writes raw
 * per-repetition samples (seconds); statistics are computed by the caller.
 * All buffers are allocated, initialised and freed inside. */
#ifndef HWTUNE_BENCH_H
#define HWTUNE_BENCH_H
#include "hwtune/api.h"
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"
#include "hwtune/pool.h"

HWT_API double hwt_now(void); /* monotonic seconds */

/* GEMM [M,K]x[K,N] on team 0 with nth threads; `inner` calls per sample. */
HWT_API int hwt_bench_gemm(hwt_pool *p, int nth, int M, int K, int N, hwt_isa isa,
                           int warmup, int reps, int inner, double *samples);
/* Element-wise op over n floats on team 0 with nth threads. */
HWT_API int hwt_bench_eltwise(hwt_pool *p, int nth, hwt_ew_op op, long n, hwt_isa isa,
                              int nt_stores, int warmup, int reps, int inner, double *samples);

/* Co-running: every team of the pool loops the op (GEMM M,K,N when is_gemm,
 * else element-wise multiply of n floats) with all its threads for `seconds`.
 * Writes each team's flop count / elapsed into team_gflops[n_teams]. */
HWT_API int hwt_bench_corun(hwt_pool *p, int is_gemm, int M, int K, int N, long n,
                            hwt_isa isa, double seconds, double *team_gflops);

/* Peak FP32 FMA throughput: independent FMA chains in registers, on team 0
 * with nth threads. Returns GFLOPS (all threads), or negative on error. */
HWT_API double hwt_probe_fma_peak(hwt_pool *p, int nth, hwt_isa isa, double seconds);
/* STREAM triad a = b + s*c over n floats per array, nth threads;
 * returns GB/s counting 3 arrays x 4 bytes x n per pass (12 bytes/elt, no
 * write-allocate counted), or negative on error. */
HWT_API double hwt_probe_triad(hwt_pool *p, int nth, long n, hwt_isa isa, double seconds);

/* Fork-join overhead: seconds per empty parallel region over `iters`. */
HWT_API double hwt_bench_forkjoin_pool(hwt_pool *p, int nth, long iters);
/* The same with an OpenMP parallel region; negative if built without OpenMP. */
HWT_API double hwt_bench_forkjoin_omp(int nth, long iters);

#endif
