/* pool op family vs a plain-C oracle that pads explicitly (a padded copy
 * of each plane, -inf or excluded positions), as the numpy reference does:
 * random windows, strides, padding (symmetric or not: padding_end), ceil
 * mode, count_include_pad, NCHW and NCHW[x]c, nth 1-4, every ISA variant
 * this CPU runs. */
#include "ops_test_util.h"

/* one_op_check on every supported ISA, then frees want and t. */
static int64_t check_isas(one_op *t, float **want, const char *what, double tol) {
  int64_t bad = 0;
  char err[256];
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int nth = 1; nth <= 4; nth++) {
      if (one_op_run(t, (hwt_isa)isa, nth, err, sizeof err) != HWT_OK) {
        fprintf(stderr, "%s: prepare failed: %s\n", what, err);
        bad++;
        break;
      }
      bad += compare(what, t->out[0], want[0], t->out_n[0], tol, tol);
    }
  }
  free(want[0]);
  one_op_free(t);
  return bad;
}

/* Output length by counting the windows one by one (the op has a closed
 * form): window i starts at i * s in the padded input of size + p + e. It
 * counts if it fits; in ceil mode also if it overhangs the end, as long as
 * the window before it left some of the padded input uncovered and it starts
 * inside the input or its left padding. */
static int64_t out_len(int64_t size, int64_t k, int64_t s, int64_t p, int64_t e,
                       int ceil_mode) {
  const int64_t padded = size + p + e;
  int64_t n = 0;
  for (int64_t start = 0;; start += s) {
    const int fits = start + k <= padded;
    const int overhangs = ceil_mode && start - s + k < padded && start < size + p;
    if (!fits && !overhangs) return n;
    n++;
  }
}

typedef struct {
  int is_max, ceil_mode, include_pad, blocked;
  int64_t n, cb, h, w, b, kh, kw, sh, sw, ph, pw;
  int64_t eh, ew; /* padding after the input (== ph, pw unless asymmetric) */
} pool_case;

/* Value at padded position (i, j) of channel ch in plane p, and whether the
 * divisor counts it; positions past the padded input are neither. */
static int at(const pool_case *c, const float *x, int64_t p, int64_t ch, int64_t i, int64_t j,
              float *v) {
  int64_t r = i - c->ph, q = j - c->pw;
  if (r < 0 || q < 0 || r >= c->h || q >= c->w) {
    *v = c->is_max ? -INFINITY : 0.0f;
    return c->include_pad && i < c->h + c->ph + c->eh && j < c->w + c->pw + c->ew;
  }
  *v = x[((p * c->h + r) * c->w + q) * c->b + ch];
  return 1;
}

static int64_t check(const pool_case *c, int global) {
  int64_t oh = global ? 1 : out_len(c->h, c->kh, c->sh, c->ph, c->eh, c->ceil_mode);
  int64_t ow = global ? 1 : out_len(c->w, c->kw, c->sw, c->pw, c->ew, c->ceil_mode);
  int rank = c->blocked ? 5 : 4;
  int64_t in_s[1][HWT_GRAPH_MAX_DIMS] = {{c->n, c->cb, c->h, c->w, c->b}};
  int64_t out_s[1][HWT_GRAPH_MAX_DIMS] = {{c->n, c->cb, oh, ow, c->b}};
  int r[1] = {rank};
  one_op t;
  one_op_build(&t, global ? "global_pool2d" : "pool2d", 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in_s, 1, r,
               (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out_s);
  int64_t mode_max[3] = {'m', 'a', 'x'}, mode_avg[3] = {'a', 'v', 'g'};
  int64_t layout[5] = {'N', 'C', 'H', 'W', 'c'};
  hwt_graph_op_set_ints(t.g, t.op, "mode", 3, c->is_max ? mode_max : mode_avg);
  hwt_graph_op_set_ints(t.g, t.op, "layout", c->blocked ? 5 : 4, layout);
  if (!global) {
    int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[2] = {c->ph, c->pw};
    int64_t cm = c->ceil_mode, ip = c->include_pad;
    hwt_graph_op_set_ints(t.g, t.op, "kernel", 2, k);
    hwt_graph_op_set_ints(t.g, t.op, "stride", 2, s);
    hwt_graph_op_set_ints(t.g, t.op, "padding", 2, p);
    if (c->eh != c->ph || c->ew != c->pw) {
      int64_t e[2] = {c->eh, c->ew};
      hwt_graph_op_set_ints(t.g, t.op, "padding_end", 2, e);
    }
    hwt_graph_op_set_ints(t.g, t.op, "ceil_mode", 1, &cm);
    hwt_graph_op_set_ints(t.g, t.op, "count_include_pad", 1, &ip);
  }
  float *want = alloc_floats(t.out_n[0]);
  pool_case g = *c;
  if (global) g.kh = c->h, g.kw = c->w, g.sh = g.sw = 1, g.ph = g.pw = g.eh = g.ew = 0;
  for (int64_t p = 0; p < c->n * c->cb; p++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++)
        for (int64_t ch = 0; ch < c->b; ch++) {
          double acc = g.is_max ? -INFINITY : 0.0, count = 0;
          for (int64_t u = 0; u < g.kh; u++)
            for (int64_t v = 0; v < g.kw; v++) {
              float val;
              count += at(&g, t.in[0], p, ch, i * g.sh + u, j * g.sw + v, &val);
              acc = g.is_max ? (val > acc ? val : acc) : acc + val;
            }
          want[((p * oh + i) * ow + j) * c->b + ch] = (float)(g.is_max ? acc : acc / count);
        }
  int64_t bad = check_isas(&t, &want, global ? "global_pool2d" : "pool2d",
                           g.is_max ? 0.0 : 1e-6);
  if (bad)
    fprintf(stderr,
            "  case max=%d k=%lldx%lld s=%lldx%lld p=%lldx%lld end=%lldx%lld ceil=%d incl=%d"
            " b=%lld\n",
            c->is_max, (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw,
            (long long)c->ph, (long long)c->pw, (long long)c->eh, (long long)c->ew,
            c->ceil_mode, c->include_pad, (long long)c->b);
  return bad;
}

int main(void) {
  int64_t bad = 0;
  for (int rep = 0; rep < 400; rep++) {
    pool_case c = {0};
    c.is_max = rnd_int(0, 1);
    c.ceil_mode = rnd_int(0, 1);
    c.include_pad = rnd_int(0, 1);
    c.blocked = rnd_int(0, 1);
    c.b = c.blocked ? 4 : 1;
    c.n = rnd_int(1, 2);
    c.cb = rnd_int(1, 3);
    c.h = rnd_int(1, 12);
    c.w = rnd_int(1, 12);
    c.kh = rnd_int(1, 4);
    c.kw = rnd_int(1, 4);
    c.ph = rnd_int(0, (int)c.kh / 2);
    c.pw = rnd_int(0, (int)c.kw / 2);
    /* every third case asymmetric (TF "same" padding: more after than before) */
    c.eh = rep % 3 == 0 ? rnd_int(0, (int)c.kh / 2) : c.ph;
    c.ew = rep % 3 == 0 ? rnd_int(0, (int)c.kw / 2) : c.pw;
    c.sh = rnd_int(1, 3);
    c.sw = rnd_int(1, 3);
    /* stride 1 with "same" output (pool_max_same's case), asymmetric */
    if (rep % 10 == 1) c.sh = c.sw = 1, c.ph = c.pw = 0, c.eh = c.kh - 1, c.ew = c.kw - 1;
    if (2 * c.eh > c.kh || 2 * c.ew > c.kw) c.eh = c.ph, c.ew = c.pw;
    if (c.kh > c.h + c.ph + c.eh || c.kw > c.w + c.pw + c.ew) continue;
    bad += check(&c, 0);
    if (rep % 8 == 0) bad += check(&c, 1);
  }
  return one_op_verdict(bad);
}
