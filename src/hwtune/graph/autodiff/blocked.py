"""Gradients of ops in the blocked NCHW[x]c layout (conv2d, pool2d,
global_pool2d, batch_norm with layout "NCHWc"): the op's NCHW rule, between
layout transforms.

Every blocked operand (a 5-D activation [N, C/x, H, W, x], or a conv2d's
6-D weight [O/o, I/i, KH, KW, i, o]) and every blocked output gradient is
transformed to NCHW / OIHW; the NCHW rule runs on a copy of the op over
those tensors; each gradient it returns for a blocked operand is
transformed back to that operand's own blocks. Per-channel vectors (bias,
gamma, beta) are taken as they are. The backward kernels are the NCHW ones
(conv2d_grad_data / conv2d_grad_weight with their tunable knobs): on the
graphs tune-graph --train runs, the forward CONVs keep NCHW for the same
reason (tuners/pipeline.py).
"""

from typing import Callable, List, Optional, Tuple

from hwtune.graph.model import Op
from hwtune.graph.passes.layout_rules import layout_name, plain_layout_of, weight_layout_name

Block = Optional[Tuple[str, str]]  # (blocked layout, plain layout) of an operand


def _block_of(shape, weight: bool) -> Block:
    if weight and len(shape) == 6:
        layout = weight_layout_name(shape[4], shape[5])
    elif not weight and len(shape) == 5:
        layout = layout_name(shape[4])
    else:
        return None
    return layout, plain_layout_of(layout)


def _plain(e, name: str, block: Block) -> str:
    if block is None:
        return name
    return e.op("layout_transform", [name], src=block[0], dst=block[1])


def via_nchw(e, op: Op, dys: List[str], wants: List[bool],
             rule: Callable[..., List[Optional[str]]]) -> List[Optional[str]]:
    """The gradients of blocked `op` by `rule`, the rule of its NCHW form."""
    from hwtune.graph import ops as oplib
    weight_at = 1 if op.op == "conv2d" else -1
    blocks = [_block_of(e.shape(n), i == weight_at) for i, n in enumerate(op.inputs)]
    out_blocks = [_block_of(e.shape(n), False) for n in op.outputs]
    attrs = {k: v for k, v in op.attrs.items() if k not in ("layout", "ic_bn", "oc_bn")}
    plain = Op(op.name, op.op, [_plain(e, n, b) for n, b in zip(op.inputs, blocks)],
               [_plain(e, n, b) for n, b in zip(op.outputs, out_blocks)], attrs, loc=op.loc)
    plain.resolved = oplib.get(op.op).normalize_attrs(attrs)
    grads = rule(e, plain, [_plain(e, d, b) for d, b in zip(dys, out_blocks)], wants)
    return [g if g is None or b is None else
            e.op("layout_transform", [g], src=b[1], dst=b[0])
            for g, b in zip(grads, blocks)]
