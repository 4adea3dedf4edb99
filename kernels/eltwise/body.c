/* The element-wise variant body, compiled once per ISA over
 * kernels/common/vec.h (kernels.cmake). Every op's loop is the same: a
 * masked head until `out` reaches a vector boundary (so streaming stores can
 * be used), four vectors per iteration, then one, then a masked tail; masked
 * loads and stores never touch memory outside [0, n). The op's vector body
 * (ops.h) is inlined into its own copy of the loop. */
#include "../common/vec.h"
#include "eltwise_impl.h"
#include "ops.h"

/* `op` is a compile-time constant wherever this is inlined (the switch in
 * run_op's callers), so the switch folds to the one body. */
HV_AI hv_f32 apply(hwt_ew_op op, hv_f32 a, hv_f32 b, hv_f32 c, const hv_f32 *at) {
  switch (op) {
#define HWT_EW_OP(id, name, kind, flops, ref, vec, ...) \
  case id:                                              \
    return vec(a, b, c, at);
#include "hwtune/eltwise_ops.def"
    default: return a;
  }
}

HV_AI int operands(hwt_ew_op op) {
  switch (op) {
#define HWT_EW_OP(id, name, kind, ...) \
  case id:                             \
    return hwt_ew_kind_operands(kind);
#include "hwtune/eltwise_ops.def"
    default: return 1;
  }
}

/* One operand: a broadcast scalar (sc), or loaded from p. */
HV_AI hv_f32 operand(const float *p, size_t i, int scalar, hv_f32 sc) {
  return scalar ? sc : hv_load(p + i);
}
HV_AI hv_f32 operand_mask(const float *p, size_t i, int scalar, hv_f32 sc, hv_mask m) {
  return scalar ? sc : hv_load_mask(p + i, m);
}

/* SA/SB: a/b are broadcast scalars; compile-time constants like op. */
HV_AI void run_loop(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                    size_t n, int nt, const float *attr, const int SA, const int SB) {
  const int k = operands(op);
  const hv_f32 z = hv_zero();
  const hv_f32 at[HWT_EW_MAX_ATTRS] = {hv_set1(attr[0]), hv_set1(attr[1])};
  const hv_f32 sa = SA ? hv_set1(a[0]) : z, sb = SB && k >= 2 ? hv_set1(b[0]) : z;
#define AT(i) apply(op, operand(a, i, SA, sa), k >= 2 ? operand(b, i, SB, sb) : z, \
                    k >= 3 ? hv_load(c + (i)) : z, at)
#define AT_MASK(i, m)                                                                  \
  apply(op, operand_mask(a, i, SA, sa, m), k >= 2 ? operand_mask(b, i, SB, sb, m) : z, \
        k >= 3 ? hv_load_mask(c + (i), m) : z, at)
  if (HV_W == 1) { /* portable: one plain loop, vectorised by the compiler */
    for (size_t i = 0; i < n; i++) hv_store(out + i, AT(i));
    return;
  }
  const size_t vbytes = HV_W * sizeof(float);
  uintptr_t addr = (uintptr_t)out;
  if (addr % sizeof(float)) nt = 0; /* a vector boundary is unreachable */
  size_t head = addr % sizeof(float) ? 0 : ((vbytes - addr % vbytes) % vbytes) / sizeof(float);
  if (head > n) head = n;
  if (head) {
    hv_mask m = hv_first((long)head);
    hv_store_mask(out, m, AT_MASK(0, m));
  }
  size_t i = head;
  if (nt) {
    for (; i + HV_W <= n; i += HV_W) hv_stream(out + i, AT(i));
    hv_stream_fence(); /* order the streamed lines before whatever the caller does next */
  } else {
    /* sigmoid, tanh and silu: OPS_CHAINS vectors' chains side by side
     * (ops.h); silu is x times sigmoid_chains, the same bits as silu_vec.
     * silu one vector at a time ran at about half sigmoid's rate here
     * (engine, 1 thread, avx512, under load: 96x112x112 1.39 vs 2.00 G
     * floats/s, 240x28x28 1.07 vs 2.63): EfficientNet-B0's 49 silu ops
     * were ~2.3 ms of a ~20 ms image. */
    if ((op == HWT_EW_SIGMOID || op == HWT_EW_TANH || op == HWT_EW_SILU) && !SA)
      for (; i + OPS_CHAINS * HV_W <= n; i += OPS_CHAINS * HV_W) {
        hv_f32 r[OPS_CHAINS];
        OPS_EACH r[j] = hv_load(a + i + (size_t)j * HV_W);
        if (op == HWT_EW_TANH) {
          tanh_chains(r);
        } else if (op == HWT_EW_SIGMOID) {
          sigmoid_chains(r);
        } else {
          hv_f32 x[OPS_CHAINS];
          OPS_EACH x[j] = r[j];
          sigmoid_chains(r);
          OPS_EACH r[j] = hv_mul(x[j], r[j]);
        }
        OPS_EACH hv_store(out + i + (size_t)j * HV_W, r[j]);
      }
    for (; i + 4 * HV_W <= n; i += 4 * HV_W) {
      hv_f32 r0 = AT(i), r1 = AT(i + HV_W), r2 = AT(i + 2 * HV_W), r3 = AT(i + 3 * HV_W);
      hv_store(out + i, r0);
      hv_store(out + i + HV_W, r1);
      hv_store(out + i + 2 * HV_W, r2);
      hv_store(out + i + 3 * HV_W, r3);
    }
    for (; i + HV_W <= n; i += HV_W) hv_store(out + i, AT(i));
  }
  if (i < n) {
    hv_mask m = hv_first((long)(n - i));
    hv_store_mask(out + i, m, AT_MASK(i, m));
  }
#undef AT
#undef AT_MASK
}

/* Binary kinds get a loop per broadcast pattern; the others only the plain one. */
HV_AI void run_op(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                  size_t n, int flags, const float *attr) {
  int nt = flags & HWT_EW_NT;
  if (operands(op) == 2 && (flags & HWT_EW_A_SCALAR))
    run_loop(op, a, b, c, out, n, nt, attr, 1, 0);
  else if (operands(op) == 2 && (flags & HWT_EW_B_SCALAR))
    run_loop(op, a, b, c, out, n, nt, attr, 0, 1);
  else
    run_loop(op, a, b, c, out, n, nt, attr, 0, 0);
}

/* One function per op (run_HWT_EW_SIGMOID, ...), each with its op as a
 * constant, instead of every op's loops inlined into run()'s switch: with
 * the table grown from 23 rows to 55 that one function grew so large that
 * GCC compiled sigmoid's interleaved chains worse (hwtune check's counted
 * eltwise-sigmoid-n262144-t2, AVX2 kernels under valgrind: 1,574,123
 * estimated cycles per call at 23 rows, 2,155,781 at 55 inlined, 1.56M at
 * 55 with a function per op; mul unchanged). */
#define HWT_EW_OP(id, ...)                                                                   \
  static __attribute__((noinline)) void run_##id(const float *a, const float *b,            \
                                                 const float *c, float *out, size_t n,      \
                                                 int flags, const float *attr) {            \
    run_op(id, a, b, c, out, n, flags, attr);                                                \
  }
#include "hwtune/eltwise_ops.def"

static void run(hwt_ew_op op, const float *a, const float *b, const float *c, float *out,
                size_t n, int flags, const float *attr) {
  switch (op) {
#define HWT_EW_OP(id, ...)                             \
  case id:                                             \
    run_##id(a, b, c, out, n, flags, attr);            \
    break;
#include "hwtune/eltwise_ops.def"
    default: break;
  }
}

static const double max_err[HWT_EW_COUNT] = {
#define HWT_EW_OP(id, name, kind, flops, ref, vec, err, ...) [id] = (err),
#include "hwtune/eltwise_ops.def"
};

const hwt_ew_variant HWT_VARIANT(hwt_ew_variant) = {run, max_err};
