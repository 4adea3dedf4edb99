"""ONNX ops imported as a few engine ops each (issue #41's held-out
families): no kernel of their own, since each is rare in a model and its
parts already run at the engine's speed.

- IsNaN, IsInf: comparisons (x != x; |x|, x or -x against +inf).
- LogSoftmax, ReduceLogSumExp: max-shifted, so no term overflows or
  underflows to -inf where the true value is finite (log(softmax(x)) would
  give -inf once x - max(x) < -104).
- DepthToSpace, SpaceToDepth (pixel_shuffle / pixel_unshuffle in
  super-resolution nets): ONNX's own reshape, transpose, reshape.
- ArgMin: argmax of -x (the first of equal minima, as ONNX).
- Mean: sum, then 1/n.
- LRN (Caffe-era AlexNet / GoogLeNet / CaffeNet files): x^2 averaged over
  a window of channels by an average pool that counts the zero padding,
  so the pool's mean is ONNX's sum / size.
- SplitToSequence, SequenceAt, SequenceLength (Mamba's selective scan
  exports them): a sequence is kept at import as its tensor and cut
  points; SequenceAt at a constant position is a slice of the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np

from hwtune.onnx import norms
from hwtune.onnx.errors import Unsupported


# -- comparisons --------------------------------------------------------------

def is_nan(cx, attrs):
    x = cx.tensor(0)
    cx.emit("not_equal", [x, x], out=cx.out())


def is_inf(cx, attrs):
    neg, pos = bool(attrs.get("detect_negative", 1)), bool(attrs.get("detect_positive", 1))
    x = cx.tensor(0)
    if not neg and not pos:  # all false: nothing equals NaN (0 * x would keep x's NaNs)
        nan = cx.param(f"{cx.node.name}:nan", np.array([np.nan], np.float32))
        cx.emit("equal", [x, nan], out=cx.out())
        return
    if neg and pos:
        x = cx.emit("abs", [x])
    elif neg:
        x = cx.emit("neg", [x])
    inf = cx.param(f"{cx.node.name}:inf", np.array([np.inf], np.float32))
    cx.emit("equal", [x, inf], out=cx.out())


def fold_is_nan(values, attrs, cx):
    return [np.isnan(values[0])]


def fold_is_inf(values, attrs, cx):
    x = values[0]
    neg, pos = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    return [(np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))]


# -- max-shifted logs ---------------------------------------------------------

def _shifted_log_sum(cx, x: str, shp: List[int], axes: List[int]):
    """(m, x - m, log(sum(exp(x - m)))): m the max over axes, which stay as
    size 1."""
    m = norms.max_over(cx, x, shp, axes, norms.kept_shape(shp, axes, True))
    d = cx.emit("sub", [x, m])
    s = cx.emit("reduce_sum", [cx.emit("exp", [d])], {"axes": axes, "keepdims": True})
    return m, d, cx.emit("log", [s])


def log_softmax(cx, attrs):
    shp = list(cx.shape(0))
    rank = len(shp)
    if cx.opset >= 13:
        axes = [int(attrs.get("axis", -1)) % rank]
    else:  # before opset 13: over every dim from axis on
        axes = list(range(int(attrs.get("axis", 1)) % rank, rank))
    _, d, l = _shifted_log_sum(cx, cx.tensor(0), shp, axes)
    cx.emit("sub", [d, l], out=cx.out())


def reduce_log_sum_exp(cx, attrs):
    shp = list(cx.shape(0))
    axes = norms.reduce_axes(cx, attrs, 18)
    if axes is None:
        cx.bind(cx.out(), cx.tensor(0))
        return
    m, _, l = _shifted_log_sum(cx, cx.tensor(0), shp, axes)
    keep = bool(attrs.get("keepdims", 1))
    y = cx.emit("add", [l, m], out=cx.out() if keep else None)
    if not keep:
        cx.emit("reshape", [y], {"shape": [d for i, d in enumerate(shp) if i not in axes]},
                out=cx.out())


# -- movement -----------------------------------------------------------------

def _reshape_transpose_reshape(cx, mid, perm, out_shape):
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": mid})
    x = cx.emit("transpose", [x], {"perm": perm})
    cx.emit("reshape", [x], {"shape": out_shape}, out=cx.out())


def depth_to_space(cx, attrs):
    shp = cx.shape(0)
    b = int(attrs["blocksize"])
    if len(shp) != 4 or b < 1 or shp[1] % (b * b):
        raise Unsupported(f"DepthToSpace needs an NCHW input whose channels ({shp}) divide "
                          f"by blocksize^2 = {b * b}")
    n, c, h, w = shp
    out = [n, c // (b * b), h * b, w * b]
    if attrs.get("mode", "DCR") == "CRD":
        _reshape_transpose_reshape(cx, [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out)
    else:
        _reshape_transpose_reshape(cx, [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out)


def space_to_depth(cx, attrs):
    shp = cx.shape(0)
    b = int(attrs["blocksize"])
    if len(shp) != 4 or b < 1 or shp[2] % b or shp[3] % b:
        raise Unsupported(f"SpaceToDepth needs an NCHW input whose height and width ({shp}) "
                          f"divide by blocksize {b}")
    n, c, h, w = shp
    _reshape_transpose_reshape(cx, [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4],
                               [n, c * b * b, h // b, w // b])


# -- reductions and the rest ----------------------------------------------------

def arg_min(cx, attrs):
    cx.emit("argmax", [cx.emit("neg", [cx.tensor(0)])],
            {"axis": int(attrs.get("axis", 0)), "keepdims": bool(attrs.get("keepdims", 1)),
             "select_last_index": bool(attrs.get("select_last_index", 0))}, out=cx.out())


def fold_arg_min(values, attrs, cx):
    x = np.asarray(values[0])
    axis = int(attrs.get("axis", 0)) % max(x.ndim, 1)
    if attrs.get("select_last_index", 0):
        i = x.shape[axis] - 1 - np.argmin(np.flip(x, axis), axis=axis)
    else:
        i = np.argmin(x, axis=axis)
    return [np.expand_dims(i, axis) if attrs.get("keepdims", 1) else i]


def mean(cx, attrs):
    names = [cx.tensor(i) for i in range(len(cx.node.input)) if cx.has(i)]
    if len(names) == 1:
        cx.bind(cx.out(), names[0])
        return
    s = cx.emit("sum", names)
    cx.emit("affine", [s], {"scale": 1.0 / len(names)}, out=cx.out())


def fold_mean(values, attrs, cx):
    return [np.asarray(sum(values) / len(values))]


def lrn(cx, attrs):
    shp = list(cx.shape(0))
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    if len(shp) < 3 or size < 1:
        raise Unsupported(f"LRN needs an [N, C, ...] input and size >= 1, got {shp}, "
                          f"size {size}")
    x = cx.tensor(0)
    n, c, rest = shp[0], shp[1], int(np.prod(shp[2:], dtype=np.int64))
    sq = cx.emit("reshape", [cx.emit("mul", [x, x])], {"shape": [n, 1, c, rest]})
    avg = cx.emit("pool2d", [sq], {"mode": "avg", "kernel": [size, 1], "stride": [1, 1],
                                   "padding": [(size - 1) // 2, 0],
                                   "padding_end": [size // 2, 0],
                                   "count_include_pad": True})
    den = cx.emit("affine", [cx.emit("reshape", [avg], {"shape": shp})],
                  {"scale": alpha, "shift": bias})
    if beta != 1.0:
        den = cx.emit("pow", [den, cx.param(f"{cx.node.name}:beta",
                                            np.array([beta], np.float32))])
    cx.emit("div", [x, den], out=cx.out())


# -- sequences ------------------------------------------------------------------

@dataclass
class Sequence:
    """A SplitToSequence result: tensor's pieces along axis, cut at
    bounds (len(bounds) - 1 pieces); squeeze: each piece loses the axis."""
    tensor: str
    shape: tuple
    axis: int
    bounds: List[int]
    squeeze: bool


def split_to_sequence(cx, attrs):
    shp = cx.shape(0)
    axis = int(attrs.get("axis", 0)) % len(shp)
    dim = shp[axis]
    split = cx.const(1, "split") if cx.has(1) else None
    squeeze = False
    if split is None:  # every element a tensor, the axis kept unless keepdims = 0
        sizes = [1] * dim
        squeeze = not attrs.get("keepdims", 1)
    elif np.asarray(split).ndim == 0:  # a scalar: pieces of that length, the last shorter
        part = int(split)
        if part < 1:
            raise Unsupported(f"split length {part} is not positive")
        sizes = [min(part, dim - i) for i in range(0, dim, part)]
    else:
        sizes = [int(v) for v in np.asarray(split).reshape(-1)]
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise Unsupported(f"split sizes {sizes} do not add up to the axis' {dim}")
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + s)
    cx.sequences[cx.out()] = Sequence(cx.tensor(0), tuple(shp), axis, bounds, squeeze)


def _sequence(cx, i) -> Sequence:
    name = cx.node.input[i]
    if name not in cx.sequences:
        raise Unsupported(f'sequence "{name}" does not come from a SplitToSequence')
    return cx.sequences[name]


def sequence_at(cx, attrs):
    seq = _sequence(cx, 0)
    n = len(seq.bounds) - 1
    pos = int(np.asarray(cx.const(1, "position")).reshape(()))
    if not -n <= pos < n:
        raise Unsupported(f"position {pos} is outside the sequence of {n} tensors")
    pos %= n
    b, e = seq.bounds[pos], seq.bounds[pos + 1]
    shp = list(seq.shape)
    piece = seq.tensor
    if (b, e) != (0, shp[seq.axis]):
        piece = cx.emit("slice", [piece], {"axis": seq.axis, "begin": b, "end": e},
                        out=None if seq.squeeze else cx.out())
    elif not seq.squeeze:
        cx.bind(cx.out(), piece)
    if seq.squeeze:
        cx.emit("reshape", [piece], {"shape": shp[:seq.axis] + shp[seq.axis + 1:]},
                out=cx.out())


def sequence_length(cx, attrs):
    seq = _sequence(cx, 0)
    cx.define(cx.out(), np.array(len(seq.bounds) - 1, np.int64))


RULES = {
    "IsNaN": (is_nan, fold_is_nan),
    "IsInf": (is_inf, fold_is_inf),
    "LogSoftmax": (log_softmax, None),
    "ReduceLogSumExp": (reduce_log_sum_exp, None),
    "DepthToSpace": (depth_to_space, None),
    "SpaceToDepth": (space_to_depth, None),
    "ArgMin": (arg_min, fold_arg_min),
    "Mean": (mean, fold_mean),
    "LRN": (lrn, None),
    "SplitToSequence": (split_to_sequence, None),
    "SequenceAt": (sequence_at, None),
    "SequenceLength": (sequence_length, None),
}
