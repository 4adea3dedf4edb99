"""Ops that only move data: concat, split, slice, reshape, flatten, transpose, pad,
gather."""

import numpy as np

from hwtune.graph.ops import (Attr, OpError, OpSpec, normalize_axis, numel, register,
                              show_shape)

_ZERO = lambda ins, outs, attrs: 0  # noqa: E731 - data movement, no FLOPs


def _concat_infer(in_shapes, attrs, n_out):
    first = in_shapes[0]
    axis = normalize_axis(attrs["axis"], len(first))
    total = 0
    for i, s in enumerate(in_shapes):
        if len(s) != len(first) or any(a != b for k, (a, b) in enumerate(zip(s, first))
                                       if k != axis):
            raise OpError(f"shape {show_shape(s)} does not match {show_shape(first)} "
                          f"outside axis {axis}", f"inputs[{i}]")
        total += s[axis]
    out = list(first)
    out[axis] = total
    return [tuple(out)]


register(OpSpec(
    "concat", ("x0", "x1", "..."), 1, None, _concat_infer,
    lambda arrays, attrs, n_out: [np.concatenate(arrays, axis=attrs["axis"])],
    _ZERO, attrs=[Attr("axis", "int", doc="the joined axis (negative counts from the end)")],
    doc="join tensors along an axis"))


def _split_sizes(shape, attrs, n_out):
    axis = normalize_axis(attrs["axis"], len(shape))
    if attrs["sizes"] is None:
        if shape[axis] % n_out:
            raise OpError(f"axis {axis} of size {shape[axis]} does not split into "
                          f"{n_out} equal parts", "outputs")
        return axis, [shape[axis] // n_out] * n_out
    sizes = list(attrs["sizes"])
    if len(sizes) != n_out:
        raise OpError(f"{len(sizes)} sizes for {n_out} outputs", "attrs.sizes")
    if sum(sizes) != shape[axis] or min(sizes) < 1:
        raise OpError(f"sizes {sizes} must be >= 1 and add up to {shape[axis]}",
                      "attrs.sizes")
    return axis, sizes


def _split_infer(in_shapes, attrs, n_out):
    axis, sizes = _split_sizes(in_shapes[0], attrs, n_out)
    outs = []
    for size in sizes:
        s = list(in_shapes[0])
        s[axis] = size
        outs.append(tuple(s))
    return outs


def _split_ref(arrays, attrs, n_out):
    axis, sizes = _split_sizes(arrays[0].shape, attrs, n_out)
    cuts = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(arrays[0], cuts, axis=axis)]


register(OpSpec(
    "split", ("x",), 1, 1, _split_infer, _split_ref, _ZERO, n_outputs=None,
    attrs=[Attr("axis", "int", doc="the split axis"),
           Attr("sizes", "ints", None, doc="part sizes; default: equal parts, one "
                                           "per output")],
    doc="cut a tensor into len(outputs) parts along an axis"))


def _slice_bounds(shape, attrs):
    axis = normalize_axis(attrs["axis"], len(shape))
    begin, end = attrs["begin"], attrs["end"]
    b, e, _ = slice(begin, end).indices(shape[axis])
    if e <= b:
        raise OpError(f"[{begin}:{end}] is empty on axis {axis} of size {shape[axis]}",
                      "attrs.end")
    return axis, b, e


def _slice_infer(in_shapes, attrs, n_out):
    axis, b, e = _slice_bounds(in_shapes[0], attrs)
    out = list(in_shapes[0])
    out[axis] = e - b
    return [tuple(out)]


def _slice_ref(arrays, attrs, n_out):
    axis, b, e = _slice_bounds(arrays[0].shape, attrs)
    idx = [slice(None)] * arrays[0].ndim
    idx[axis] = slice(b, e)
    return [np.ascontiguousarray(arrays[0][tuple(idx)])]


register(OpSpec(
    "slice", ("x",), 1, 1, _slice_infer, _slice_ref, _ZERO,
    attrs=[Attr("axis", "int", doc="the sliced axis"),
           Attr("begin", "int", 0, doc="first index (negative counts from the end)",
                int64=True),
           Attr("end", "int", 2**62, doc="one past the last index, clamped", int64=True)],
    doc="x[..., begin:end, ...] on one axis (Python slice rules, step 1)"))


def _reshape_infer(in_shapes, attrs, n_out):
    target = list(attrs["shape"])
    total = numel(in_shapes[0])
    if target.count(-1) > 1 or any(d < 1 and d != -1 for d in target):
        raise OpError(f"{target}: dimensions must be >= 1, with at most one -1",
                      "attrs.shape")
    if -1 in target:
        known = numel([d for d in target if d != -1])
        if total % known:
            raise OpError(f"cannot reshape {show_shape(in_shapes[0])} ({total} elements) "
                          f"into {target}", "attrs.shape")
        target[target.index(-1)] = total // known
    if numel(target) != total:
        raise OpError(f"cannot reshape {show_shape(in_shapes[0])} ({total} elements) "
                      f"into {show_shape(target)}", "attrs.shape")
    return [tuple(target)]


register(OpSpec(
    "reshape", ("x",), 1, 1, _reshape_infer,
    lambda arrays, attrs, n_out: [arrays[0].reshape(_reshape_infer(
        [arrays[0].shape], attrs, 1)[0]).copy()],
    _ZERO, attrs=[Attr("shape", "ints", doc="new shape, one entry may be -1")],
    doc="same elements (row-major order), new shape"))


def _flatten_infer(in_shapes, attrs, n_out):
    s = in_shapes[0]
    axis = attrs["axis"]
    if not 0 <= axis <= len(s):
        raise OpError(f"axis {axis} is out of range for rank {len(s)}", "attrs.axis")
    return [(numel(s[:axis]), numel(s[axis:]))]


register(OpSpec(
    "flatten", ("x",), 1, 1, _flatten_infer,
    lambda arrays, attrs, n_out: [arrays[0].reshape(
        _flatten_infer([arrays[0].shape], attrs, 1)[0]).copy()],
    _ZERO, attrs=[Attr("axis", "int", 1, doc="dims before it form rows")],
    doc="2-D view: [prod(shape[:axis]), prod(shape[axis:])]"))


def _transpose_perm(shape, attrs):
    rank = len(shape)
    perm = list(attrs["perm"]) if attrs["perm"] is not None else list(range(rank - 1, -1, -1))
    if sorted(p % rank if -rank <= p < rank else p for p in perm) != list(range(rank)):
        raise OpError(f"perm {perm} is not a permutation of the {rank} axes of "
                      f"{show_shape(shape)}", "attrs.perm")
    return [p % rank for p in perm]


register(OpSpec(
    "transpose", ("x",), 1, 1,
    lambda in_shapes, attrs, n_out: [tuple(in_shapes[0][p] for p in
                                           _transpose_perm(in_shapes[0], attrs))],
    lambda arrays, attrs, n_out: [np.ascontiguousarray(
        arrays[0].transpose(_transpose_perm(arrays[0].shape, attrs)))],
    _ZERO, attrs=[Attr("perm", "ints", None, doc="output axis i is input axis perm[i]; "
                                                 "default: reversed")],
    doc="permute the axes (ONNX Transpose)"))


def _pad_widths(shape, attrs):
    """[(before, after)] per axis from ONNX's pads order [b0, b1, ..., e0, e1, ...]."""
    pads, rank = attrs["pads"], len(shape)
    if len(pads) != 2 * rank:
        raise OpError(f"{len(pads)} pads for a rank-{rank} tensor {show_shape(shape)} "
                      f"(give {2 * rank}: every axis' begin, then every axis' end)",
                      "attrs.pads")
    return [(pads[i], pads[i + rank]) for i in range(rank)]


def _pad_infer(in_shapes, attrs, n_out):
    return [tuple(d + b + e for d, (b, e) in zip(in_shapes[0], _pad_widths(in_shapes[0], attrs)))]


register(OpSpec(
    "pad", ("x",), 1, 1, _pad_infer,
    lambda arrays, attrs, n_out: [np.pad(arrays[0], _pad_widths(arrays[0].shape, attrs),
                                         constant_values=np.float32(attrs["value"]))],
    _ZERO, attrs=[Attr("pads", "ints", minimum=0,
                       doc="zeros or more before each axis, then after each axis "
                           "(ONNX order: [b0, b1, ..., e0, e1, ...])"),
                  Attr("value", "float", 0.0, doc="the constant written in the padding")],
    doc="x surrounded by a constant on every axis (ONNX Pad, mode constant)"))


def _gather_axis(shape, attrs):
    axis = normalize_axis(attrs["axis"], len(shape))
    n = shape[axis]
    bad = [i for i in attrs["indices"] if not -n <= i < n]
    if bad:
        raise OpError(f"indices {bad} are out of range for axis {axis} of size {n}",
                      "attrs.indices")
    if not attrs["indices"]:
        raise OpError("needs at least one index", "attrs.indices")
    return axis


def _gather_infer(in_shapes, attrs, n_out):
    axis = _gather_axis(in_shapes[0], attrs)
    out = list(in_shapes[0])
    out[axis] = len(attrs["indices"])
    return [tuple(out)]


register(OpSpec(
    "gather", ("x",), 1, 1, _gather_infer,
    lambda arrays, attrs, n_out: [np.ascontiguousarray(np.take(
        arrays[0], list(attrs["indices"]), axis=_gather_axis(arrays[0].shape, attrs)))],
    _ZERO, attrs=[Attr("axis", "int", 0, doc="the gathered axis (negative counts from the end)"),
                  Attr("indices", "ints", doc="positions along axis, in output order, repeats "
                                              "allowed (negative counts from the end)")],
    doc="x's slices at constant positions along one axis (ONNX Gather with constant "
        "indices, Slice with a step)"))
