/* One dense CONV test shape's data: seeded input, weights, bias and
 * residual, and the plain-C reference's outputs without and with the
 * residual (added before the ReLU). Shared by the CONV kernels' tests. */
#ifndef HWT_TEST_CONV_CASE_H
#define HWT_TEST_CONV_CASE_H
#include <stdlib.h>
#include "hwtune/conv.h"
#include "check.h"

typedef struct {
  float *x, *w, *b, *res, *want, *want_res;
} conv_case;

/* All pointers NULL (and a failed check) when d has no output. */
__attribute__((unused)) static conv_case conv_case_make(const hwt_conv_desc *d) {
  conv_case c = {0};
  int OH, OW;
  if (hwt_conv_out_dims(d, &OH, &OW) != HWT_OK) {
    CHECK(0, "out_dims");
    return c;
  }
  const size_t xn = (size_t)d->N * d->C * d->H * d->W, wn = (size_t)d->K * d->C * d->R * d->S;
  const size_t yn = (size_t)d->N * d->K * OH * OW;
  c.x = alloc_floats(xn), c.w = alloc_floats(wn), c.b = alloc_floats((size_t)d->K);
  c.want = alloc_floats(yn), c.res = alloc_floats(yn), c.want_res = alloc_floats(yn);
  for (size_t i = 0; i < xn; i++) c.x[i] = frand();
  for (size_t i = 0; i < wn; i++) c.w[i] = frand();
  for (int i = 0; i < d->K; i++) c.b[i] = frand();
  for (size_t i = 0; i < yn; i++) c.res[i] = frand();
  CHECK(hwt_conv_ref(d, c.x, c.w, c.b, c.want) == HWT_OK, "ref");
  CHECK(hwt_conv_ref_res(d, c.x, c.w, c.b, c.res, c.want_res) == HWT_OK, "ref_res");
  return c;
}

__attribute__((unused)) static void conv_case_free(conv_case *c) {
  free(c->x), free(c->w), free(c->b), free(c->res), free(c->want), free(c->want_res);
}

#endif
