/* The NCHW[x]c template's knobs as op attributes (ic_bn, oc_bn, reg_n,
 * unroll_ker, reg_h, winograd: hwt_conv_params, declared by
 * hwt_conv_knobs), shared by conv2d on NCHW tensors and conv2d_grad_data
 * run as a forward CONV, so a tuned row of one workload means the same to
 * both. */
#ifndef HWT_OPS_CONV_ATTRS_H
#define HWT_OPS_CONV_ATTRS_H
#include "hwtune/conv.h"
#include "ops_util.h"

/* -1 when absent. */
static inline int hwt_ops_knob(const hwt_op_ctx *c, const char *key) {
  int64_t v = -1;
  return hwt_graph_op_get_ints(c->g, c->op, key, &v, 1) >= 1 ? (int)v : -1;
}

/* The knob attributes over d's default params into *p: 0 when the op sets
 * none (then *p is untouched and the plan takes the kernel's default, which
 * may be a kernel without knobs), 1 when it sets any, a negative status when
 * the default cannot be made. blocked: ic_bn / oc_bn come from the tensors
 * (already in *p), not from attributes. *wino_set: whether winograd is set
 * explicitly (a measured choice, which the per-run rule must not undo). */
static inline int hwt_ops_conv_knobs(const hwt_op_ctx *c, const hwt_conv_desc *d, int blocked,
                                     hwt_conv_params *p, int *wino_set) {
  const int reg_n = hwt_ops_knob(c, "reg_n"), unroll = hwt_ops_knob(c, "unroll_ker");
  const int ic_bn = hwt_ops_knob(c, "ic_bn"), oc_bn = hwt_ops_knob(c, "oc_bn");
  const int reg_h = hwt_ops_knob(c, "reg_h"), wino = hwt_ops_knob(c, "winograd");
  *wino_set = wino >= 0;
  if (!(blocked || reg_n > 0 || unroll >= 0 || ic_bn > 0 || oc_bn > 0 || reg_h > 0 ||
        wino >= 0))
    return 0;
  hwt_conv_params def;
  int st = hwt_conv_default_params(d, c->isa, &def);
  if (st < 0) return st;
  if (!blocked) {
    p->ic_bn = ic_bn > 0 ? ic_bn : def.ic_bn;
    p->oc_bn = oc_bn > 0 ? oc_bn : def.oc_bn;
  }
  p->reg_n = reg_n > 0 ? reg_n : def.reg_n;
  p->unroll_ker = unroll >= 0 ? unroll : def.unroll_ker;
  p->reg_h = reg_h > 0 ? reg_h : def.reg_h;
  p->winograd = wino >= 0 ? wino : def.winograd;
  return 1;
}

#endif
