/* Runtime ISA detection and variant selection.
 * One build carries every variant; hwt_isa_select() picks the best one the CPU
 * and OS support, unless HWTUNE_ISA=generic|avx2|avx512 forces one. */
#ifndef HWTUNE_ISA_H
#define HWTUNE_ISA_H
#include "hwtune/api.h"

typedef enum {
  HWT_ISA_GENERIC = 0, /* portable C: runs anywhere, and is the test oracle's sibling */
  HWT_ISA_AVX2 = 1,    /* AVX2 + FMA */
  HWT_ISA_AVX512 = 2,  /* AVX-512 F/BW/VL/DQ */
  HWT_ISA_COUNT = 3
} hwt_isa;

/* CPU features as reported by CPUID and usable given OS state saving (XGETBV). */
typedef struct {
  int sse42, avx, avx2, fma;
  int avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_vnni;
  int amx_tile, amx_bf16, amx_int8;
  int neon;
  int os_avx, os_avx512, os_amx;  /* OS saves the register state */
} hwt_cpu_features;

HWT_API void hwt_cpu_features_get(hwt_cpu_features *out);
/* AMX (detection only, issue #43: no AMX kernel yet): a mask of
 * HWT_AMX_CPUID (amx_tile in CPUID), HWT_AMX_OS (XCR0 enables the tile
 * state) and HWT_AMX_PERMITTED (Linux granted this process the tile data
 * state; with request != 0 it is asked for first, which is per process and
 * cannot be undone). */
enum { HWT_AMX_CPUID = 1, HWT_AMX_OS = 2, HWT_AMX_PERMITTED = 4 };
HWT_API int hwt_amx_status(int request);
HWT_API int hwt_isa_supported(hwt_isa isa);  /* 1 if compiled in and the CPU/OS support it */
HWT_API hwt_isa hwt_isa_best(void);          /* best supported, ignoring HWTUNE_ISA */
/* Best supported, or the one HWTUNE_ISA names. Returns HWT_EISA (negative) if
 * HWTUNE_ISA names an unknown or unsupported variant. */
HWT_API int hwt_isa_select(void);
HWT_API const char *hwt_isa_name(hwt_isa isa);
HWT_API int hwt_isa_from_name(const char *name); /* -1 if unknown */
HWT_API const char *hwt_version(void);

#endif
