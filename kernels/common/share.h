/* The share of an output grid that part tid of nth computes, for the GEMM
 * families that split whole tiles between threads (bf16 GEMM and conv,
 * int8 GEMM): one rule, written once. */
#ifndef HWT_KERNELS_COMMON_SHARE_H
#define HWT_KERNELS_COMMON_SHARE_H

/* [*lo, *hi) of `units` for part idx of parts, balanced. */
static inline void hwt_split_units(int units, int parts, int idx, int *lo, int *hi) {
  *lo = (int)((long)units * idx / parts);
  *hi = (int)((long)units * (idx + 1) / parts);
}

/* Rows [*r0, *r1) and columns [*c0, *c1) of a rows x cols output in
 * rt x ct tiles for part tid of nth: rows split first (each thread packs
 * only its own row tiles), columns when there are too few row tiles to go
 * round twice (GEMV-like shapes; a 7x7 conv output's two pixel panels).
 * Returns 0 when the part is empty. */
static inline int hwt_tile_share(int rows, int rt, int cols, int ct, int tid, int nth, int *r0,
                                 int *r1, int *c0, int *c1) {
  const int tr = (rows + rt - 1) / rt, tc = (cols + ct - 1) / ct;
  int gr = nth, gc = 1;
  if (tr < 2 * nth && tc >= nth) gr = 1, gc = nth;
  int a0, a1, b0, b1;
  hwt_split_units(tr, gr, tid / gc, &a0, &a1);
  hwt_split_units(tc, gc, tid % gc, &b0, &b1);
  *r0 = a0 * rt;
  *r1 = a1 * rt < rows ? a1 * rt : rows;
  *c0 = b0 * ct;
  *c1 = b1 * ct < cols ? b1 * ct : cols;
  return *r0 < *r1 && *c0 < *c1;
}

#endif
