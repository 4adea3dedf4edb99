/* Internal contracts of the int8 GEMM family (hwtune/qgemm.h): the
 * micro-kernel, the packing and epilogue routines each ISA compiles, and the
 * variant table. Only kernels/qgemm/ includes it. */
#ifndef HWTUNE_QGEMM_INTERNAL_H
#define HWTUNE_QGEMM_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/qgemm.h"

/* Micro-kernel: acc[mr][nr] (int32, row-major, overwritten) = packed A
 * micro-panel (kq groups of kg: a[q][i][kg]) times packed B micro-panel
 * (b[q][j][kg]), both zero-padded. */
typedef void hwt_qgemm_ukr_fn(int kq, const void *a, const void *b, int32_t *acc);

/* Packs rows [i0, i0+mb) (mb <= mr, the rest zero) of A into one micro-panel
 * of the variant's layout (kg, esize), adding 128 to s8 values, and writes
 * each row's sum of the packed (u8) values into rowsum[0:mr]. */
typedef void hwt_qgemm_pack_a_fn(const hwt_qgemm_plan *p, const void *A, int i0, int mb,
                                 void *dst, int32_t *rowsum);
/* Packs columns [j0, j0+nb) (nb <= nr, the rest zero) of s8 B into one
 * micro-panel; B[k][j] at B[k*rs + j*cs]. */
typedef void hwt_qgemm_pack_b_fn(const hwt_qgemm_plan *p, const int8_t *B, ptrdiff_t rs,
                                 ptrdiff_t cs, int j0, int nb, void *dst);
/* Epilogue of one tile: rows [i0, i0+mb), columns [j0, j0+nb) from acc
 * (row stride nr). za is already in the u8 domain. */
typedef void hwt_qgemm_epi_fn(const hwt_qgemm_plan *p, const hwt_qgemm_epi *e, int32_t za,
                              const int32_t *acc, const int32_t *rowsum, const int32_t *colsum,
                              int i0, int mb, int j0, int nb);

typedef struct {
  int mr, nr, kg, esize;
  hwt_qgemm_ukr_fn *ukr;
  hwt_qgemm_pack_a_fn *pack_a;
  hwt_qgemm_pack_b_fn *pack_b;
  hwt_qgemm_epi_fn *epi;
} hwt_qgemm_variant;

/* The row for isa (NULL if not in this build; no CPU check). */
const hwt_qgemm_variant *hwt_qgemm_variant_get(hwt_isa isa);

hwt_qgemm_ukr_fn hwt_qgemm_ukr_generic_4x8;
hwt_qgemm_pack_a_fn hwt_qgemm_pack_a_generic;
hwt_qgemm_pack_b_fn hwt_qgemm_pack_b_generic;
hwt_qgemm_epi_fn hwt_qgemm_epi_generic;
#if defined(HWTUNE_HAVE_X86)
hwt_qgemm_ukr_fn hwt_qgemm_ukr_avx2_6x16, hwt_qgemm_ukr_avx512vnni_8x32;
hwt_qgemm_pack_a_fn hwt_qgemm_pack_a_avx2, hwt_qgemm_pack_a_avx512;
hwt_qgemm_pack_b_fn hwt_qgemm_pack_b_avx2, hwt_qgemm_pack_b_avx512;
hwt_qgemm_epi_fn hwt_qgemm_epi_avx2, hwt_qgemm_epi_avx512;
#endif

#endif
