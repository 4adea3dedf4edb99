/* Internal to the probes (not installed): per-ISA bodies behind probe.c. */
#ifndef HWTUNE_PROBE_IMPL_H
#define HWTUNE_PROBE_IMPL_H
#include <stddef.h>

double hwt_fma_generic(long iters);
void hwt_triad_generic(float *a, const float *b, const float *c, float s, size_t n);
#if defined(HWTUNE_HAVE_X86)
double hwt_fma_avx2(long iters);
double hwt_fma_avx512(long iters);
void hwt_triad_avx2(float *a, const float *b, const float *c, float s, size_t n, int nt);
void hwt_triad_avx512(float *a, const float *b, const float *c, float s, size_t n, int nt);
#endif

/* The chains must reach memory or the compiler may delete them. */
extern volatile float hwt_probe_sink;

#endif
