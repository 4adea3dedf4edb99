/* Fork-join overhead of an OpenMP parallel region: the comparison point for
 * hwt_bench_forkjoin_pool. Built with OpenMP flags when the compiler has it
 * (engine/engine.cmake defines HWTUNE_HAVE_OPENMP). */
#include "hwtune/bench.h"

#if defined(HWTUNE_HAVE_OPENMP)
#include <omp.h>

/* GCC deletes a parallel region whose body is empty; an empty asm keeps the
 * region (and its fork and join) without adding work. */
#define REGION(nth)                            \
  _Pragma("omp parallel num_threads(nth)") { \
    __asm__ volatile("" ::: "memory");         \
  }

double hwt_bench_forkjoin_omp(int nth, long iters) {
  if (nth < 1 || iters < 1) return HWT_EINVAL;
  /* The runtime creates its threads at the first region; warm up like the
   * pool measurement does. */
  for (long i = 0; i < (iters < 1000 ? iters : 1000); i++) REGION(nth)
  double t0 = hwt_now();
  for (long i = 0; i < iters; i++) REGION(nth)
  return (hwt_now() - t0) / (double)iters;
}
#else
double hwt_bench_forkjoin_omp(int nth, long iters) {
  (void)nth, (void)iters;
  return -1.0; /* built without OpenMP */
}
#endif
