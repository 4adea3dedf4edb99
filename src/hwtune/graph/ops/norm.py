"""batch_norm (inference: per-channel affine from running statistics) and
softmax."""

import numpy as np

from hwtune.graph.ops import (Attr, OpError, OpSpec, normalize_axis, numel, register,
                              show_shape)


def _channels(shape, layout):
    if layout == "NCHW":
        if len(shape) < 2:
            raise OpError(f"batch_norm input needs a channel axis, got {show_shape(shape)}",
                          "inputs[0]")
        return shape[1]
    if len(shape) != 5:
        raise OpError(f"NCHWc input must be [N, C/x, H, W, x], got {show_shape(shape)}",
                      "inputs[0]")
    return shape[1] * shape[4]


def _bn_infer(in_shapes, attrs, n_out):
    c = _channels(in_shapes[0], attrs["layout"])
    for i in range(1, 5):
        if tuple(in_shapes[i]) != (c,):
            raise OpError(f"must have shape [{c}] (one value per channel), got "
                          f"{show_shape(in_shapes[i])}", f"inputs[{i}]")
    return [tuple(in_shapes[0])]


def _bn_ref(arrays, attrs, n_out):
    x, gamma, beta, mean, var = (a.astype(np.float64) for a in arrays)
    scale = gamma / np.sqrt(var + attrs["epsilon"])
    shift = beta - mean * scale
    if attrs["layout"] == "NCHW":
        bshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        y = x * scale.reshape(bshape) + shift.reshape(bshape)
    else:
        cb, b = x.shape[1], x.shape[4]
        y = x * scale.reshape(1, cb, 1, 1, b) + shift.reshape(1, cb, 1, 1, b)
    return [y.astype(np.float32)]


register(OpSpec(
    "batch_norm", ("x", "gamma", "beta", "mean", "var"), 5, 5, _bn_infer, _bn_ref,
    lambda ins, outs, attrs: 2 * numel(outs[0]),
    attrs=[Attr("epsilon", "float", 1e-5, minimum=0.0, doc="added to var"),
           Attr("layout", "str", "NCHW", choices=("NCHW", "NCHWc"),
                doc="where the channels are (axis 1, or axes 1 and 4)")],
    doc="y = gamma * (x - mean) / sqrt(var + epsilon) + beta, per channel",
    layout="tolerant"))


def _softmax_infer(in_shapes, attrs, n_out):
    normalize_axis(attrs["axis"], len(in_shapes[0]))
    return [tuple(in_shapes[0])]


def _softmax_ref(arrays, attrs, n_out):
    x = arrays[0].astype(np.float64)
    axis = attrs["axis"]
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(np.float32)]


register(OpSpec(
    "softmax", ("x",), 1, 1, _softmax_infer, _softmax_ref,
    lambda ins, outs, attrs: 3 * numel(outs[0]),
    attrs=[Attr("axis", "int", -1, doc="the normalised axis")],
    doc="exp(x - max) / sum(exp(x - max)) along axis"))


def _ln_infer(in_shapes, attrs, n_out):
    x = in_shapes[0]
    axis = normalize_axis(attrs["axis"], len(x))
    for i in range(1, len(in_shapes)):
        if tuple(in_shapes[i]) != tuple(x[axis:]):
            raise OpError(f"must have the normalised shape {show_shape(x[axis:])}, got "
                          f"{show_shape(in_shapes[i])}", f"inputs[{i}]")
    return [tuple(x)]


def _ln_ref(arrays, attrs, n_out):
    x = arrays[0].astype(np.float64)
    axes = tuple(range(normalize_axis(attrs["axis"], x.ndim), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + attrs["epsilon"]) * arrays[1].astype(np.float64)
    if len(arrays) == 3:
        y = y + arrays[2]
    return [y.astype(np.float32)]


register(OpSpec(
    "layer_norm", ("x", "scale", "bias"), 2, 3, _ln_infer, _ln_ref,
    lambda ins, outs, attrs: 5 * numel(outs[0]),
    attrs=[Attr("axis", "int", -1, doc="normalised over this axis and every later one"),
           Attr("epsilon", "float", 1e-5, minimum=0.0, doc="added to the variance")],
    doc="(x - mean) / sqrt(var + epsilon) * scale (+ bias) over the axes from axis on "
        "(ONNX LayerNormalization; biased variance)"))
