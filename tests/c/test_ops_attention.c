/* attention vs a triple-loop oracle in double: random leading dims, S across
 * the 64-row block size (full and short blocks), masks broadcasting in
 * several ways with -3.4e38 entries (a transformer's padding), nth 1-4.
 * Tolerance 1e-5: float32 GEMM sums and the SIMD exp against double. */
#include "ops_test_util.h"

typedef int64_t shape_t[HWT_GRAPH_MAX_DIMS];

static int64_t check_attention(void) {
  const int lead = rnd_int(0, 2), rank = lead + 2, with_mask = rnd_int(0, 2);
  shape_t in[4], out[1];
  int ri[4] = {rank, rank, rank, rank}, ro[1] = {rank};
  for (int i = 0; i < lead; i++) in[0][i] = in[1][i] = in[2][i] = out[0][i] = rnd_int(1, 3);
  const int64_t S = rnd_int(0, 1) ? rnd_int(1, 9) : rnd_int(60, 140), D = rnd_int(1, 9),
                T = rnd_int(1, 20), E = rnd_int(1, 9);
  in[0][lead] = S, in[0][lead + 1] = D;
  in[1][lead] = D, in[1][lead + 1] = T;
  in[2][lead] = T, in[2][lead + 1] = E;
  out[0][lead] = S, out[0][lead + 1] = E;
  for (int i = 0; i < rank; i++) /* the mask: each scores dim kept or 1 */
    in[3][i] = rnd_int(0, 1) ? (i < lead ? in[0][i] : i == lead ? S : T) : 1;
  one_op t;
  one_op_build(&t, "attention", with_mask ? 4 : 3, ri, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])in,
               1, ro, (const int64_t(*)[HWT_GRAPH_MAX_DIMS])out);
  const double scale = rnd(0.1f, 1.0f);
  hwt_graph_op_set_floats(t.g, t.op, "scale", 1, &scale);
  if (with_mask)
    for (int64_t j = 0; j < t.in_n[3]; j++) t.in[3][j] = rnd_int(0, 3) ? 0.0f : -3.4e38f;
  int64_t L = 1;
  for (int i = 0; i < lead; i++) L *= in[0][i];
  float *want[1] = {alloc_floats(t.out_n[0])};
  double *p = malloc((size_t)T * sizeof *p);
  for (int64_t l = 0; l < L; l++)
    for (int64_t s = 0; s < S; s++) {
      double mx = -INFINITY, sum = 0.0;
      for (int64_t k = 0; k < T; k++) {
        double acc = 0.0;
        for (int64_t d = 0; d < D; d++)
          acc += (double)t.in[0][(l * S + s) * D + d] * t.in[1][(l * D + d) * T + k];
        acc *= (float)scale;
        if (with_mask) { /* the mask's offset for (l, s, k) */
          int64_t idx[HWT_GRAPH_MAX_DIMS], x = l, off = 0;
          for (int i = lead - 1; i >= 0; i--) {
            idx[i] = x % in[0][i];
            x /= in[0][i];
          }
          idx[lead] = s, idx[lead + 1] = k;
          for (int i = 0; i < rank; i++) off = off * in[3][i] + (in[3][i] == 1 ? 0 : idx[i]);
          acc += t.in[3][off];
        }
        p[k] = acc;
        mx = acc > mx ? acc : mx;
      }
      for (int64_t k = 0; k < T; k++) sum += p[k] = exp(p[k] - mx);
      for (int64_t e = 0; e < E; e++) {
        double acc = 0.0;
        for (int64_t k = 0; k < T; k++) acc += p[k] / sum * t.in[2][(l * T + k) * E + e];
        want[0][(l * S + s) * E + e] = (float)acc;
      }
    }
  free(p);
  return one_op_check_free(&t, want, "attention", 1e-5);
}

int main(void) {
  int n = 0;
  hwt_ops_attention(&n); /* a strong reference: see link_families */
  int64_t bad = 0;
  for (int rep = 0; rep < 100; rep++) bad += check_attention();
  return one_op_verdict(bad);
}
