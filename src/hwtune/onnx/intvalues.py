"""Integer and bool tensors at import: which hwtune tensors hold integer
values, within which bounds, and which graph inputs index a table.

hwtune computes in float32 and carries ONNX's int64 / int32 / bool tensors
as float32 values (docs/onnx.md): exact while |v| <= 2^24. The Context
(convert.py) asks note() about every op it emits: an op whose inputs are
integer-valued (or a comparison, whose result is 0 or 1) gets the bounds
of its output; one whose integer output could pass 2^24 is refused, since
float32 would no longer hold it exactly.

index_ranges() scans the ONNX graph before the conversion for int inputs
that (through reshapes and casts) index a constant table with Gather or
GatherElements: their valid range is the table's extent on that axis, so
that seeded inputs are valid ids and given ones can be checked.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from hwtune.onnx.errors import Unsupported

EXACT = 2 ** 24          # float32 holds every integer up to this magnitude
# The range of an int input that indexes no table: masks and flags, 0 or 1.
DEFAULT_RANGE = (0, 2)

Bounds = Tuple[float, float]  # inclusive

_LOGIC = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
          "logical_and", "logical_or", "logical_xor", "logical_not"}
_SAME = {"reshape", "flatten", "transpose", "slice", "gather", "concat", "split", "expand",
         "maximum", "minimum", "trunc", "floor", "ceil"}
# Ops through which an index keeps pointing at its table (index_ranges).
_VIEWS = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand",
          "Transpose", "Slice"}  # XLNet transposes its ids before the lookup


def const_bounds(value) -> Optional[Bounds]:
    """Bounds of an integer or bool constant (None for floats and empty)."""
    arr = np.asarray(value)
    if arr.size == 0 or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        return None
    return float(arr.min()), float(arr.max())


def _join(bs):
    return min(b[0] for b in bs), max(b[1] for b in bs)


def _out_bounds(op, ins, attrs, in_shapes) -> Optional[Bounds]:
    if op in _LOGIC:
        return 0.0, 1.0
    if op in ("take", "gather_elements"):
        return ins[0]
    if op == "where":
        return None if ins[1] is None or ins[2] is None else _join(ins[1:])
    if op == "pad":
        v = float(attrs.get("value", 0.0))
        return None if ins[0] is None or v != int(v) else _join([ins[0], (v, v)])
    if any(b is None for b in ins):
        return None
    if op in _SAME:
        return _join(ins)
    if op in ("add", "sum"):
        return sum(b[0] for b in ins), sum(b[1] for b in ins)
    if op == "sub":
        return ins[0][0] - ins[1][1], ins[0][1] - ins[1][0]
    if op == "mul":
        p = [x * y for x in ins[0] for y in ins[1]]
        return min(p), max(p)
    if op == "abs":
        lo, hi = ins[0]
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if op == "affine":
        s, t = float(attrs.get("scale", 1.0)), float(attrs.get("shift", 0.0))
        if s != int(s) or t != int(t):
            return None
        p = [s * x + t for x in ins[0]]
        return min(p), max(p)
    if op == "cumsum":
        n = in_shapes[0][int(attrs["axis"]) % len(in_shapes[0])]
        lo, hi = ins[0]
        return min(lo, 0.0) * n, max(hi, 0.0) * n
    return None


def note(cx, op: str, inputs, attrs, outputs) -> None:
    """Record the bounds of op's integer outputs in cx.int_bounds; refuse
    an integer output that float32 cannot hold exactly."""
    ins = [cx.int_bounds.get(n) for n in inputs]
    b = _out_bounds(op, ins, attrs, [cx.shapes[n] for n in inputs])
    if b is None:
        return
    if max(abs(b[0]), abs(b[1])) > EXACT:
        scale = float(attrs.get("scale", 1.0))
        if op == "affine" and float(attrs.get("shift", 0.0)) == 0.0 and \
                float(np.float32(scale)) == scale and -1.0 <= ins[0][0] and ins[0][1] <= 1.0:
            # A -1 / 0 / 1 mask times a huge float32 constant (XLNet's
            # `1e30 * mask`): -c, 0 and c, all exact in float32.
            return
        raise Unsupported(f"its integer result can reach {max(abs(b[0]), abs(b[1])):.0f}, "
                          f"beyond 2^24 = {EXACT}: hwtune carries integer tensors as float32, "
                          "exact only up to 2^24")
    for n in outputs:
        cx.int_bounds[n] = b


def index_ranges(model, dtypes: Dict[str, str]) -> Dict[str, Tuple[int, int]]:
    """int input -> [low, high) of the values it may take: the extent of
    the constant tables it indexes (the smallest when several), else
    DEFAULT_RANGE."""
    g = model.graph
    consts = {t.name: tuple(t.dims) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":  # its values are read (and checked) by convert
                    consts[n.output[0]] = tuple(a.t.dims)
    source = {}  # tensor -> the int input it is a view of
    ints = {name for name, dt in dtypes.items() if dt != "float32"}
    out: Dict[str, Tuple[int, int]] = {}
    for n in g.node:
        if n.op_type in _VIEWS and n.input and n.input[0]:
            root = n.input[0] if n.input[0] in ints else source.get(n.input[0])
            if root is not None:
                source[n.output[0]] = root
        if n.op_type in ("Gather", "GatherElements") and len(n.input) > 1:
            idx = n.input[1]
            root = idx if idx in ints else source.get(idx)
            shape = consts.get(n.input[0])
            if root is None or shape is None or not shape:
                continue
            axis = 0
            for a in n.attribute:
                if a.name == "axis":
                    axis = a.i
            if not -len(shape) <= axis < len(shape):
                continue  # no bound from it: the Gather's rule refuses the axis, naming the node
            extent = int(shape[axis])
            lo, hi = out.get(root, (0, extent))
            out[root] = (lo, min(hi, extent))
    for name in ints:
        out.setdefault(name, DEFAULT_RANGE)
    return out
