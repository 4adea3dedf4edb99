/* conv_transpose2d (engine/ops/grad_conv.c: GEMM + col2im) vs the plain-C
 * reference hwt_conv_transpose_ref: strides, dilations, symmetric and
 * asymmetric padding, output padding, with and without bias, on every ISA
 * this CPU runs, nth 1-4 (outputs poisoned first: a share that skips an
 * element fails); and the shape checks of prepare. */
#include "hwtune/conv.h"
#include "ops_test_util.h"

typedef struct {
  int64_t n, c, h, w, oc, kh, kw;
  int64_t sh, sw, ph, pw, eh, ew, dh, dw, oph, opw;
  int bias;
} ct_case;

static void set_pair(one_op *t, const char *key, int64_t a, int64_t b) {
  int64_t v[2] = {a, b};
  hwt_graph_op_set_ints(t->g, t->op, key, 2, v);
}

static int64_t run_case(const ct_case *k) {
  const int64_t oh = (k->h - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->ph - k->eh + k->oph;
  const int64_t ow = (k->w - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->pw - k->ew + k->opw;
  int64_t in_s[3][HWT_GRAPH_MAX_DIMS] = {
      {k->n, k->c, k->h, k->w}, {k->c, k->oc, k->kh, k->kw}, {k->oc}};
  int64_t out_s[1][HWT_GRAPH_MAX_DIMS] = {{k->n, k->oc, oh, ow}};
  int in_r[3] = {4, 4, 1}, out_r[1] = {4};
  one_op t;
  one_op_build(&t, "conv_transpose2d", k->bias ? 3 : 2, in_r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_s, 1, out_r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_s);
  set_pair(&t, "stride", k->sh, k->sw);
  set_pair(&t, "padding", k->ph, k->pw);
  if (k->eh != k->ph || k->ew != k->pw) set_pair(&t, "padding_end", k->eh, k->ew);
  set_pair(&t, "dilation", k->dh, k->dw);
  set_pair(&t, "output_padding", k->oph, k->opw);
  /* The conv this transposes: input [N, OC, oh, ow] -> output [N, C, h, w];
   * its end padding is whatever makes the windows count h (>= 0). */
  hwt_conv_desc d = {(int)k->n, (int)k->oc, (int)oh, (int)ow, (int)k->c, (int)k->kh,
                     (int)k->kw, (int)k->sh, (int)k->sw, (int)k->ph, (int)k->pw, 0,
                     (int)k->dh, (int)k->dw, 0, 0, 0, 0};
  int64_t need_h = (k->h - 1) * k->sh + (k->kh - 1) * k->dh + 1 - oh - k->ph;
  int64_t need_w = (k->w - 1) * k->sw + (k->kw - 1) * k->dw + 1 - ow - k->pw;
  d.pad_h_end = need_h > 0 ? (int)need_h : 0;
  d.pad_w_end = need_w > 0 ? (int)need_w : 0;
  int dh_out, dw_out;
  CHECK(hwt_conv_out_dims(&d, &dh_out, &dw_out) == HWT_OK && dh_out == k->h && dw_out == k->w,
        "the adjoint conv maps %lldx%lld to %dx%d", (long long)oh, (long long)ow, dh_out,
        dw_out);
  float *want = alloc_floats(t.out_n[0]);
  CHECK(hwt_conv_transpose_ref(&d, t.in[0], t.in[1], k->bias ? t.in[2] : NULL, want) == HWT_OK,
        "reference");
  /* float accumulation of C*KH*KW products of |v| <= 3 */
  const double tol = 2.0 * 1.2e-7 * 9.0 * (double)(k->c * k->kh * k->kw) + 1e-5;
  int64_t bad = 0;
  char err[256];
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int nth = 1; nth <= 4; nth++) {
      if (one_op_run(&t, (hwt_isa)isa, nth, err, sizeof err) != HWT_OK) {
        fprintf(stderr, "prepare failed: %s\n", err);
        bad++;
        break;
      }
      bad += compare("conv_transpose2d", t.out[0], want, t.out_n[0], 1e-5, tol);
    }
  }
  if (bad)
    fprintf(stderr,
            "  case c=%lld %lldx%lld oc=%lld k=%lldx%lld s=%lld,%lld p=%lld,%lld e=%lld,%lld "
            "d=%lld,%lld op=%lld,%lld bias=%d\n",
            (long long)k->c, (long long)k->h, (long long)k->w, (long long)k->oc,
            (long long)k->kh, (long long)k->kw, (long long)k->sh, (long long)k->sw,
            (long long)k->ph, (long long)k->pw, (long long)k->eh, (long long)k->ew,
            (long long)k->dh, (long long)k->dw, (long long)k->oph, (long long)k->opw, k->bias);
  free(want);
  one_op_free(&t);
  return bad;
}

/* A y shape that is not the transposed conv's output is refused. */
static void test_refuses_bad_shape(void) {
  int64_t in_s[2][HWT_GRAPH_MAX_DIMS] = {{1, 2, 3, 3}, {2, 4, 3, 3}};
  int64_t out_s[1][HWT_GRAPH_MAX_DIMS] = {{1, 4, 6, 5}};  /* stride 1: 5x5 */
  int in_r[2] = {4, 4}, out_r[1] = {4};
  one_op t;
  one_op_build(&t, "conv_transpose2d", 2, in_r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_s, 1,
               out_r, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_s);
  char err[256] = "";
  CHECK(one_op_run(&t, HWT_ISA_GENERIC, 1, err, sizeof err) != HWT_OK &&
            strstr(err, "output shape") != NULL,
        "bad y shape accepted (%s)", err);
  one_op_free(&t);
}

int main(void) {
  int n = 0;
  hwt_ops_grad_conv(&n); /* a strong reference: see link_families */
  /* n c h w oc kh kw | sh sw ph pw eh ew dh dw oph opw | bias */
  const ct_case fixed[] = {
      {2, 4, 5, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* DCGAN-style x2 */
      {1, 16, 6, 6, 8, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1},  /* 4x4 stride 2 */
      {1, 3, 4, 5, 5, 4, 3, 2, 3, 1, 0, 0, 2, 2, 1, 0, 0, 0},   /* asymmetric, dilated */
      {1, 6, 7, 7, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1},   /* 1x1 */
      {2, 5, 3, 9, 4, 2, 3, 2, 2, 0, 1, 1, 0, 3, 1, 1, 1, 0},   /* output_padding > end pad */
  };
  int64_t bad = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) bad += run_case(&fixed[i]);
  for (int rep = 0; rep < 40; rep++) {
    ct_case k = {0};
    k.n = rnd_int(1, 2), k.c = rnd_int(1, 9), k.oc = rnd_int(1, 9);
    k.h = rnd_int(1, 7), k.w = rnd_int(1, 7), k.kh = rnd_int(1, 4), k.kw = rnd_int(1, 4);
    k.sh = rnd_int(1, 3), k.sw = rnd_int(1, 3), k.dh = rnd_int(1, 2), k.dw = rnd_int(1, 2);
    k.ph = rnd_int(0, 2), k.pw = rnd_int(0, 2);
    k.eh = rep % 2 ? rnd_int(0, 2) : k.ph, k.ew = rep % 2 ? rnd_int(0, 2) : k.pw;
    /* below the stride: the reference's adjoint conv then exists (an
     * output padding up to the dilation has none with end padding >= 0) */
    k.oph = rnd_int(0, (int)k.sh - 1);
    k.opw = rnd_int(0, (int)k.sw - 1);
    k.bias = rnd_int(0, 1);
    int64_t oh = (k.h - 1) * k.sh + (k.kh - 1) * k.dh + 1 - k.ph - k.eh + k.oph;
    int64_t ow = (k.w - 1) * k.sw + (k.kw - 1) * k.dw + 1 - k.pw - k.ew + k.opw;
    if (oh < 1 || ow < 1) continue;
    bad += run_case(&k);
  }
  test_refuses_bad_shape();
  return one_op_verdict(bad);
}
