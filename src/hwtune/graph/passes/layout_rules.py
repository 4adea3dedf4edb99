"""Which layout each op can run in: the one rule table shared by the layout
rewrite pass (`layout.py`) and the global layout search
(`hwtune.tuners.layout_dp`), so that the search's cost model inserts
exactly the transforms the pass will insert.

A layout is a channel block: 0 for NCHW, x for NCHW[x]c. Only 4-D tensors
(activations, channels on axis 1) are ever blocked. NeoCPU section 3.2 sorts
ops into layout-oblivious (element-wise: any layout), layout-tolerant
(batch_norm, pooling, concat along channels: told the layout by an attribute)
and layout-dependent (everything else: NCHW only); each op declares its class
in its spec (OpSpec.layout). CONVs pick their own (ic_bn, oc_bn) and are
decided by the caller, not here.
"""

from typing import Dict, NamedTuple, Optional, Sequence, Tuple

from hwtune.graph import ops as oplib

# The classes are the ops' own declaration (OpSpec.layout), so a new op
# states its rule where it is defined: "elementwise" (y = f(x) per element:
# a blocked input gives a blocked output, same block), "join" (same-shape
# operands must share one layout), "tolerant" (runs in NCHWc when told so by
# its `layout` attribute). concat keeps its own rule below.


def _layout_class(op_type: str) -> Optional[str]:
    spec = oplib.get(op_type)
    return spec.layout if spec else None


def is_tolerant(op_type: str) -> bool:
    """Whether op_type runs in NCHWc when told so (pooling, batch_norm):
    its time depends on the layout chosen for it, which the layout search
    prices (hwtune.tuners.layout_dp)."""
    return _layout_class(op_type) == "tolerant"


class OpLayout(NamedTuple):
    """need: per input, the block the op reads it in (None: a per-channel
    vector or other non-activation input, taken as is). out: block of every
    output. attrs: attribute changes when the op runs blocked."""
    need: Tuple[Optional[int], ...]
    out: int
    attrs: Dict[str, object]


def join_block(blocks: Sequence[int], sizes: Sequence[int],
               channels: Sequence[int]) -> int:
    """The layout a join runs in: the block already held by the most input
    elements (fewest elements to transform), ties to the earliest input; it
    must divide every input's channel count (concat), else the next one;
    NCHW as the last resort."""
    weight: Dict[int, int] = {}
    for b, s in zip(blocks, sizes):
        weight[b] = weight.get(b, 0) + s  # dicts keep first-appearance order
    for b in sorted(weight, key=lambda k: -weight[k]):  # stable: ties keep order
        if b == 0 or all(c % b == 0 for c in channels):
            return b
    return 0


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _per_channel(shape: Sequence[int], full: Sequence[int]) -> bool:
    """shape is [N, C, 1, 1] of full's N and C (full [N, C, H, W])."""
    return (len(shape) == 4 and len(full) == 4 and tuple(shape[:2]) == tuple(full[:2])
            and tuple(shape[2:]) == (1, 1))


def op_layout(op_type: str, attrs: Dict[str, object], in_blocks: Sequence[int],
              in_shapes: Sequence[Tuple[int, ...]]) -> OpLayout:
    """The layout a non-CONV op runs in, given the blocks its inputs are
    currently held in and their logical (NCHW) shapes. Pure function."""
    n = len(in_shapes)
    plain = OpLayout((0,) * n, 0, {})
    if n == 0 or len(in_shapes[0]) != 4:
        return plain
    if op_type == "conv2d":
        # A CONV the caller did not decide: a depthwise one (one filter per
        # channel, the only grouped conv2d NCHWc takes) runs in its input's
        # block, its weights and bias as they are, a fused residual in the
        # output's block; every other one in NCHW.
        group, c = int(attrs.get("group") or 1), in_shapes[0][1]
        if group > 1 and group == c and in_shapes[1][0] == c and in_blocks[0] \
                and c % in_blocks[0] == 0:
            b = in_blocks[0]
            need = (b, None, None, b)[:n]
            return OpLayout(need, b, {"layout": "NCHWc"})
        return plain
    cls = _layout_class(op_type)
    if cls == "elementwise":
        return OpLayout((in_blocks[0],), in_blocks[0], {})
    if cls == "tolerant":
        b = in_blocks[0]
        need = (b,) + (None,) * (n - 1)  # batch_norm's gamma/beta/mean/var: [C]
        return OpLayout(need, b, {"layout": "NCHWc"} if b else {})
    if cls == "join":
        # Equal shapes, or a per-channel scale [N, C, 1, 1] beside [N, C, H,
        # W] (squeeze-excitation's x * sigmoid(fc(pool(x)))): blocked, the
        # scale is [N, C/x, 1, 1, x] and broadcasts against [N, C/x, H, W, x]
        # as numpy's rules say, so the op runs as it is. Other broadcasting
        # operands (a bias [C,1,1], a scalar) would need their own rules.
        full = max(in_shapes, key=_numel)
        if not all(tuple(s) == tuple(full) or _per_channel(s, full) for s in in_shapes):
            return plain
        b = join_block(in_blocks, [_numel(s) for s in in_shapes], [full[1]])
        return OpLayout((b,) * n, b, {})
    if op_type == "concat":
        axis = attrs.get("axis", 0)
        if any(len(s) != 4 for s in in_shapes) or axis % 4 != 1:
            return plain
        # In [N, C/x, H, W, x] the channel blocks are axis 1 too, so joining
        # whole blocks is the same concat (every input's C must divide by x).
        b = join_block(in_blocks, [_numel(s) for s in in_shapes], [s[1] for s in in_shapes])
        return OpLayout((b,) * n, b, {"axis": 1} if b else {})
    return plain


def blocked_shape(shape: Tuple[int, ...], block: int) -> Tuple[int, ...]:
    """The stored shape of a logical NCHW tensor held in a block."""
    if not block:
        return tuple(shape)
    n, c, h, w = shape
    return (n, c // block, h, w, block)


def layout_name(block: int) -> str:
    return f"NCHW{block}c" if block else "NCHW"


def weight_layout_name(ib: int, ob: int) -> str:
    """A conv weight's layout: OIHW, or OIHW<i>i<o>o blocked."""
    return f"OIHW{ib}i{ob}o" if ib else "OIHW"


def plain_layout_of(layout: str) -> str:
    """The unblocked layout of the same family: OIHW for weights, else NCHW."""
    return "OIHW" if layout.startswith("OIHW") else "NCHW"


def conv_blocks(params: Dict[str, object]) -> Tuple[int, int]:
    """(input block, output block) a CONV's params give it: (0, 0) for an
    NCHW conv, (ic_bn, oc_bn) for NCHWc (the default when layout is absent)."""
    if params.get("layout", "NCHWc") == "NCHW":
        return 0, 0
    return int(params["ic_bn"]), int(params["oc_bn"])
