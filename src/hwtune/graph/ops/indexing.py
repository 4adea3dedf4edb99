"""Ops on run-time indices and masks: take (ONNX Gather with run-time
indices: embedding lookups), gather_elements, cumsum, expand and where.

Integer and bool tensors are carried as float32 values (docs/onnx.md):
an index is the float's value, exact below 2^24. An index outside
[-n, n) of its axis (after ONNX's negative wrap) selects nothing: the
output element (take: the whole row) is NaN, in the reference as in the
engine, so a bad index shows in the outputs instead of reading outside the
table.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, normalize_axis, numel, register, show_shape
from hwtune.graph.ops.eltwise import broadcast

_ZERO = lambda ins, outs, attrs: 0  # noqa: E731 - data movement, no FLOPs


def _wrap(idx, n):
    """Indices as int64 wrapped into [0, n), and where they were in range."""
    i = np.trunc(np.asarray(idx, np.float64))
    ok = np.isfinite(i) & (i >= -n) & (i < n)
    i = np.where(ok, i, 0).astype(np.int64)
    return np.where(i < 0, i + n, i), ok


# -- take --------------------------------------------------------------------

def _take_infer(in_shapes, attrs, n_out):
    data, idx = in_shapes
    axis = normalize_axis(attrs["axis"], len(data))
    return [tuple(data[:axis]) + tuple(idx) + tuple(data[axis + 1:])]


def _take_ref(arrays, attrs, n_out):
    data, idx = arrays
    axis = normalize_axis(attrs["axis"], data.ndim)
    i, ok = _wrap(idx, data.shape[axis])
    out = np.take(data, i, axis=axis).astype(np.float32)
    # rows whose index was out of range: NaN
    mask = ok.reshape((1,) * axis + ok.shape + (1,) * (data.ndim - axis - 1))
    return [np.ascontiguousarray(np.where(mask, out, np.float32(np.nan)))]


register(OpSpec(
    "take", ("data", "indices"), 2, 2, _take_infer, _take_ref, _ZERO,
    attrs=[Attr("axis", "int", 0, doc="the indexed axis of data (negative counts from the end)")],
    doc="data's slices along axis at run-time indices (ONNX Gather; an embedding lookup): "
        "out[..., j..., ...] = data[..., indices[j...], ...]; out of range: NaN"))


# -- gather_elements ---------------------------------------------------------

def _ge_infer(in_shapes, attrs, n_out):
    data, idx = in_shapes
    if len(data) != len(idx):
        raise OpError(f"indices {show_shape(idx)} must have data's rank "
                      f"({show_shape(data)})", "inputs[1]")
    axis = normalize_axis(attrs["axis"], len(data))
    for d in range(len(data)):
        if d != axis and idx[d] > data[d]:
            raise OpError(f"indices {show_shape(idx)} exceed data {show_shape(data)} on axis "
                          f"{d}", "inputs[1]")
    return [tuple(idx)]


def _ge_ref(arrays, attrs, n_out):
    data, idx = arrays
    axis = normalize_axis(attrs["axis"], data.ndim)
    i, ok = _wrap(idx, data.shape[axis])
    sub = data[tuple(slice(0, n) for n in idx.shape[:axis])
               + (slice(None),) + tuple(slice(0, n) for n in idx.shape[axis + 1:])]
    out = np.take_along_axis(sub, i, axis=axis).astype(np.float32)
    return [np.where(ok, out, np.float32(np.nan))]


register(OpSpec(
    "gather_elements", ("data", "indices"), 2, 2, _ge_infer, _ge_ref, _ZERO,
    attrs=[Attr("axis", "int", 0, doc="the indexed axis (negative counts from the end)")],
    doc="ONNX GatherElements (numpy take_along_axis): out[i] = data[i with i[axis] = "
        "indices[i]]; out of range: NaN"))


# -- cumsum ------------------------------------------------------------------

def _cumsum_ref(arrays, attrs, n_out):
    x = arrays[0]
    axis = normalize_axis(attrs["axis"], x.ndim)
    y = np.flip(x, axis) if attrs["reverse"] else x
    # float32 running sums in order along the axis, as the engine adds them
    s = np.cumsum(y, axis=axis, dtype=np.float32)
    if attrs["exclusive"]:
        s = np.concatenate([np.zeros_like(np.take(s, [0], axis=axis)),
                            np.take(s, range(s.shape[axis] - 1), axis=axis)], axis=axis)
    if attrs["reverse"]:
        s = np.flip(s, axis)
    return [np.ascontiguousarray(s, np.float32)]


def _cumsum_infer(in_shapes, attrs, n_out):
    normalize_axis(attrs["axis"], len(in_shapes[0]))
    return [tuple(in_shapes[0])]


register(OpSpec(
    "cumsum", ("x",), 1, 1, _cumsum_infer, _cumsum_ref,
    lambda ins, outs, attrs: numel(outs[0]),
    attrs=[Attr("axis", "int", doc="the summed axis (negative counts from the end)"),
           Attr("exclusive", "bool", False, doc="each sum leaves out its own element"),
           Attr("reverse", "bool", False, doc="sum from the end of the axis")],
    doc="running sum along an axis (ONNX CumSum), in float32 in order along the axis"))


# -- expand ------------------------------------------------------------------

def _expand_infer(in_shapes, attrs, n_out):
    shape = attrs["shape"]
    if any(d < 1 for d in shape):
        raise OpError(f"dimensions must be >= 1, got {list(shape)}", "attrs.shape")
    out = broadcast([tuple(in_shapes[0]), tuple(shape)])
    return [out]


register(OpSpec(
    "expand", ("x",), 1, 1, _expand_infer,
    lambda arrays, attrs, n_out: [np.ascontiguousarray(np.broadcast_to(
        arrays[0], _expand_infer([arrays[0].shape], attrs, 1)[0]), np.float32)],
    _ZERO, attrs=[Attr("shape", "ints", doc="the shape x is broadcast with (ONNX Expand)")],
    doc="x broadcast (numpy rules) with a shape: the output has the broadcast shape"))


# -- where -------------------------------------------------------------------

register(OpSpec(
    "where", ("condition", "a", "b"), 3, 3,
    lambda in_shapes, attrs, n_out: [broadcast(in_shapes)],
    lambda arrays, attrs, n_out: [np.where(arrays[0] != 0, arrays[1], arrays[2]).astype(
        np.float32)],
    lambda ins, outs, attrs: numel(outs[0]),
    doc="condition != 0 ? a : b (ONNX Where; numpy broadcasting of all three)"))
