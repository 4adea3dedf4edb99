"""numpy evaluation of ONNX nodes whose inputs are all constants: how shape
subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Constant,
ConstantOfShape, Range, Cast, ...) are folded away at import.

Each function takes (values, attrs, cx) — the constant inputs in order
(None for an omitted optional input), the node's attributes and the import
context (for its opset) — and returns the outputs as numpy arrays, or raises
Unsupported to leave the node to its converter.
"""

from __future__ import annotations

import functools

import numpy as np

from hwtune.onnx.axes import check_perm, normalize_axes, normalize_axis
from hwtune.onnx.errors import Unsupported


def np_dtype(onnx_type: int):
    from onnx import helper
    try:
        return helper.tensor_dtype_to_np_dtype(onnx_type)
    except (KeyError, ValueError):
        raise Unsupported(f"unknown tensor type {onnx_type}") from None


def axes_of(values, attrs, cx, since: int, index: int = 1):
    """The `axes` of Squeeze/Unsqueeze/Reduce*: an attribute before opset
    `since`, an optional input from it on; None when absent."""
    if cx.opset >= since:
        v = values[index] if len(values) > index else None
        return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]
    return attrs.get("axes")


def constant(values, attrs, cx):
    for key, dtype in (("value", None), ("value_float", np.float32),
                       ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return [np.asarray(attrs[key], dtype=dtype)]
    raise Unsupported("Constant with a sparse or string value")


def shape_of(shape, attrs):
    dims = np.asarray(shape, dtype=np.int64)
    return dims[attrs.get("start", 0):attrs.get("end", None)]


def unsqueeze_shape(shape, axes):
    rank = len(shape) + len(axes)  # the axes index the output
    axes = sorted(normalize_axes(axes, rank))
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


def squeeze_shape(shape, axes):
    if axes is None:
        return tuple(d for d in shape if d != 1)
    drop = set(normalize_axes(axes, len(shape)))
    if any(shape[a] != 1 for a in drop):
        raise Unsupported(f"Squeeze of axes {sorted(drop)} of shape {list(shape)}: not size 1")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def reshape_target(shape, target, allowzero=0):
    """ONNX Reshape's output shape: 0 copies the input dim (unless
    allowzero), one -1 takes what is left."""
    out = [int(d) for d in target]
    for i, d in enumerate(out):
        if d == 0 and not allowzero:
            if i >= len(shape):
                raise Unsupported(f"Reshape target {out}: 0 at dim {i} beyond the input rank")
            out[i] = int(shape[i])
    total = int(np.prod(shape, dtype=np.int64))
    if out.count(-1) > 1:
        raise Unsupported(f"Reshape target {out} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise Unsupported(f"cannot reshape {list(shape)} into {out}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != total:
        raise Unsupported(f"cannot reshape {list(shape)} into {out}")
    return tuple(out)


def slice_params(values, attrs, cx, rank):
    """[(axis, start, end, step)] of a Slice node (attributes before opset
    10, inputs from it on)."""
    if cx.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = values[1], values[2]
        axes = values[3] if len(values) > 3 else None
        steps = values[4] if len(values) > 4 else None
    starts, ends = _index_values(starts, "starts"), _index_values(ends, "ends")
    axes = list(range(len(starts))) if axes is None else _index_values(axes, "axes")
    axes = normalize_axes(axes, rank)
    steps = [1] * len(starts) if steps is None else _index_values(steps, "steps")
    return list(zip(axes, starts, ends, steps))


def _index_values(v, what):
    """The ints of an index tensor (Slice's starts, ends, axes, steps);
    ONNX types them int32 / int64: a float one (NaN, 2.5) is refused, not
    truncated."""
    a = np.asarray(v)
    if a.size and a.dtype.kind not in "iu":
        raise Unsupported(f"Slice {what} of type {a.dtype} (ONNX's are int32 or int64)")
    return [int(x) for x in a.reshape(-1)]


def _slice(values, attrs, cx):
    x = values[0]
    idx = [slice(None)] * x.ndim
    for axis, b, e, s in slice_params(values, attrs, cx, x.ndim):
        idx[axis] = slice(b, e, s)
    return [x[tuple(idx)]]


def _split(values, attrs, cx, n_out):
    x = values[0]
    axis = normalize_axis(attrs.get("axis", 0), x.ndim)
    sizes = split_sizes(values, attrs, cx, x.shape[axis], n_out)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def split_sizes(values, attrs, cx, dim, n_out):
    if cx.opset >= 13 and len(values) > 1 and values[1] is not None:
        return [int(v) for v in np.asarray(values[1]).reshape(-1)]
    if cx.opset < 13 and "split" in attrs:
        return [int(v) for v in attrs["split"]]
    n = attrs.get("num_outputs", n_out)
    part = -(-dim // n)  # opset 18: the last part may be smaller
    return [min(part, dim - i * part) for i in range(n)]


def _int_div(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return (np.trunc(np.asarray(a, np.float64) / b)).astype(np.result_type(a, b))
    return np.divide(a, b)


def _reduce(fn):
    def run(values, attrs, cx):
        axes = axes_of(values, attrs, cx, 18 if fn is not np.sum else 13)
        if not axes and attrs.get("noop_with_empty_axes", 0):
            return [values[0]]
        keep = bool(attrs.get("keepdims", 1))
        ax = None if not axes else tuple(normalize_axes(axes, np.ndim(values[0])))
        return [np.asarray(fn(values[0], axis=ax, keepdims=keep))]
    return run


def _binary(fn):
    return lambda v, a, cx: [np.asarray(fn(v[0], v[1]))]


def _unary(fn):
    return lambda v, a, cx: [np.asarray(fn(v[0]))]


def _relu(x):
    """x < 0 ? 0 : x: NaN and -0 kept, as ONNX Runtime's Relu (np.maximum
    would turn -0 into +0)."""
    x = np.asarray(x)
    return np.where(x < 0, np.zeros((), x.dtype), x)


def _expand(values, attrs, cx):
    shape = np.broadcast_shapes(values[0].shape, tuple(int(d) for d in values[1]))
    return [np.broadcast_to(values[0], shape).copy()]


def _where(values, attrs, cx):
    return [np.where(values[0].astype(bool), values[1], values[2])]


def _constant_of_shape(values, attrs, cx):
    fill = attrs.get("value")
    fill = np.zeros(1, np.float32) if fill is None else np.asarray(fill).reshape(-1)
    return [np.full(tuple(int(d) for d in values[0]), fill[0], dtype=fill.dtype)]


def _cast(values, attrs, cx):
    return [values[0].astype(np_dtype(attrs["to"]))]


def _gather(values, attrs, cx):
    axis = normalize_axis(attrs.get("axis", 0), np.ndim(values[0]))
    return [np.take(values[0], values[1].astype(np.int64), axis=axis)]


def _concat(values, attrs, cx):
    parts = [np.atleast_1d(v) for v in values]
    return [np.concatenate(parts, axis=normalize_axis(attrs["axis"], parts[0].ndim))]


def _range(values, attrs, cx):
    start, limit, delta = (np.asarray(v).reshape(()) for v in values)
    return [np.arange(start, limit, delta, dtype=np.result_type(start, limit, delta))]


def _reshape(values, attrs, cx):
    target = values[1] if cx.opset >= 5 else attrs["shape"]
    return [values[0].reshape(reshape_target(values[0].shape, target,
                                             attrs.get("allowzero", 0)))]


def _flatten(values, attrs, cx):
    x = values[0]
    axis = normalize_axis(attrs.get("axis", 1), x.ndim, inclusive=True) if x.ndim else 0
    return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)]


def _transpose(values, attrs, cx):
    x = values[0]
    perm = attrs.get("perm")
    return [np.transpose(x, None if perm is None else check_perm(perm, np.ndim(x)))]


def _cumsum(values, attrs, cx):
    x = values[0]
    axis = normalize_axis(np.asarray(values[1]).reshape(-1)[0], x.ndim)
    y = np.flip(x, axis) if attrs.get("reverse", 0) else x
    s = np.cumsum(y, axis=axis, dtype=x.dtype)
    if attrs.get("exclusive", 0):
        s = np.concatenate([np.zeros_like(np.take(s, [0], axis=axis)),
                            np.take(s, range(s.shape[axis] - 1), axis=axis)], axis=axis)
    return [np.flip(s, axis) if attrs.get("reverse", 0) else s]


def _gather_elements(values, attrs, cx):
    x, idx = values[0], values[1].astype(np.int64)
    axis = normalize_axis(attrs.get("axis", 0), x.ndim)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    sub = x[tuple(slice(0, n) if d != axis else slice(None) for d, n in enumerate(idx.shape))]
    return [np.take_along_axis(sub, idx, axis=axis)]


def _scatter_nd(values, attrs, cx):
    if attrs.get("reduction", "none") != "none":
        raise Unsupported(f'ScatterND reduction "{attrs["reduction"]}"')
    out = values[0].copy()
    idx, upd = values[1].astype(np.int64), values[2]
    for pos in np.ndindex(*idx.shape[:-1]):
        out[tuple(idx[pos])] = upd[pos]
    return [out]


def _trilu(values, attrs, cx):
    k = int(np.asarray(values[1]).reshape(())) if len(values) > 1 and values[1] is not None \
        else 0
    fn = np.triu if attrs.get("upper", 1) else np.tril
    return [fn(values[0], k)]


def _batch_norm(values, attrs, cx):
    """BatchNormalization of a constant: BiT's weight-standardised Conv
    exports its standardisation as a training-mode BatchNormalization of the
    weight (statistics of the input itself, per axis-1 channel, biased
    variance; the running mean / var outputs per ONNX's momentum)."""
    x = np.asarray(values[0], np.float64)
    scale, bias, mean, var = (np.asarray(v, np.float64).reshape(-1) for v in values[1:5])
    eps = float(attrs.get("epsilon", 1e-5))
    bshape = [-1] + [1] * (x.ndim - 2)
    if attrs.get("training_mode", 0):
        axes = (0,) + tuple(range(2, x.ndim))
        cur_mean, cur_var = x.mean(axis=axes), x.var(axis=axes)
        m = float(attrs.get("momentum", 0.9))
        extra = [mean * m + cur_mean * (1 - m), var * m + cur_var * (1 - m)]
    else:
        cur_mean, cur_var, extra = mean, var, []
    y = (x - cur_mean.reshape(bshape)) / np.sqrt(cur_var.reshape(bshape) + eps) \
        * scale.reshape(bshape) + bias.reshape(bshape)
    return [np.asarray(v, np.float32) for v in [y] + extra]


FOLDS = {
    "Constant": constant,
    "Identity": lambda v, a, cx: [v[0]],
    "Dropout": lambda v, a, cx: [v[0], np.ones(v[0].shape, bool)],
    "Shape": lambda v, a, cx: [shape_of(v[0].shape, a)],
    "Size": lambda v, a, cx: [np.asarray(v[0].size, np.int64)],
    "Cast": _cast,
    "Gather": _gather,
    "Unsqueeze": lambda v, a, cx: [v[0].reshape(unsqueeze_shape(v[0].shape,
                                                                axes_of(v, a, cx, 13)))],
    "Squeeze": lambda v, a, cx: [v[0].reshape(squeeze_shape(v[0].shape,
                                                            axes_of(v, a, cx, 13)))],
    "Concat": _concat,
    "ConstantOfShape": _constant_of_shape,
    "Slice": _slice,
    "Split": lambda v, a, cx: _split(v, a, cx, len(cx.node.output)),
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Expand": _expand,
    "Range": _range,
    "Where": _where,
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": _binary(_int_div), "Pow": _binary(np.power),
    # fmod=1: C's fmod (sign of the dividend); 0: floored, sign of the divisor
    "Mod": lambda v, a, cx: [np.asarray((np.fmod if a.get("fmod", 0) else np.mod)(v[0], v[1]))],
    "Equal": _binary(np.equal), "Less": _binary(np.less), "Greater": _binary(np.greater),
    "And": _binary(np.logical_and), "Or": _binary(np.logical_or),
    "LessOrEqual": _binary(np.less_equal), "GreaterOrEqual": _binary(np.greater_equal),
    "Xor": _binary(np.logical_xor), "CumSum": _cumsum, "GatherElements": _gather_elements,
    "ScatterND": _scatter_nd, "Trilu": _trilu, "BatchNormalization": _batch_norm,
    "Tile": lambda v, a, cx: [np.tile(v[0], [int(r) for r in np.asarray(v[1]).reshape(-1)])],
    "Not": _unary(np.logical_not), "Neg": _unary(np.negative), "Abs": _unary(np.abs),
    "Floor": _unary(np.floor), "Ceil": _unary(np.ceil), "Sqrt": _unary(np.sqrt),
    "Exp": _unary(np.exp), "Log": _unary(np.log), "Reciprocal": _unary(np.reciprocal),
    "Acos": _unary(np.arccos), "Asin": _unary(np.arcsin), "Atan": _unary(np.arctan),
    "Tan": _unary(np.tan), "Sinh": _unary(np.sinh), "Cosh": _unary(np.cosh),
    "Asinh": _unary(np.arcsinh), "Acosh": _unary(np.arccosh), "Atanh": _unary(np.arctanh),
    "Round": _unary(np.round),
    "Relu": _unary(_relu),
    "Sigmoid": _unary(lambda x: 1 / (1 + np.exp(-x))), "Tanh": _unary(np.tanh),
    "Max": lambda v, a, cx: [functools.reduce(np.maximum, v)],
    "Min": lambda v, a, cx: [functools.reduce(np.minimum, v)],
    "Sum": lambda v, a, cx: [functools.reduce(np.add, v)],
    "ReduceProd": _reduce(np.prod), "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max), "ReduceMin": _reduce(np.min), "ReduceMean": _reduce(np.mean),
}
