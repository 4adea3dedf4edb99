/* Runtime CPU feature detection and ISA variant selection. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "hwtune/isa.h"

#if defined(HWTUNE_HAVE_X86)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static unsigned long long xgetbv0(void) {
  unsigned int eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((unsigned long long)edx << 32) | eax;
}
#endif

void hwt_cpu_features_get(hwt_cpu_features *f) {
  memset(f, 0, sizeof(*f));
#if defined(HWTUNE_HAVE_X86)
  unsigned int a, b, c, d;
  unsigned int max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf < 1) return;
  __cpuid(1, a, b, c, d);
  f->sse42 = (c >> 20) & 1;
  f->fma = (c >> 12) & 1;
  f->avx = (c >> 28) & 1;
  int osxsave = (c >> 27) & 1;
  unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  f->os_avx = (xcr0 & 0x6) == 0x6;            /* XMM and YMM state */
  f->os_avx512 = f->os_avx && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
  f->os_amx = (xcr0 & 0x60000) == 0x60000;   /* XTILECFG, XTILEDATA */
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512dq = (b >> 17) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
    f->avx512_vnni = (c >> 11) & 1;
    f->amx_bf16 = (d >> 22) & 1;
    f->amx_tile = (d >> 24) & 1;
    f->amx_int8 = (d >> 25) & 1;
    __cpuid_count(7, 1, a, b, c, d);
    f->avx512_bf16 = (a >> 5) & 1;
  }
#elif defined(__aarch64__)
  f->neon = 1; /* Advanced SIMD is mandatory on AArch64 */
#endif
}

/* Linux 5.16+ hands out AMX tile data state only to a process that asked:
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); ARCH_GET_XCOMP_PERM
 * reads the granted XSAVE feature mask (asm/prctl.h: 0x1022, 0x1023; the
 * XTILEDATA feature is bit 18). Spelled out: older headers lack them. */
#define HWT_ARCH_GET_XCOMP_PERM 0x1022
#define HWT_ARCH_REQ_XCOMP_PERM 0x1023
#define HWT_XFEATURE_XTILEDATA 18

int hwt_amx_status(int request) {
  hwt_cpu_features f;
  hwt_cpu_features_get(&f);
  int st = (f.amx_tile ? HWT_AMX_CPUID : 0) | (f.os_amx ? HWT_AMX_OS : 0);
#if defined(HWTUNE_HAVE_X86) && defined(__linux__) && defined(SYS_arch_prctl)
  if (st == (HWT_AMX_CPUID | HWT_AMX_OS)) {
    if (request) syscall(SYS_arch_prctl, HWT_ARCH_REQ_XCOMP_PERM, HWT_XFEATURE_XTILEDATA);
    unsigned long mask = 0;
    if (syscall(SYS_arch_prctl, HWT_ARCH_GET_XCOMP_PERM, &mask) == 0 &&
        (mask >> HWT_XFEATURE_XTILEDATA) & 1)
      st |= HWT_AMX_PERMITTED;
  }
#else
  (void)request;
#endif
  return st;
}

static int isa_supported_uncached(hwt_isa isa) {
  hwt_cpu_features f;
  switch (isa) {
    case HWT_ISA_GENERIC: return 1;
#if defined(HWTUNE_HAVE_X86)
    case HWT_ISA_AVX2:
      hwt_cpu_features_get(&f);
      return f.avx2 && f.fma && f.os_avx;
    case HWT_ISA_AVX512:
      hwt_cpu_features_get(&f);
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_avx512;
#endif
    default: (void)f; return 0;
  }
}

/* CPUID traps to the hypervisor on VMs (microseconds per call, measured by
 * the eltwise kernel tests on this KVM guest), and kernels ask on every call:
 * answer from a cache filled once. Encoded as support+1 so 0 means unknown;
 * concurrent first calls compute the same value. */
static atomic_int isa_cache[HWT_ISA_COUNT];

int hwt_isa_supported(hwt_isa isa) {
  if (isa < 0 || isa >= HWT_ISA_COUNT) return 0;
  int v = atomic_load_explicit(&isa_cache[isa], memory_order_relaxed);
  if (v == 0) {
    v = isa_supported_uncached(isa) + 1;
    atomic_store_explicit(&isa_cache[isa], v, memory_order_relaxed);
  }
  return v - 1;
}

hwt_isa hwt_isa_best(void) {
  if (hwt_isa_supported(HWT_ISA_AVX512)) return HWT_ISA_AVX512;
  if (hwt_isa_supported(HWT_ISA_AVX2)) return HWT_ISA_AVX2;
  return HWT_ISA_GENERIC;
}

static const char *const isa_names[HWT_ISA_COUNT] = {"generic", "avx2", "avx512"};

const char *hwt_isa_name(hwt_isa isa) {
  return (isa >= 0 && isa < HWT_ISA_COUNT) ? isa_names[isa] : "unknown";
}

int hwt_isa_from_name(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < HWT_ISA_COUNT; i++)
    if (strcmp(name, isa_names[i]) == 0) return i;
  return -1;
}

int hwt_isa_select(void) {
  const char *env = getenv("HWTUNE_ISA");
  if (!env || !*env) return hwt_isa_best();
  int isa = hwt_isa_from_name(env);
  if (isa < 0 || !hwt_isa_supported((hwt_isa)isa)) return HWT_EISA;
  return isa;
}

const char *hwt_version(void) { return "0.1.0"; }
