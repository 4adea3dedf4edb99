"""Indicator tensors: OneHot and EyeLike (issue #41, architectures held out
beyond the zoo: CANINE hashes characters into buckets with OneHot, XLNet's
relative attention builds a mask with EyeLike).

EyeLike depends on its input's shape only, which import knows: it becomes a
constant. OneHot of run-time indices is an equality test against the
positions 0..depth-1 laid along the new axis (ONNX counts a negative index
from the end, so it is tested against position - depth too), then a choice
between the off and on values.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.axes import normalize_axis
from hwtune.onnx.errors import Unsupported

# ONNX TensorProto data types -> numpy, for EyeLike's dtype attribute (the
# types a float32 tensor can carry exactly enough: bool, ints, floats).
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
           7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
           13: np.uint64}


def eye_like(cx, attrs):
    shp = cx.shape(0)
    if len(shp) != 2:
        raise Unsupported(f"EyeLike of a rank-{len(shp)} tensor (ONNX allows rank 2 only)")
    dtype = _DTYPES.get(int(attrs.get("dtype", 1)))
    if dtype is None:
        raise Unsupported(f"EyeLike dtype {attrs['dtype']}")
    cx.define(cx.out(), np.eye(shp[0], shp[1], int(attrs.get("k", 0)), dtype=dtype))


def _one_hot_value(indices, depth, values, axis):
    """The ONNX definition, for constant indices (the numpy reference of
    the emitted ops too)."""
    idx = np.asarray(indices).astype(np.int64)
    axis = normalize_axis(axis, idx.ndim + 1)  # an axis of the output, one rank up
    pos = np.arange(depth).reshape((depth,) + (1,) * (idx.ndim - axis))
    hit = np.expand_dims(idx, axis)
    hit = (hit == pos) | (hit == pos - depth)
    return np.where(hit, values[1], values[0])


def _depth_values(depth, values):
    depth = int(np.asarray(depth).reshape(-1)[0])
    values = np.asarray(values).reshape(-1)
    if depth < 1 or values.size != 2:
        raise Unsupported(f"OneHot depth {depth} with {values.size} values (needs >= 1 and 2)")
    return depth, values


def fold_one_hot(values, attrs, cx):
    depth, vals = _depth_values(values[1], values[2])
    return [_one_hot_value(values[0], depth, vals, int(attrs.get("axis", -1)))]


def one_hot(cx, attrs):
    depth, vals = _depth_values(cx.const(1, "depth"), cx.const(2, "values"))
    shp = tuple(cx.shape(0))
    axis = normalize_axis(attrs.get("axis", -1), len(shp) + 1)  # of the output
    pos = np.arange(depth, dtype=np.float32).reshape((depth,) + (1,) * (len(shp) - axis))
    idx = cx.emit("reshape", [cx.tensor(0)],
                  {"shape": list(shp[:axis]) + [1] + list(shp[axis:])})
    at = cx.emit("equal", [idx, cx.param(f"{cx.out()}:positions", pos)])
    wrapped = cx.emit("equal", [idx, cx.param(f"{cx.out()}:negative", pos - depth)])
    hit = cx.emit("logical_or", [at, wrapped])
    off, on = (cx.param(f"{cx.out()}:{k}", np.asarray([v], vals.dtype))
               for k, v in (("off", vals[0]), ("on", vals[1])))
    cx.emit("where", [hit, on, off], out=cx.out())
