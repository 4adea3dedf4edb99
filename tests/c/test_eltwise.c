/* Element-wise kernels and probes: every op of the table (hwtune/
 * eltwise_ops.def) on every ISA variant against the plain-C reference,
 * across awkward sizes, misalignments, thread splits, streaming stores and
 * attribute values; the approximated ops' error bounds against the
 * reference's double value.
 *
 *   test_eltwise                 the checks (a few seconds, ASan-friendly)
 *   test_eltwise --exhaustive [isa]   error sweep over every float with
 *                                2^-12 <= |x| < 128 (prints the maxima; ~10 s per ISA)
 *   test_eltwise --bench         timings: 32768-float ops, peak FMA (1 thread) */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hwtune/eltwise.h"
#include "hwtune/isa.h"
#include "hwtune/probe.h"
#include "check.h"


static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float rnd_uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 8) * 0x1p-24f; }

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int arity(hwt_ew_op op) { return hwt_eltwise_operands(op); }
/* Approximated by some variant (a documented error bound). */
static int approximate(hwt_ew_op op) {
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++)
    if (hwt_eltwise_max_abs_error(op, (hwt_isa)isa) > 0.0) return 1;
  return 0;
}

static hwt_eltwise_desc make_desc(hwt_ew_op op, hwt_isa isa, size_t n, int nt) {
  hwt_eltwise_desc d;
  hwt_eltwise_desc_init(&d, op, isa, n);
  d.nt_stores = nt;
  return d;
}

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

/* Inputs that exercise the op: wide magnitudes, denormals and specials for
 * the exact ops; the interesting range plus specials for the activations. */
static float sample(hwt_ew_op op, size_t i) {
  static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                   FLT_MIN, 1e-40f, -1e-40f, 100.0f, -100.0f, 0.625f, -80.0f};
  if (i % 53 == 7) return specials[rnd() % (sizeof specials / sizeof specials[0])];
  if (approximate(op)) return rnd_uniform(-20.0f, 20.0f);
  return ldexpf(rnd_uniform(-1.0f, 1.0f), (int)(rnd() % 60) - 30);
}

/* Runs every share of nth like a thread pool would, in a scrambled order. */
static void run_all(const hwt_eltwise_desc *d, const float *a, const float *b, const float *c,
                    float *out, int nth) {
  for (int k = 0; k < nth; k++) hwt_eltwise_run_part(d, a, b, c, out, (k * 5 + 3) % nth, nth);
}

/* The table's error measure: |y - exact| / max(1, |exact|), absolute for
 * results up to 1 and relative above; 0 where the exact value rounds to y
 * (infinities from overflow included). */
static double err_of(float y, double exact) {
  if ((float)exact == y) return 0.0;
  return fabs((double)y - exact) / fmax(1.0, fabs(exact));
}

static const uint32_t GUARD = 0x7fc0deadu; /* a NaN payload no kernel produces */

static void check_case(hwt_isa isa, hwt_ew_op op, size_t n, size_t off_in, size_t off_out,
                       int nth, int nt) {
  size_t pad = 16;
  float *ba = xalloc((n + 2 * pad) * 4), *bb = xalloc((n + 2 * pad) * 4),
        *bc = xalloc((n + 2 * pad) * 4), *bo = xalloc((n + 2 * pad) * 4),
        *ref = xalloc((n + 1) * 4);
  float *a = ba + off_in, *b = bb + (off_in * 3) % 16, *c = bc + (off_in + 5) % 16,
        *out = bo + pad + off_out;
  for (size_t i = 0; i < n + 2 * pad; i++) bo[i] = float_of(GUARD);
  for (size_t i = 0; i < n; i++) a[i] = sample(op, i), b[i] = sample(op, i), c[i] = sample(op, i);
  hwt_eltwise_desc d = make_desc(op, isa, n, nt);
  /* every other case with random attribute values instead of the defaults */
  if ((n + off_in) % 2)
    for (int k = 0; k < hwt_eltwise_attr_count(op); k++) d.attr[k] = rnd_uniform(-2.0f, 2.0f);
  CHECK(hwt_eltwise_check(&d) == HWT_OK, "check %s/%s", hwt_isa_name(isa), hwt_eltwise_name(op));
  run_all(&d, a, arity(op) >= 2 ? b : NULL, arity(op) >= 3 ? c : NULL, out, nth);
  CHECK(hwt_eltwise_ref(&d, a, b, c, ref) == HWT_OK, "ref");
  /* + the ref's own rounding: half an ulp of 1 (relative above 1) */
  double tol = hwt_eltwise_max_abs_error(op, isa) + 0x1p-24;
  for (size_t i = 0; i < n; i++) {
    int ok;
    if (isnan(ref[i])) ok = isnan(out[i]);
    else if (approximate(op)) ok = out[i] == ref[i] || err_of(out[i], ref[i]) <= tol;
    else ok = bits_of(out[i]) == bits_of(ref[i]);
    CHECK(ok, "%s/%s n=%zu off=%zu/%zu nth=%d nt=%d i=%zu: a=%a got %a want %a",
          hwt_isa_name(isa), hwt_eltwise_name(op), n, off_in, off_out, nth, nt, i,
          (double)a[i], (double)out[i], (double)ref[i]);
    if (!ok) break;
  }
  for (size_t i = 0; i < pad + off_out; i++)
    CHECK(bits_of(bo[i]) == GUARD, "%s/%s wrote before out", hwt_isa_name(isa), hwt_eltwise_name(op));
  for (size_t i = pad + off_out + n; i < n + 2 * pad; i++)
    CHECK(bits_of(bo[i]) == GUARD, "%s/%s n=%zu wrote past out", hwt_isa_name(isa),
          hwt_eltwise_name(op), n);
  free(ba), free(bb), free(bc), free(bo), free(ref);
}

/* Each thread's share is found by running it alone; shares must tile [0, n)
 * in tid order, and every interior boundary must sit on a 64-byte line. */
static void check_shares(size_t n, size_t off, int nth) {
  float *ones = xalloc((n + 16) * 4), *bo = xalloc((n + 16) * 4), *out = bo + off;
  for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
  hwt_eltwise_desc d = make_desc(HWT_EW_RELU, HWT_ISA_GENERIC, n, 0);
  size_t next = 0;
  for (int t = 0; t < nth; t++) {
    memset(bo, 0, (n + 16) * 4);
    hwt_eltwise_run_part(&d, ones, NULL, NULL, out, t, nth);
    size_t lo = n, hi = 0, count = 0;
    for (size_t i = 0; i < n; i++)
      if (out[i] == 1.0f) {
        if (lo == n) lo = i;
        hi = i + 1, count++;
      }
    if (count == 0) continue;
    CHECK(count == hi - lo && lo == next, "n=%zu off=%zu nth=%d tid=%d: share [%zu,%zu) count %zu, expected start %zu",
          n, off, nth, t, lo, hi, count, next);
    CHECK(lo == 0 || (uintptr_t)(out + lo) % 64 == 0, "share start %zu not on a line", lo);
    next = hi;
  }
  CHECK(next == n, "n=%zu off=%zu nth=%d: shares cover [0,%zu) only", n, off, nth, next);
  free(ones), free(bo);
}

static void check_specials(hwt_isa isa) {
  const float in[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e30f, -1e30f, 90.0f, -90.0f,
                      FLT_MAX, -FLT_MAX, 1e-30f, -1e-30f, 1e-40f};
  enum { N = sizeof in / sizeof in[0] };
  float sg[N], th[N];
  hwt_eltwise_desc d = make_desc(HWT_EW_SIGMOID, isa, N, 0);
  hwt_eltwise_run_part(&d, in, NULL, NULL, sg, 0, 1);
  d.op = HWT_EW_TANH;
  hwt_eltwise_run_part(&d, in, NULL, NULL, th, 0, 1);
  const char *nm = hwt_isa_name(isa);
  CHECK(sg[0] == 1.0f && sg[1] == 0.0f, "%s sigmoid(+-inf) = %g %g", nm, sg[0], sg[1]);
  CHECK(isnan(sg[2]) && isnan(sg[3]) && isnan(th[2]) && isnan(th[3]), "%s NaN not propagated", nm);
  CHECK(sg[4] == 0.5f && sg[5] == 0.5f, "%s sigmoid(+-0) = %g %g", nm, sg[4], sg[5]);
  CHECK(sg[6] == 1.0f && sg[7] == 0.0f && sg[8] == 1.0f && sg[9] == 0.0f && sg[10] == 1.0f &&
            sg[11] == 0.0f, "%s sigmoid does not saturate", nm);
  CHECK(th[0] == 1.0f && th[1] == -1.0f && th[6] == 1.0f && th[7] == -1.0f && th[8] == 1.0f &&
            th[9] == -1.0f && th[10] == 1.0f && th[11] == -1.0f, "%s tanh does not saturate", nm);
  CHECK(bits_of(th[4]) == bits_of(0.0f) && bits_of(th[5]) == bits_of(-0.0f), "%s tanh(+-0) sign", nm);
  CHECK(th[12] == 1e-30f && th[13] == -1e-30f && th[14] == 1e-40f, "%s tanh(tiny) != tiny", nm);
}

/* Max error (err_of) over the floats with |x| in [lo, hi) taken `stride`
 * bit patterns apart, both signs. */
static double sweep(hwt_isa isa, hwt_ew_op op, float lo, float hi, uint32_t stride, float *worst) {
  enum { B = 4096 };
  static float x[B], y[B];
  static double exact[B];
  double maxerr = 0.0;
  hwt_eltwise_desc d = make_desc(op, isa, B, 0);
  for (uint32_t sign = 0; sign < 2; sign++) {
    uint64_t u = bits_of(lo), end = bits_of(hi);
    while (u < end) {
      size_t k = 0;
      for (; k < B && u < end; k++, u += stride) x[k] = float_of((uint32_t)u | sign << 31);
      d.n = k;
      hwt_eltwise_run_part(&d, x, x, x, y, 0, 1);
      hwt_eltwise_ref_f64(&d, x, x, x, exact);
      for (size_t i = 0; i < k; i++) {
        double e = err_of(y[i], exact[i]);
        if (!(e <= maxerr)) maxerr = e, *worst = x[i]; /* also catches NaN */
      }
    }
  }
  return maxerr;
}

static void check_error_bounds(hwt_isa isa) {
  for (int op = 0; op < HWT_EW_COUNT; op++) {
    if (!approximate((hwt_ew_op)op)) {
      CHECK(hwt_eltwise_max_abs_error((hwt_ew_op)op, isa) == 0.0, "exact op with a bound");
      continue;
    }
    float worst = 0.0f;
    /* 1021 (prime) bit patterns apart: every mantissa residue and binade is
     * visited, ~2.2M inputs per op, from denormals to saturation. */
    double e = sweep(isa, (hwt_ew_op)op, 0.0f, 1024.0f, 1021, &worst);
    double bound = hwt_eltwise_max_abs_error((hwt_ew_op)op, isa);
    printf("%-7s %-10s max error %.3g at x=%a (documented bound %.3g)\n", hwt_isa_name(isa),
           hwt_eltwise_name((hwt_ew_op)op), e, (double)worst, bound);
    CHECK(e <= bound, "%s %s error %g > bound %g", hwt_isa_name(isa),
          hwt_eltwise_name((hwt_ew_op)op), e, bound);
  }
}

static void check_probes(hwt_isa isa) {
  double f = hwt_probe_fma_thread(isa, 1000);
  double lanes = isa == HWT_ISA_AVX512 ? 16 : isa == HWT_ISA_AVX2 ? 8 : 1;
  CHECK(f > 0 && fmod(f, 1000.0 * 2 * lanes) == 0.0, "%s fma flops %g", hwt_isa_name(isa), f);
  CHECK(hwt_probe_fma_thread(isa, 0) == 0.0, "fma with 0 iterations");
  CHECK(hwt_probe_fma_thread(isa, -1) == HWT_EINVAL, "fma with -1 iterations");
  const size_t sizes[] = {0, 1, 17, 100, 1000, 4097};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (int nt = 0; nt < 2; nt++)
      for (int nth = 1; nth <= 3; nth++) {
        size_t n = sizes[si];
        float *b = xalloc((n + 1) * 4), *c = xalloc((n + 1) * 4), *ba = xalloc((n + 32) * 4);
        float *a = ba + 16 + si;
        for (size_t i = 0; i < n + 32; i++) ba[i] = float_of(GUARD);
        for (size_t i = 0; i < n; i++) b[i] = rnd_uniform(-4, 4), c[i] = rnd_uniform(-4, 4);
        for (int t = nth - 1; t >= 0; t--) hwt_probe_triad_part(isa, a, b, c, 3.0f, n, nt, t, nth);
        for (size_t i = 0; i < n; i++) {
          float want = isa == HWT_ISA_GENERIC ? b[i] + 3.0f * c[i] : fmaf(3.0f, c[i], b[i]);
          CHECK(a[i] == want, "%s triad n=%zu i=%zu", hwt_isa_name(isa), n, i);
          if (a[i] != want) break;
        }
        for (size_t i = 0; i < 16 + si; i++) CHECK(bits_of(ba[i]) == GUARD, "triad wrote before a");
        for (size_t i = 16 + si + n; i < n + 32; i++) CHECK(bits_of(ba[i]) == GUARD, "triad wrote past a");
        free(b), free(c), free(ba);
      }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Timing on a shared, noisy machine: many short samples, reporting the
 * median and the minimum (the least-disturbed run). */
enum { SAMPLES = 2001 };
static double summarize(double *t, double *best) {
  qsort(t, SAMPLES, sizeof t[0], cmp_double);
  *best = t[0];
  return t[SAMPLES / 2];
}

static void bench(void) {
  enum { N = 32768, INNER = 10 };
  static double t[SAMPLES];
  float *a = xalloc(N * 4), *b = xalloc(N * 4), *o = xalloc(N * 4);
  for (int i = 0; i < N; i++) a[i] = rnd_uniform(-4, 4), b[i] = rnd_uniform(-4, 4);
  const hwt_ew_op ops[] = {HWT_EW_MUL, HWT_EW_FMA, HWT_EW_RELU, HWT_EW_SIGMOID, HWT_EW_TANH};
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      hwt_eltwise_desc d = make_desc(ops[k], (hwt_isa)isa, N, 0);
      for (int w = 0; w < 200; w++) hwt_eltwise_run_part(&d, a, b, b, o, 0, 1);
      for (int s = 0; s < SAMPLES; s++) {
        double t0 = now();
        for (int r = 0; r < INNER; r++) hwt_eltwise_run_part(&d, a, b, b, o, 0, 1);
        t[s] = (now() - t0) / INNER;
      }
      double best, med = summarize(t, &best);
      printf("%-7s %-7s n=%d, 1 thread, aligned: median %6.2f us/call, min %6.2f us\n",
             hwt_isa_name((hwt_isa)isa), hwt_eltwise_name(ops[k]), N, med * 1e6, best * 1e6);
    }
    enum { ITERS = 100000 }; /* ~0.5 ms per sample: short enough to dodge preemption */
    double flops = 0;
    for (int s = 0; s < SAMPLES / 4; s++) {
      double t0 = now();
      flops = hwt_probe_fma_thread((hwt_isa)isa, ITERS);
      t[s] = now() - t0;
    }
    for (int s = SAMPLES / 4; s < SAMPLES; s++) t[s] = t[s % (SAMPLES / 4)];
    double best, med = summarize(t, &best);
    printf("%-7s fma probe, 1 thread: median %.1f GFLOPS, best %.1f GFLOPS\n",
           hwt_isa_name((hwt_isa)isa), flops / med * 1e-9, flops / best * 1e-9);
  }
  free(a), free(b), free(o);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
    bench();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--exhaustive") == 0) {
    int only = argc > 2 ? hwt_isa_from_name(argv[2]) : -1;
    for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
      if (!hwt_isa_supported((hwt_isa)isa) || (only >= 0 && isa != only)) continue;
      for (int op = 0; op < HWT_EW_COUNT; op++) {
        if (!approximate((hwt_ew_op)op)) continue;
        float worst = 0.0f;
        double e = sweep((hwt_isa)isa, (hwt_ew_op)op, 0x1p-12f, 128.0f, 1, &worst);
        printf("%-7s %-10s exhaustive max error %.4g at x=%a (bound %.3g)\n",
               hwt_isa_name((hwt_isa)isa), hwt_eltwise_name((hwt_ew_op)op), e, (double)worst,
               hwt_eltwise_max_abs_error((hwt_ew_op)op, (hwt_isa)isa));
        fflush(stdout);
      }
    }
    return 0;
  }
  const size_t sizes[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 1000, 4099};
  const int nths[] = {1, 2, 3, 7};
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) {
      hwt_eltwise_desc d = make_desc(HWT_EW_ADD, (hwt_isa)isa, 1, 0);
      CHECK(hwt_eltwise_check(&d) == HWT_EISA, "unsupported ISA accepted");
      printf("%s: not supported here, skipped\n", hwt_isa_name((hwt_isa)isa));
      continue;
    }
    for (int op = 0; op < HWT_EW_COUNT; op++)
      for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int nt = 0; nt < 2; nt++)
          for (size_t ni = 0; ni < sizeof nths / sizeof nths[0]; ni++) {
            size_t off_in = (si + ni) % 4 == 0 ? 0 : rnd() % 16, off_out = si % 3 == 0 ? 0 : rnd() % 16;
            check_case((hwt_isa)isa, (hwt_ew_op)op, sizes[si], off_in, off_out, nths[ni], nt);
          }
    check_case((hwt_isa)isa, HWT_EW_FMA, 100003, 1, 3, 3, 1);
    check_specials((hwt_isa)isa);
    check_error_bounds((hwt_isa)isa);
    check_probes((hwt_isa)isa);
  }
  for (size_t n = 0; n < 200; n += 7)
    for (size_t off = 0; off < 16; off += 5)
      for (int nth = 1; nth <= 9; nth++) check_shares(n, off, nth);
  check_shares(100000, 3, 7);
  hwt_eltwise_desc bad = make_desc(HWT_EW_ADD, HWT_ISA_GENERIC, 1, 0);
  bad.op = HWT_EW_COUNT;
  CHECK(hwt_eltwise_check(&bad) == HWT_EINVAL, "bad op accepted");
  CHECK(hwt_eltwise_check(NULL) == HWT_EINVAL, "NULL desc accepted");
  CHECK(hwt_probe_fma_thread((hwt_isa)HWT_ISA_COUNT, 10) == HWT_EISA, "bad ISA accepted by probe");
  return check_verdict("test_eltwise: all checks passed\n");
}
