/* Element-wise driver: the op table's accessors, validation, the split of
 * [0, n) into per-thread shares, and dispatch through the variant table. */
#include <math.h> /* INFINITY: attribute defaults of the table */
#include <string.h>
#include "eltwise_impl.h"

static const struct {
  const char *name;
  hwt_ew_kind kind;
  int graph_op, flops, nattr;
  const char *attr[HWT_EW_MAX_ATTRS];
  double def[HWT_EW_MAX_ATTRS];
} k_ops[HWT_EW_COUNT] = {
#define HWT_EW_OP(id, name, kind, flops, ref, vec, err, nattr, a0, d0, a1, d1) \
  [id] = {name, kind, 1, flops, nattr, {a0, a1}, {d0, d1}},
#define HWT_EW_KERNEL_OP(id, name, kind, flops, ref, vec, err, nattr, a0, d0, a1, d1) \
  [id] = {name, kind, 0, flops, nattr, {a0, a1}, {d0, d1}},
#include "hwtune/eltwise_ops.def"
};

static int valid(hwt_ew_op op) { return (int)op >= 0 && op < HWT_EW_COUNT; }

int hwt_eltwise_count(void) { return HWT_EW_COUNT; }

int hwt_eltwise_find(const char *name) {
  for (int i = 0; name && i < HWT_EW_COUNT; i++)
    if (strcmp(k_ops[i].name, name) == 0) return i;
  return HWT_EINVAL;
}

const char *hwt_eltwise_name(hwt_ew_op op) { return valid(op) ? k_ops[op].name : "unknown"; }

int hwt_eltwise_kind(hwt_ew_op op) { return valid(op) ? (int)k_ops[op].kind : HWT_EINVAL; }

const char *hwt_eltwise_kind_name(hwt_ew_op op) {
  static const char *const names[] = {"unary", "binary", "nary", "ternary"};
  return valid(op) ? names[k_ops[op].kind] : "unknown";
}

int hwt_eltwise_operands(hwt_ew_op op) {
  return valid(op) ? hwt_ew_kind_operands(k_ops[op].kind) : HWT_EINVAL;
}

int hwt_eltwise_is_graph_op(hwt_ew_op op) { return valid(op) && k_ops[op].graph_op; }

int hwt_eltwise_flops(hwt_ew_op op) { return valid(op) ? k_ops[op].flops : HWT_EINVAL; }

int hwt_eltwise_attr_count(hwt_ew_op op) { return valid(op) ? k_ops[op].nattr : HWT_EINVAL; }

const char *hwt_eltwise_attr_name(hwt_ew_op op, int i) {
  return valid(op) && i >= 0 && i < k_ops[op].nattr ? k_ops[op].attr[i] : NULL;
}

double hwt_eltwise_attr_default(hwt_ew_op op, int i) {
  return valid(op) && i >= 0 && i < k_ops[op].nattr ? k_ops[op].def[i] : 0.0;
}

void hwt_eltwise_desc_init(hwt_eltwise_desc *d, hwt_ew_op op, hwt_isa isa, size_t n) {
  memset(d, 0, sizeof *d);
  d->op = op;
  d->isa = isa;
  d->n = n;
  for (int i = 0; valid(op) && i < k_ops[op].nattr; i++) d->attr[i] = (float)k_ops[op].def[i];
}


int hwt_eltwise_check(const hwt_eltwise_desc *d) {
  if (!d || !valid(d->op)) return HWT_EINVAL;
  if (!hwt_isa_supported(d->isa)) return HWT_EISA;
  return HWT_OK;
}

void hwt_eltwise_run_part(const hwt_eltwise_desc *d, const float *a, const float *b,
                          const float *c, float *out, int tid, int nth) {
  if (!d || !valid(d->op) || nth < 1 || tid < 0 || tid >= nth) return;
  size_t lo, hi;
  hwt_ew_share(out, d->n, tid, nth, &lo, &hi);
  if (lo >= hi) return;
  /* Callers validate with hwt_eltwise_check(); an ISA the CPU lacks still
   * runs the portable variant here rather than faulting. */
  hwt_ew_variant_for(d->isa)->run(d->op, a + lo, b ? b + lo : 0, c ? c + lo : 0, out + lo,
                                  hi - lo, d->nt_stores ? HWT_EW_NT : 0, d->attr);
}

/* Strides other than 0 and 1 are copied to the stack in chunks of this many
 * floats: small enough for L1, long enough to amortise a call per chunk. */
#define GATHER_CHUNK 256

void hwt_eltwise_run_strided(const hwt_eltwise_desc *d, const float *a, long sa,
                             const float *b, long sb, float *out) {
  if (!d || !valid(d->op)) return;
  const hwt_ew_variant *v = hwt_ew_variant_for(d->isa);
  const int two = hwt_ew_kind_operands(k_ops[d->op].kind) >= 2;
  /* The vector loops read each operand contiguously or as one broadcast
   * value, but not both operands broadcast (a rare all-scalar row). */
  int direct = two ? (sa == 1 && (sb == 0 || sb == 1)) || (sa == 0 && sb == 1) : sa == 1;
  if (direct) {
    int flags = two ? (sa == 0 ? HWT_EW_A_SCALAR : 0) | (sb == 0 ? HWT_EW_B_SCALAR : 0) : 0;
    v->run(d->op, a, two ? b : NULL, NULL, out, d->n, flags, d->attr);
    return;
  }
  float ta[GATHER_CHUNK], tb[GATHER_CHUNK];
  for (size_t i0 = 0; i0 < d->n; i0 += GATHER_CHUNK) {
    size_t len = d->n - i0 < GATHER_CHUNK ? d->n - i0 : GATHER_CHUNK;
    for (size_t j = 0; j < len; j++) ta[j] = a[(long)(i0 + j) * sa];
    if (two)
      for (size_t j = 0; j < len; j++) tb[j] = b[(long)(i0 + j) * sb];
    v->run(d->op, ta, two ? tb : NULL, NULL, out + i0, len, 0, d->attr);
  }
}

double hwt_eltwise_max_abs_error(hwt_ew_op op, hwt_isa isa) {
  const hwt_ew_variant *v = hwt_ew_variant_compiled(isa);
  return valid(op) && v ? v->max_err[op] : 0.0;
}
