/* LSTM cell kernel vs the plain-C reference (hwt_lstm_cell_ref): every
 * supported ISA, awkward shapes (H = 1, H not a multiple of 8 or 16, H large
 * enough for several chunks, batch 1), with and without x_gates and bias,
 * 1/2/3/7 thread shares run in reverse order and, once, on real threads.
 * Outputs start as NaN (an element never written stays NaN) and each
 * thread's workspace is exactly ws_floats long (ASan flags an overrun). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "hwtune/eltwise.h"
#include "hwtune/rnn.h"

/* Uniform in [lo, hi). */
static float frand_in(float lo, float hi) { return lo + (hi - lo) * (frand() + 1.0f) * 0.5f; }
static float *rand_buf(size_t n, float lo, float hi) {
  float *p = alloc_floats(n);
  for (size_t i = 0; i < n; i++) p[i] = frand_in(lo, hi);
  return p;
}

/* |h - h_ref| and |c - c_ref|: the activations' documented bounds, through
   c = sf c_prev + si tg (|c_prev| <= 2) and h = so tanh(c). */
static double bound(hwt_isa isa) {
  double es = hwt_eltwise_max_abs_error(HWT_EW_SIGMOID, isa);
  double et = hwt_eltwise_max_abs_error(HWT_EW_TANH, isa);
  return 4.0 * (es + et) + 4e-7;
}

typedef struct {
  const hwt_lstm_cell_plan *p;
  const float *g, *x, *b, *c0;
  float *h, *c, *ws;
  int tid, nth;
} share_arg;

static void *share_main(void *arg) {
  share_arg *s = arg;
  hwt_lstm_cell_run_part(s->p, s->g, s->x, s->b, s->c0, s->h, s->c, s->ws, s->tid, s->nth);
  return NULL;
}

static void check_case(hwt_isa isa, int B, int H, int has_x, int has_b, int nth, int threads) {
  size_t nc = (size_t)B * H, ng = 4 * nc;
  float *g = rand_buf(ng, -6.0f, 6.0f), *x = rand_buf(ng, -2.0f, 2.0f);
  float *b = rand_buf(4 * (size_t)H, -1.0f, 1.0f), *c0 = rand_buf(nc, -2.0f, 2.0f);
  float *h = malloc(nc * sizeof(float)), *c = malloc(nc * sizeof(float));
  float *hr = malloc(nc * sizeof(float)), *cr = malloc(nc * sizeof(float));
  for (size_t i = 0; i < nc; i++) h[i] = c[i] = NAN;
  hwt_lstm_cell_desc d = {B, H, has_x, has_b, isa};
  hwt_lstm_cell_plan p;
  int st = hwt_lstm_cell_plan_make(&d, nth, &p);
  CHECK(st == HWT_OK, "plan %d", st);
  if (st == HWT_OK) {
    CHECK(p.chunk >= 1 && p.chunk <= H && (p.chunk == H || p.chunk % 16 == 0),
          "chunk %d for H=%d", p.chunk, H);
    const float *xp = has_x ? x : NULL, *bp = has_b ? b : NULL;
    if (threads) {
      pthread_t th[8];
      share_arg args[8];
      for (int t = 0; t < nth; t++) {
        args[t] = (share_arg){&p, g, xp, bp, c0, h, c, alloc_floats(p.ws_floats), t, nth};
        CHECK(pthread_create(&th[t], NULL, share_main, &args[t]) == 0, "pthread_create");
      }
      for (int t = 0; t < nth; t++) pthread_join(th[t], NULL);
      for (int t = 0; t < nth; t++) free(args[t].ws);
    } else {
      float *ws = alloc_floats(p.ws_floats);
      for (int t = nth - 1; t >= 0; t--)
        hwt_lstm_cell_run_part(&p, g, xp, bp, c0, h, c, ws, t, nth);
      free(ws);
    }
    hwt_lstm_cell_ref(&d, g, xp, bp, c0, hr, cr);
    double worst = 0.0;
    for (size_t i = 0; i < nc; i++) {
      double e = fabs((double)h[i] - hr[i]), f = fabs((double)c[i] - cr[i]);
      if (!(e <= worst)) worst = e; /* NaN (never written) fails */
      if (!(f <= worst)) worst = f;
    }
    CHECK(worst <= bound(isa), "%s B=%d H=%d x=%d bias=%d nth=%d threads=%d chunk=%d: max err "
          "%g > %g", hwt_isa_name(isa), B, H, has_x, has_b, nth, threads, p.chunk, worst,
          bound(isa));
  }
  free(g); free(x); free(b); free(c0); free(h); free(c); free(hr); free(cr);
}

int main(void) {
  static const int shapes[][2] = {{1, 1},  {1, 7},   {3, 5},    {2, 37},   {5, 100},
                                  {1, 512}, {4, 1000}, {64, 512}, {1, 2048}, {7, 9}};
  static const int nths[] = {1, 2, 3, 7};
  int variants = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    variants++;
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
      for (int v = 0; v < 4; v++)
        for (int t = 0; t < 4; t++)
          check_case((hwt_isa)isa, shapes[s][0], shapes[s][1], v & 1, v >> 1, nths[t], 0);
    check_case((hwt_isa)isa, 64, 512, 1, 0, 2, 1);
    check_case((hwt_isa)isa, 3, 130, 1, 1, 7, 1);
  }
  /* Contract errors. */
  hwt_lstm_cell_desc d = {2, 4, 0, 0, HWT_ISA_GENERIC};
  hwt_lstm_cell_plan p;
  CHECK(hwt_lstm_cell_plan_make(&d, 0, &p) == HWT_EINVAL, "nth 0");
  d.hidden = 0;
  CHECK(hwt_lstm_cell_plan_make(&d, 1, &p) == HWT_EINVAL, "H 0");
  d.hidden = 4;
  d.isa = HWT_ISA_COUNT;
  CHECK(hwt_lstm_cell_plan_make(&d, 1, &p) != HWT_OK, "unknown ISA");
  CHECK(variants >= 1, "no variant ran");
  return check_verdict("test_rnn: %d ISA variants OK\n", variants);
}
