/* Timed measurement loops for `hwtune scan`, in C so that microsecond-sized
 * ops are timed without interpreter overhead. Every function writes raw
 * per-repetition samples (seconds); statistics are computed by the caller.
 * All buffers are allocated, initialised and freed inside. Each call runs
 * through hwt_pool_run_teams (team 0's master is the caller, pinned while
 * timed), so keep calls short and loop in the caller: Ctrl-C is handled
 * between calls. Status returns are HWT_OK or a negative HWT_E* code. */
#ifndef HWTUNE_BENCH_H
#define HWTUNE_BENCH_H
#include "hwtune/api.h"
#include "hwtune/clock.h"
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"
#include "hwtune/op.h"
#include "hwtune/pool.h"

/* Counting under callgrind (count_marks.c): 0 when built without valgrind's
 * header (the marks do nothing), 1 with it, 2 with it and running under
 * valgrind. begin starts instrumenting and zeroes the counts; end writes a
 * profile dump labelled `name` and stops instrumenting. */
HWT_API int hwt_count_marks(void);
HWT_API void hwt_count_begin(void);
HWT_API void hwt_count_end(const char *name);
/* on != 0 (counting mode): hwt_bench_gemm and hwt_bench_eltwise run each
 * call's nth shares one after another on the calling thread, in thread
 * order, instead of in parallel, and hwt_bench_alloc places operands at
 * 2 MiB boundaries: the same work at the same simulated cache sets, counted
 * the same on every run (callgrind's one simulated cache otherwise sees
 * whatever interleaving its scheduler chose and wherever the heap put the
 * operands). For counting only; timings in this mode mean nothing. */
HWT_API void hwt_bench_counting_mode(int on);

/* GEMM [M,K]x[K,N] (row-major, beta 0) on team 0 with nth threads; `warmup`
 * untimed samples, then `reps` samples of `inner` calls each, written as
 * seconds per call into samples[reps]. */
HWT_API int hwt_bench_gemm(hwt_pool *p, int nth, int M, int K, int N, hwt_isa isa,
                           int warmup, int reps, int inner, double *samples);
/* Element-wise op over n floats on team 0 with nth threads. A call is
 * `regions` fork-joins over consecutive slices of the same n elements (1: one
 * fork-join), so more regions is the same work with more fork-join cost. */
HWT_API int hwt_bench_eltwise(hwt_pool *p, int nth, hwt_ew_op op, long n, hwt_isa isa,
                              int nt_stores, int warmup, int reps, int inner, int regions,
                              double *samples);

/* Co-running: every team of the pool loops the op (GEMM M,K,N when is_gemm,
 * else element-wise multiply of n floats) with all its threads for `seconds`.
 * Writes each team's flop count / elapsed into team_gflops[n_teams]. */
HWT_API int hwt_bench_corun(hwt_pool *p, int is_gemm, int M, int K, int N, long n,
                            hwt_isa isa, double seconds, double *team_gflops);

/* Peak FP32 FMA throughput: independent FMA chains in registers, on team 0
 * with nth threads. Returns GFLOPS (sum of the threads' rates), or negative
 * on error. */
HWT_API double hwt_probe_fma_peak(hwt_pool *p, int nth, hwt_isa isa, double seconds);
/* int8 (kind 0: u8 x s8, kernels/qgemm; GOPS) or bf16 (kind 1,
 * kernels/bgemm; GFLOPS) GEMM peak: every thread of team 0 loops its own
 * L2-resident 96x256x256 product for `seconds`. isa names the variant row
 * exactly: HWT_EISA where this CPU lacks it (AVX-512 without VNNI or
 * AVX512_BF16; AVX2 has no bf16 row), no fallback. */
HWT_API double hwt_probe_dot_peak(hwt_pool *p, int nth, hwt_isa isa, int kind, double seconds);
/* STREAM triad a = b + s*c over n floats per array, nth threads;
 * returns GB/s counting 3 arrays x 4 bytes x n per pass (12 bytes/elt, no
 * write-allocate counted), the better of regular and non-temporal stores
 * (half of `seconds` each), or negative on error. */
HWT_API double hwt_probe_triad(hwt_pool *p, int nth, long n, hwt_isa isa, double seconds);

/* Fork-join overhead: seconds per empty parallel region over `iters` (after
 * up to 1000 untimed regions), or negative on error. */
HWT_API double hwt_bench_forkjoin_pool(hwt_pool *p, int nth, long iters);
/* The same with an OpenMP parallel region; negative if built without OpenMP. */
HWT_API double hwt_bench_forkjoin_omp(int nth, long iters);
/* Core-to-core transfer: `reps` rounds of a `bytes` buffer written by
 * team 0's master then read by its other thread (another core when
 * pinned), and written by the master then read by it again; each read
 * timed by its reader alone, seconds into remote_s[reps] and local_s[reps]
 * (remote NaN when the read still ran on the writer's CPU). Team 0 needs
 * two threads. HWT_OK or a negative status. */
HWT_API int hwt_bench_xfer(hwt_pool *p, long bytes, int reps, double *remote_s, double *local_s);
/* A parked waiter's wake-up: `reps` rounds in which team 0's other thread
 * parks at once, sleeps for gap_s and is woken by the master; seconds from
 * the post to the waiter running again into wake_s[reps]. Team 0 needs two
 * threads. HWT_OK or a negative status. */
HWT_API int hwt_bench_wake(hwt_pool *p, double gap_s, int reps, double *wake_s);
/* Seconds an executor polls its empty slot before it parks (the engine's
 * spin, slots.h): the fastest of `reps` timings, or negative on error. */
HWT_API double hwt_bench_spin_s(int reps);

/* One op of a C graph, timed as the engine runs it (engine/bench/op_bench.c):
 * its hwt_op_impl prepared on the caller's buffers (in/out in the op's input
 * and output order; g and the buffers must outlive the handle) for nth
 * threads, each run one fork-join of its nth shares on team 0 of p, as the
 * engine runs an op on a team. Many ops may be prepared on one pool; runs of
 * one pool must not overlap. isa -1: hwt_isa_select(). create returns NULL
 * with a one-line reason in err when the op refuses its shapes or knobs. */
typedef struct hwt_bench_op hwt_bench_op;
HWT_API hwt_bench_op *hwt_bench_op_create(hwt_pool *p, int nth, const hwt_graph *g, int op,
                                          int isa, const float *const *in, float *const *out,
                                          char *err, size_t errlen);
/* `warmup` untimed samples, then `reps` samples of `inner` runs each, written
 * as seconds per run into samples[reps]. The outputs hold the last run's. */
HWT_API int hwt_bench_op_run(hwt_bench_op *b, int warmup, int reps, int inner,
                             double *samples);
HWT_API void hwt_bench_op_destroy(hwt_bench_op *b);

#endif
