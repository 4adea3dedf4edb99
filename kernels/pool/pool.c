/* Pooling driver: geometry checks, workspace size, the split of (plane,
 * output row) pairs over threads, dispatch through the variant table. */
#include "pool_impl.h"

int64_t hwt_pool2d_out_len(int64_t size, int64_t k, int64_t s, int64_t p, int64_t e,
                         int ceil_mode) {
  const int64_t span = size + p + e - k;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= size + p) out--;
  return out;
}

int hwt_pool2d_check(const hwt_pool2d_desc *d) {
  if (!d || d->planes < 0 || d->h < 1 || d->w < 1 || d->b < 1 || d->kh < 1 || d->kw < 1 ||
      d->sh < 1 || d->sw < 1 || d->ph < 0 || d->pw < 0 || d->eh < 0 || d->ew < 0 ||
      2 * d->ph > d->kh || 2 * d->pw > d->kw || 2 * d->eh > d->kh || 2 * d->ew > d->kw ||
      d->kh > d->h + d->ph + d->eh || d->kw > d->w + d->pw + d->ew)
    return HWT_EINVAL;
  /* oh, ow: the floor or the ceil count of windows */
  int ok_h = 0, ok_w = 0;
  for (int c = 0; c < 2; c++) {
    ok_h |= d->oh == hwt_pool2d_out_len(d->h, d->kh, d->sh, d->ph, d->eh, c);
    ok_w |= d->ow == hwt_pool2d_out_len(d->w, d->kw, d->sw, d->pw, d->ew, c);
  }
  if (!ok_h || !ok_w) return HWT_EINVAL;
  if (!hwt_isa_supported(d->isa)) return HWT_EISA;
  return HWT_OK;
}

size_t hwt_pool2d_ws_floats(const hwt_pool2d_desc *d) {
  /* the largest of: one folded padded row and the NCHW strided row of
   * columns; the same-size path's block of rows (at least one) with a
   * window's width of margins; the NCHW strided block of rows and their
   * results (at least one row each) */
  const int64_t tw = hwt_pool2d_row_cols(d), row = d->w * d->b;
  const int64_t block = row > HWT_POOL2D_BLOCK_FLOATS ? row : HWT_POOL2D_BLOCK_FLOATS / row * row;
  const int64_t strided = tw > HWT_POOL2D_STRIDED_FLOATS ? tw : HWT_POOL2D_STRIDED_FLOATS;
  const int64_t a = 2 * tw * d->b, b = block + d->kw * d->b, c = 2 * strided;
  return (size_t)(a > b ? (a > c ? a : c) : (b > c ? b : c));
}

void hwt_pool2d_run_part(const hwt_pool2d_desc *d, const float *x, float *y, float *ws, int tid,
                       int nth) {
  if (!d || nth < 1 || tid < 0 || tid >= nth) return;
  const int64_t n = d->planes * d->oh;
  const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
  const hwt_pool2d_variant *v = hwt_pool2d_variant_for(d->isa);
  const int64_t in_plane = d->h * d->w * d->b, out_plane = d->oh * d->ow * d->b;
  for (int64_t r = lo; r < hi;) {
    const int64_t p = r / d->oh, oa = r % d->oh;
    const int64_t ob = oa + (hi - r) < d->oh ? oa + (hi - r) : d->oh;
    v->rows(d, x + p * in_plane, y + p * out_plane, oa, ob, ws);
    r += ob - oa;
  }
}

void hwt_global_avg_planes(const float *x, int64_t n, int64_t planes, hwt_isa isa, float *y) {
  if (!x || !y || n < 1 || planes < 1) return;
  hwt_pool2d_variant_for(isa)->global_avg(x, n, planes, y);
}
