"""ONNX normalisations and reductions that exports emit, written in
hwtune's ops (issue #41):

- InstanceNormalization (also PyTorch's GroupNorm export: Reshape ->
  InstanceNormalization -> Reshape -> Mul -> Add) and GroupNormalization
  (opset 18: scale and bias per group; 21: per channel): layer_norm over the
  flattened spatial (group) axis with unit scale, then the per-channel
  scale and bias as a broadcast mul and add.
- LpNormalization (p 1 or 2), ReduceL1, ReduceL2, ReduceSumSquare:
  reduce_sum of |x| or x*x (sqrt for L2), the division broadcast.
- ReduceMax / ReduceMin over any axes: the reduced axes moved last
  (transpose), the tensor seen as [1, R, 1, K] (R kept elements, K reduced)
  and global_pool2d max over K; min as -max(-x).
- ArgMax: the argmax op (indices as float32 values).
- Einsum of two operands whose indices are batch (both inputs and the
  output), contracted (both inputs only) or free (one input and the output):
  transposes and reshapes around one batch_matmul.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx import fold as F
from hwtune.onnx.axes import normalize_axes, normalize_axis
from hwtune.onnx.errors import Unsupported


def _affine_channels(cx, y, shape, scale, bias, what):
    """y * scale + bias with scale, bias [C] broadcast over axis 1 of shape."""
    bshape = [shape[1]] + [1] * (len(shape) - 2)
    for name, v, op in (("scale", scale, "mul"), ("bias", bias, "add")):
        if v is None:
            continue
        t = cx.param(f"{cx.out()}:{name}", np.asarray(v, np.float32).reshape(bshape)) \
            if isinstance(v, np.ndarray) else cx.emit("reshape", [v], {"shape": bshape})
        y = cx.emit(op, [y, t])
    return y


def _normalize_rows(cx, x, shape, rows, eps):
    """layer_norm of x seen as [N, rows, rest] over the last axis, unit
    scale, back to shape."""
    rest = int(np.prod(shape, dtype=np.int64)) // (shape[0] * rows)
    flat = cx.emit("reshape", [x], {"shape": [shape[0], rows, rest]})
    ones = cx.param(f"{cx.out()}:ones", np.ones(rest, np.float32))
    y = cx.emit("layer_norm", [flat, ones], {"axis": 2, "epsilon": eps})
    return cx.emit("reshape", [y], {"shape": list(shape)})


def _channel_vec(cx, i, c, what):
    """Input i as a constant [C] array, or a run-time tensor name of C values."""
    if not cx.has(i):
        return None
    if cx.is_const(i):
        v = np.asarray(cx.const(i), np.float32).reshape(-1)
        if v.size != c:
            raise Unsupported(f"{what} of {v.size} values for {c} channels")
        return v
    return cx.tensor(i)


def instance_norm(cx, attrs):
    shape = tuple(cx.shape(0))
    if len(shape) < 3:
        raise Unsupported(f"InstanceNormalization of a rank-{len(shape)} tensor")
    y = _normalize_rows(cx, cx.tensor(0), shape, shape[1], float(attrs.get("epsilon", 1e-5)))
    c = shape[1]
    scale, bias = _channel_vec(cx, 1, c, "scale"), _channel_vec(cx, 2, c, "bias")
    last = _affine_channels(cx, y, shape, scale, bias, "instance")
    cx.emit("reshape", [last], {"shape": list(shape)}, out=cx.out())


def group_norm(cx, attrs):
    shape = tuple(cx.shape(0))
    groups = int(attrs["num_groups"])
    c = shape[1]
    if len(shape) < 3 or c % groups:
        raise Unsupported(f"GroupNormalization of {list(shape)} into {groups} groups")
    y = _normalize_rows(cx, cx.tensor(0), shape, groups, float(attrs.get("epsilon", 1e-5)))
    vals = []
    for i, what in ((1, "scale"), (2, "bias")):
        v = np.asarray(cx.const(i, what), np.float32).reshape(-1)
        if v.size == groups and groups != c:  # opset 18: one value per group
            v = np.repeat(v, c // groups)
        if v.size != c:
            raise Unsupported(f"GroupNormalization {what} of {v.size} values for {c} channels")
        vals.append(v)
    last = _affine_channels(cx, y, shape, vals[0], vals[1], "group")
    cx.emit("reshape", [last], {"shape": list(shape)}, out=cx.out())


def reduce_axes(cx, attrs, since):
    """A Reduce* node's sorted non-negative axes (every axis when none are
    given), None for a no-op (empty axes with noop_with_empty_axes)."""
    shp = cx.shape(0)
    axes = F.axes_of([None, cx.const(1, "axes") if cx.opset >= since and cx.has(1) else None],
                     attrs, cx, since)
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        return list(range(len(shp)))
    return sorted(set(normalize_axes(axes, len(shp))))


def kept_shape(shp, axes, keep):
    """A reduction's output shape; every axis dropped gives [1]."""
    out = [1 if i in axes else d for i, d in enumerate(shp)] if keep else \
        [d for i, d in enumerate(shp) if i not in axes]
    return out or [1]


def reduce_norm(kind):
    """ReduceL1, ReduceL2, ReduceSumSquare (axes an input from opset 18)."""
    def convert(cx, attrs):
        axes = reduce_axes(cx, attrs, 18)
        x = cx.tensor(0)
        if axes is None:
            axes = []
        keep = bool(attrs.get("keepdims", 1))
        v = cx.emit("abs", [x]) if kind == "l1" else cx.emit("mul", [x, x])
        if not axes:
            y = v
        else:
            y = cx.emit("reduce_sum", [v], {"axes": axes, "keepdims": keep},
                        out=None if kind == "l2" else cx.out())
        if kind == "l2":
            cx.emit("sqrt", [y], out=cx.out())
        elif not axes:
            cx.bind(cx.out(), y)
    return convert


def lp_normalization(cx, attrs):
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization p={p} (ONNX allows 1 and 2)")
    rank = len(cx.shape(0))
    axis = normalize_axis(attrs.get("axis", -1), rank)
    x = cx.tensor(0)
    v = cx.emit("abs", [x]) if p == 1 else cx.emit("mul", [x, x])
    s = cx.emit("reduce_sum", [v], {"axes": [axis], "keepdims": True})
    if p == 2:
        s = cx.emit("sqrt", [s])
    cx.emit("div", [x, s], out=cx.out())


def reduce_extreme(mode):
    """ReduceMax / ReduceMin over any axes (axes an input from opset 18)."""
    def convert(cx, attrs):
        shp = list(cx.shape(0))
        axes = reduce_axes(cx, attrs, 18)
        if axes is None:
            cx.bind(cx.out(), cx.tensor(0))
            return
        target = kept_shape(shp, axes, bool(attrs.get("keepdims", 1)))
        if mode == "min":
            y = max_over(cx, cx.emit("neg", [cx.tensor(0)]), shp, axes, target)
            cx.emit("neg", [y], out=cx.out())
        else:
            max_over(cx, cx.tensor(0), shp, axes, target, out=cx.out())
    return convert


def max_over(cx, x, shp, axes, target, out=None):
    """The max of x (of shape shp) over axes, reshaped to target: a global
    max pool over a [1, rows, 1, k] view, after moving the axes last."""
    kept = [i for i in range(len(shp)) if i not in axes]
    if kept + axes != list(range(len(shp))):
        x = cx.emit("transpose", [x], {"perm": kept + axes})
    r = int(np.prod([shp[i] for i in kept], dtype=np.int64))
    k = int(np.prod([shp[i] for i in axes], dtype=np.int64))
    x = cx.emit("reshape", [x], {"shape": [1, r, 1, k]})
    y = cx.emit("global_pool2d", [x], {"mode": "max"})
    return cx.emit("reshape", [y], {"shape": list(target)}, out=out)


def einsum(cx, attrs):
    eq = attrs["equation"].replace(" ", "")
    if "->" not in eq or "." in eq:
        raise Unsupported(f'Einsum "{eq}" (only explicit "->" forms without ellipsis)')
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if len(terms) == 1 == len(cx.node.input):
        _einsum_one(cx, eq, terms[0], out)
        return
    if len(terms) != 2 or len(cx.node.input) != 2:
        raise Unsupported(f'Einsum "{eq}" (one or two operands only)')
    a, b = terms
    if any(len(set(t)) != len(t) for t in (a, b, out)):
        raise Unsupported(f'Einsum "{eq}" with a repeated index (a diagonal)')
    batch = [i for i in out if i in a and i in b]
    left = [i for i in out if i in a and i not in b]
    right = [i for i in out if i in b and i not in a]
    contract = [i for i in a if i in b and i not in out]
    if set(a) != set(batch + left + contract) or set(b) != set(batch + right + contract) \
            or set(out) != set(batch + left + right):
        raise Unsupported(f'Einsum "{eq}": an index summed within one operand')
    sa, sb = cx.shape(0), cx.shape(1)
    dim = {**dict(zip(a, sa)), **dict(zip(b, sb))}
    if any(dim[i] != s for i, s in zip(a, sa)) or any(dim[i] != s for i, s in zip(b, sb)):
        raise Unsupported(f'Einsum "{eq}" of {list(sa)} and {list(sb)}: sizes differ')

    def arrange(name, term, order, shape2):
        perm = [term.index(i) for i in order]
        x = name
        if perm != list(range(len(term))):
            x = cx.emit("transpose", [x], {"perm": perm})
        return cx.emit("reshape", [x], {"shape": shape2})

    size = lambda idx: int(np.prod([dim[i] for i in idx], dtype=np.int64))  # noqa: E731
    nb, m, k, n = size(batch), size(left), size(contract), size(right)
    xa = arrange(cx.tensor(0), a, batch + left + contract, [nb, m, k])
    xb = arrange(cx.tensor(1), b, batch + contract + right, [nb, k, n])
    y = cx.emit("batch_matmul", [xa, xb])
    natural = batch + left + right
    y = cx.emit("reshape", [y], {"shape": [dim[i] for i in natural] or [1]})
    perm = [natural.index(i) for i in out]
    if perm != list(range(len(out))):
        cx.emit("transpose", [y], {"perm": perm}, out=cx.out())
    else:
        cx.emit("reshape", [y], {"shape": [dim[i] for i in out] or [1]}, out=cx.out())


def _einsum_one(cx, eq, a, out):
    """One operand (XLNet's "ijbn->bnij"): the indices missing from the
    output summed (reduce_sum), then the rest put in the output's order."""
    if len(set(a)) != len(a) or len(set(out)) != len(out) or not set(out) <= set(a):
        raise Unsupported(f'Einsum "{eq}" (a diagonal, or an output index the input lacks)')
    x, kept = cx.tensor(0), [i for i in a if i in out]
    if len(kept) < len(a):
        x = cx.emit("reduce_sum", [x], {"axes": [a.index(i) for i in a if i not in out],
                                        "keepdims": False}, out=None if out else cx.out())
        if not out:
            return
    perm = [kept.index(i) for i in out]
    if perm != list(range(len(out))):
        cx.emit("transpose", [x], {"perm": perm}, out=cx.out())
    else:
        cx.bind(cx.out(), x)


def argmax(cx, attrs):
    axis = normalize_axis(attrs.get("axis", 0), len(cx.shape(0)))
    cx.emit("argmax", [cx.tensor(0)], {"axis": axis, "keepdims": bool(attrs.get("keepdims", 1)),
                                       "select_last_index": bool(attrs.get(
                                           "select_last_index", 0))}, out=cx.out())
