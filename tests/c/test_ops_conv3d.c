/* conv3d (engine/ops/conv3d.c: each output frame one 2-D CONV of its
 * stacked input frames) vs a plain-C direct 3-D convolution in double:
 * strides, dilations, symmetric and asymmetric padding (whole frames and
 * frames with no tap inside the input), with and without bias, residual
 * and ReLU, on every ISA this CPU runs, nth 1-4 (outputs poisoned first: a
 * share that skips an element fails); and the checks of prepare (weights
 * that are not constant, a residual of another shape). */
#include "hwtune/conv.h"
#include "ops_test_util.h"

typedef struct {
  int64_t n, c, d, h, w, k, kd, kh, kw;
  int64_t s[3], p[3], e[3], dl[3];
  int bias, res, relu;
} c3_case;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t e, int64_t dl) {
  return (in + p + e - (k - 1) * dl - 1) / s + 1;
}

/* The definition: y[n,k,t,i,j] = bias + sum w * x at in-range taps (+ res), ReLU. */
static void conv3d_ref(const c3_case *q, const float *x, const float *w, const float *b,
                       const float *r, float *y, const int64_t o[3]) {
  const int64_t in[3] = {q->d, q->h, q->w}, ks[3] = {q->kd, q->kh, q->kw};
  int64_t at = 0;
  for (int64_t n = 0; n < q->n; n++)
    for (int64_t k = 0; k < q->k; k++)
      for (int64_t t = 0; t < o[0]; t++)
        for (int64_t i = 0; i < o[1]; i++)
          for (int64_t j = 0; j < o[2]; j++, at++) {
            double acc = b ? b[k] : 0.0;
            const int64_t pos[3] = {t, i, j};
            for (int64_t c = 0; c < q->c; c++)
              for (int64_t a = 0; a < ks[0]; a++)
                for (int64_t u = 0; u < ks[1]; u++)
                  for (int64_t v = 0; v < ks[2]; v++) {
                    const int64_t tap[3] = {a, u, v};
                    int64_t z[3], inside = 1;
                    for (int ax = 0; ax < 3; ax++) {
                      z[ax] = pos[ax] * q->s[ax] + tap[ax] * q->dl[ax] - q->p[ax];
                      inside &= z[ax] >= 0 && z[ax] < in[ax];
                    }
                    if (!inside) continue;
                    acc += (double)x[(((n * q->c + c) * in[0] + z[0]) * in[1] + z[1]) * in[2] +
                                     z[2]] *
                           w[(((k * q->c + c) * ks[0] + a) * ks[1] + u) * ks[2] + v];
                  }
            if (r) acc += r[at];
            y[at] = (float)(q->relu && acc < 0.0 ? 0.0 : acc);
          }
}

static void set3(one_op *t, const char *key, const int64_t v[3]) {
  hwt_graph_op_set_ints(t->g, t->op, key, 3, v);
}

/* one_op_run with the weights (input 1) constant, as prepare needs. */
static int run_const_w(one_op *t, hwt_isa isa, int nth, char *err, size_t errlen, int w_const) {
  return one_op_run_const(t, isa, nth, w_const ? 2u : 0u, err, errlen);
}

static void build(one_op *t, const c3_case *q, int64_t o[3]) {
  for (int ax = 0; ax < 3; ax++) {
    const int64_t in[3] = {q->d, q->h, q->w}, ks[3] = {q->kd, q->kh, q->kw};
    o[ax] = out_dim(in[ax], ks[ax], q->s[ax], q->p[ax], q->e[ax], q->dl[ax]);
  }
  int64_t in_s[4][HWT_GRAPH_MAX_DIMS] = {{q->n, q->c, q->d, q->h, q->w},
                                         {q->k, q->c, q->kd, q->kh, q->kw},
                                         {q->k},
                                         {q->n, q->k, o[0], o[1], o[2]}};
  int64_t out_s[1][HWT_GRAPH_MAX_DIMS] = {{q->n, q->k, o[0], o[1], o[2]}};
  int in_r[4] = {5, 5, 1, 5}, out_r[1] = {5};
  one_op_build(t, "conv3d", q->res ? 4 : q->bias ? 3 : 2, in_r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_s, 1, out_r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_s);
  set3(t, "stride", q->s);
  set3(t, "padding", q->p);
  set3(t, "padding_end", q->e);
  set3(t, "dilation", q->dl);
  const int64_t relu = q->relu;
  hwt_graph_op_set_ints(t->g, t->op, "relu", 1, &relu);
}

static int64_t run_case(const c3_case *q) {
  one_op t;
  int64_t o[3];
  build(&t, q, o);
  float *want = alloc_floats((size_t)t.out_n[0]);
  conv3d_ref(q, t.in[0], t.in[1], t.n_in >= 3 ? t.in[2] : NULL, q->res ? t.in[3] : NULL, want,
             o);
  /* float accumulation of C*KD*KH*KW products of |v| <= 3 */
  const double tol = 2.0 * 1.2e-7 * 9.0 * (double)(q->c * q->kd * q->kh * q->kw) + 1e-5;
  int64_t bad = 0;
  char err[256];
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int nth = 1; nth <= 4; nth++) {
      if (run_const_w(&t, (hwt_isa)isa, nth, err, sizeof err, 1) != HWT_OK) {
        fprintf(stderr, "prepare failed: %s\n", err);
        bad++;
        break;
      }
      bad += compare("conv3d", t.out[0], want, t.out_n[0], 1e-5, tol);
    }
  }
  if (bad)
    fprintf(stderr,
            "  case n=%lld c=%lld %lldx%lldx%lld k=%lld %lldx%lldx%lld s=%lld,%lld,%lld "
            "p=%lld,%lld,%lld e=%lld,%lld,%lld d=%lld,%lld,%lld bias=%d res=%d relu=%d\n",
            (long long)q->n, (long long)q->c, (long long)q->d, (long long)q->h, (long long)q->w,
            (long long)q->k, (long long)q->kd, (long long)q->kh, (long long)q->kw,
            (long long)q->s[0], (long long)q->s[1], (long long)q->s[2], (long long)q->p[0],
            (long long)q->p[1], (long long)q->p[2], (long long)q->e[0], (long long)q->e[1],
            (long long)q->e[2], (long long)q->dl[0], (long long)q->dl[1], (long long)q->dl[2],
            q->bias, q->res, q->relu);
  free(want);
  one_op_free(&t);
  return bad;
}

/* Weights that are not constant, and a residual of another shape, are refused. */
static void test_refusals(void) {
  const c3_case q = {1, 2, 3, 4, 4, 3, 3, 3, 3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1},
                     1, 0, 0};
  one_op t;
  int64_t o[3];
  build(&t, &q, o);
  char err[256] = "";
  CHECK(run_const_w(&t, HWT_ISA_GENERIC, 1, err, sizeof err, 0) != HWT_OK &&
            strstr(err, "constant") != NULL,
        "run-time weights accepted (%s)", err);
  one_op_free(&t);
  int64_t in_s[4][HWT_GRAPH_MAX_DIMS] = {
      {1, 2, 3, 4, 4}, {3, 2, 3, 3, 3}, {3}, {1, 3, 3, 4, 5}};
  int64_t out_s[1][HWT_GRAPH_MAX_DIMS] = {{1, 3, 3, 4, 4}};
  int in_r[4] = {5, 5, 1, 5}, out_r[1] = {5};
  one_op_build(&t, "conv3d", 4, in_r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_s, 1, out_r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_s);
  set3(&t, "padding", q.p);
  err[0] = 0;
  CHECK(run_const_w(&t, HWT_ISA_GENERIC, 1, err, sizeof err, 1) != HWT_OK &&
            strstr(err, "residual") != NULL,
        "a residual of another shape accepted (%s)", err);
  one_op_free(&t);
}

int main(void) {
  int n = 0;
  hwt_ops_conv(&n); /* a strong reference: see link_families */
  /* n c d h w k kd kh kw | stride | pad | pad end | dilation | bias res relu */
  const c3_case fixed[] = {
      {1, 3, 4, 13, 11, 8, 3, 7, 7, {1, 2, 2}, {1, 3, 3}, {1, 3, 3}, {1, 1, 1}, 1, 0, 1},
      {2, 4, 5, 9, 10, 32, 3, 3, 3, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1, 1},
      {1, 6, 5, 6, 5, 4, 3, 1, 1, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, {1, 1, 1}, 0, 0, 0},
      /* time-only kernels (R(2+1)D's 3x1x1), with dilation and a residual */
      {2, 5, 6, 3, 4, 7, 3, 1, 1, {1, 1, 1}, {2, 0, 0}, {0, 0, 0}, {2, 1, 1}, 1, 1, 1},
      {1, 8, 4, 5, 5, 16, 3, 1, 1, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, {1, 1, 1}, 1, 1, 0},
      {1, 4, 1, 4, 4, 32, 3, 3, 3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1, 0},
      {1, 3, 2, 5, 5, 4, 2, 3, 3, {1, 1, 1}, {2, 1, 1}, {1, 1, 1}, {3, 1, 1}, 1, 1, 1},
  };
  int64_t bad = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) bad += run_case(&fixed[i]);
  for (int rep = 0; rep < 40; rep++) {
    c3_case q = {0};
    q.n = rnd_int(1, 2), q.c = rnd_int(1, 6), q.k = rnd_int(1, 40);
    q.d = rnd_int(1, 6), q.h = rnd_int(1, 7), q.w = rnd_int(1, 7);
    q.kd = rnd_int(1, 3), q.kh = rnd_int(1, 3), q.kw = rnd_int(1, 3);
    const int64_t in[3] = {q.d, q.h, q.w}, ks[3] = {q.kd, q.kh, q.kw};
    int fits = 1;
    for (int ax = 0; ax < 3; ax++) {
      q.s[ax] = rnd_int(1, 3), q.dl[ax] = rnd_int(1, 2);
      const int64_t extent = (ks[ax] - 1) * q.dl[ax] + 1;
      q.p[ax] = rnd_int(0, (int)extent - 1);
      q.e[ax] = rep % 2 ? rnd_int(0, (int)extent - 1) : q.p[ax];
      const int64_t padded = in[ax] + q.p[ax] + q.e[ax];
      fits &= padded >= extent && q.s[ax] <= padded;
    }
    if (!fits) continue;
    q.bias = rnd_int(0, 1), q.res = rnd_int(0, 1), q.relu = rnd_int(0, 1);
    if (q.res) q.bias = 1; /* the residual is the 4th input */
    bad += run_case(&q);
  }
  test_refusals();
  return one_op_verdict(bad);
}
