/* Element-wise FP32 ops on contiguous vectors, one per row of
 * hwtune/eltwise_ops.def (names, kinds, inputs and attributes are read from
 * that table through the functions below).
 * hwt_eltwise_run_part() computes thread `tid`'s share of [0, n) out of `nth`
 * (chunks aligned to cache lines, disjoint, no synchronisation needed). */
#ifndef HWTUNE_ELTWISE_H
#define HWTUNE_ELTWISE_H
#include <stddef.h>
#include "hwtune/api.h"
#include "hwtune/isa.h"

typedef enum {
#define HWT_EW_OP(id, ...) id,
#include "hwtune/eltwise_ops.def"
  HWT_EW_COUNT
} hwt_ew_op;

typedef enum {
  HWT_EW_UNARY = 0,   /* y = f(x, attrs) */
  HWT_EW_BINARY = 1,  /* y = f(a, b), numpy broadcasting */
  HWT_EW_NARY = 2,    /* f folded over 2+ inputs left to right, broadcasting */
  HWT_EW_TERNARY = 3  /* y = f(a, b, c), same shapes */
} hwt_ew_kind;

#define HWT_EW_MAX_ATTRS 2

typedef struct {
  hwt_ew_op op;
  hwt_isa isa;
  size_t n;
  int nt_stores;      /* 1: non-temporal stores for the output (large outputs) */
  float attr[HWT_EW_MAX_ATTRS]; /* the op's attributes in table order */
} hwt_eltwise_desc;

/* The table. */
HWT_API int hwt_eltwise_count(void);
HWT_API int hwt_eltwise_find(const char *name); /* op id, or HWT_EINVAL */
HWT_API const char *hwt_eltwise_name(hwt_ew_op op);
HWT_API const char *hwt_eltwise_kind_name(hwt_ew_op op); /* "unary", "binary", "nary", "ternary" */
HWT_API int hwt_eltwise_kind(hwt_ew_op op);              /* hwt_ew_kind, or HWT_EINVAL */
/* Operands one kernel call reads: 1 (a), 2 (a, b) or 3 (a, b, c); an NARY
 * op's kernel folds two at a time. */
HWT_API int hwt_eltwise_operands(hwt_ew_op op);
HWT_API int hwt_eltwise_is_graph_op(hwt_ew_op op); /* 1: a model op, 0: kernel only */
HWT_API int hwt_eltwise_flops(hwt_ew_op op);       /* per output element (NARY: per fold) */
HWT_API int hwt_eltwise_attr_count(hwt_ew_op op);
HWT_API const char *hwt_eltwise_attr_name(hwt_ew_op op, int i);    /* NULL if out of range */
HWT_API double hwt_eltwise_attr_default(hwt_ew_op op, int i);
/* op, isa and n as given, no streaming stores, attributes at their defaults. */
HWT_API void hwt_eltwise_desc_init(hwt_eltwise_desc *d, hwt_ew_op op, hwt_isa isa, size_t n);

HWT_API int hwt_eltwise_check(const hwt_eltwise_desc *d); /* HWT_OK, HWT_EINVAL or HWT_EISA */
/* b and c may be NULL when the op does not read them. */
HWT_API void hwt_eltwise_run_part(const hwt_eltwise_desc *d, const float *a, const float *b,
                                  const float *c, float *out, int tid, int nth);
/* One row of a broadcasting walk, on the calling thread: out[j] = op(a[j *
 * sa], b[j * sb]) for j < d->n (b ignored by unary ops). Strides 0 and 1 run
 * the variant's vector body directly; others are gathered in chunks first,
 * so every stride computes the same values. */
HWT_API void hwt_eltwise_run_strided(const hwt_eltwise_desc *d, const float *a, long sa,
                                     const float *b, long sb, float *out);
/* Plain-C reference (the test oracle): each op's scalar reference, over
 * d->n elements. _f64 gives the unrounded value of the approximated ops
 * (libm in double), against which their error bounds are measured. */
HWT_API int hwt_eltwise_ref(const hwt_eltwise_desc *d, const float *a, const float *b,
                            const float *c, float *out);
HWT_API int hwt_eltwise_ref_f64(const hwt_eltwise_desc *d, const float *a, const float *b,
                                const float *c, double *out);
/* Documented max error of this variant vs the exact function (the _f64
 * reference), absolute, over all finite inputs (0 for ops the variant
 * computes exactly, bit for bit with hwt_eltwise_ref). */
HWT_API double hwt_eltwise_max_abs_error(hwt_ew_op op, hwt_isa isa);

#endif
