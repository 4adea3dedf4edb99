/* Internal to the element-wise kernels (not installed): the variant table
 * the driver dispatches through, and the rule that splits [0, n) between
 * threads (shared with the triad probe). */
#ifndef HWTUNE_ELTWISE_IMPL_H
#define HWTUNE_ELTWISE_IMPL_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/eltwise.h"

/* Flags of hwt_ew_variant.run. */
enum {
  HWT_EW_NT = 1,       /* non-temporal stores of out (honoured by SIMD variants; they fence) */
  HWT_EW_A_SCALAR = 2, /* a is one value for every element (a broadcast row) */
  HWT_EW_B_SCALAR = 4  /* b is one value for every element */
};

/* One variant, compiled from body.c for one ISA. */
typedef struct {
  /* out[0..n) = op(a, b, c) over one contiguous range; attr holds the op's
   * attributes (HWT_EW_MAX_ATTRS floats). */
  void (*run)(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
              size_t n, int flags, const float *attr);
  const double *max_err; /* per op: max |variant - exact| (0: bit-exact) */
} hwt_ew_variant;

extern const hwt_ew_variant hwt_ew_variant_generic;
#if defined(HWTUNE_HAVE_X86)
extern const hwt_ew_variant hwt_ew_variant_avx2, hwt_ew_variant_avx512;
#endif

/* The variant for isa if the CPU supports it, else the portable one; and
 * the one compiled for isa whatever the CPU (NULL if none). Both from the
 * registration table, kernels/common/variants.c. */
const hwt_ew_variant *hwt_ew_variant_for(hwt_isa isa);
const hwt_ew_variant *hwt_ew_variant_compiled(hwt_isa isa);

/* Operands one kernel call reads, by kind. */
static inline int hwt_ew_kind_operands(hwt_ew_kind kind) {
  return kind == HWT_EW_UNARY ? 1 : kind == HWT_EW_TERNARY ? 3 : 2;
}

/* Thread tid's share [*lo, *hi) of n floats written at `out`. Every interior
 * boundary falls on a 64-byte line of `out` (the few floats before the first
 * line boundary go to thread 0), so no two threads ever write the same line
 * and the shares need no synchronisation. Line counts are split evenly;
 * arithmetic avoids n * tid, which could overflow for huge n. */
static inline void hwt_ew_share(const float *out, size_t n, int tid, int nth, size_t *lo,
                                size_t *hi) {
  const size_t per_line = HWT_CACHELINE / sizeof(float);
  uintptr_t addr = (uintptr_t)out;
  size_t head = addr % sizeof(float) ? 0
                                     : ((HWT_CACHELINE - addr % HWT_CACHELINE) % HWT_CACHELINE) /
                                           sizeof(float);
  if (head > n) head = n;
  size_t lines = (n - head + per_line - 1) / per_line;
  size_t t0 = (size_t)tid, t1 = (size_t)tid + 1, q = lines / (size_t)nth, r = lines % (size_t)nth;
  size_t b0 = tid == 0 ? 0 : head + per_line * (q * t0 + r * t0 / (size_t)nth);
  size_t b1 = head + per_line * (q * t1 + r * t1 / (size_t)nth);
  *lo = b0 < n ? b0 : n;
  *hi = (tid + 1 == nth || b1 > n) ? n : b1;
}

#endif
