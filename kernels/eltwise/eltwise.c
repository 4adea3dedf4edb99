/* Element-wise driver: validates descriptors, splits [0, n) into per-thread
 * shares and dispatches each share to the variant for the requested ISA. */
#include <stdatomic.h>
#include "hwtune/eltwise.h"
#include "eltwise_impl.h"

/* hwt_isa_supported() executes CPUID, which traps to the hypervisor on a VM
 * (this host is one) and costs microseconds: as much as a whole 32K-float
 * multiply. The answer cannot change while the process runs, so cache it.
 * Racing first calls store the same value, hence relaxed atomics suffice. */
int hwt_ew_isa_ok(hwt_isa isa) {
  static _Atomic int known[HWT_ISA_COUNT]; /* 0 unknown, 1 no, 2 yes */
  if (isa < 0 || isa >= HWT_ISA_COUNT) return 0;
  int v = atomic_load_explicit(&known[isa], memory_order_relaxed);
  if (v == 0) {
    v = hwt_isa_supported(isa) ? 2 : 1;
    atomic_store_explicit(&known[isa], v, memory_order_relaxed);
  }
  return v == 2;
}

int hwt_eltwise_check(const hwt_eltwise_desc *d) {
  if (!d || d->op < 0 || d->op >= HWT_EW_COUNT) return HWT_EINVAL;
  if (!hwt_ew_isa_ok(d->isa)) return HWT_EISA;
  return HWT_OK;
}

void hwt_eltwise_run_part(const hwt_eltwise_desc *d, const float *a, const float *b,
                          const float *c, float *out, int tid, int nth) {
  if (!d || nth < 1 || tid < 0 || tid >= nth) return;
  size_t lo, hi;
  hwt_ew_share(out, d->n, tid, nth, &lo, &hi);
  if (lo >= hi) return;
  const float *bs = b ? b + lo : 0, *cs = c ? c + lo : 0;
  /* Callers validate with hwt_eltwise_check(); an ISA the CPU lacks still
   * falls through to the portable variant here rather than faulting. */
  switch (d->isa) {
#if defined(HWTUNE_HAVE_X86)
    case HWT_ISA_AVX512:
      if (hwt_ew_isa_ok(HWT_ISA_AVX512)) {
        hwt_ew_avx512(d->op, a + lo, bs, cs, out + lo, hi - lo, d->nt_stores);
        return;
      }
      break;
    case HWT_ISA_AVX2:
      if (hwt_ew_isa_ok(HWT_ISA_AVX2)) {
        hwt_ew_avx2(d->op, a + lo, bs, cs, out + lo, hi - lo, d->nt_stores);
        return;
      }
      break;
#endif
    default: break;
  }
  hwt_ew_generic(d->op, a + lo, bs, cs, out + lo, hi - lo, d->nt_stores);
}

const char *hwt_eltwise_name(hwt_ew_op op) {
  static const char *const names[HWT_EW_COUNT] = {"add", "sub", "mul", "fma", "sigmoid", "tanh", "relu"};
  return (op >= 0 && op < HWT_EW_COUNT) ? names[op] : "unknown";
}
