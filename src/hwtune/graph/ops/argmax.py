"""argmax: the index of the largest element along one axis (ONNX ArgMax, a
classifier's or tagger's output head), as a float32 value (hwtune's
tensors are float32; indices below 2^24 are exact). The first largest
wins (select_last_index: the last); a NaN counts as larger than any number
(numpy's rule: the first NaN). keepdims keeps the axis as size 1, else it
is dropped (every axis dropped gives [1])."""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape


def _infer(in_shapes, attrs, n_out):
    x = tuple(in_shapes[0])
    axis = attrs["axis"]
    if not -len(x) <= axis < len(x):
        raise OpError(f"axis {axis} is out of range for {show_shape(x)}", "attrs.axis")
    axis %= len(x)
    if x[axis] > 1 << 24:
        raise OpError(f"axis of {x[axis]} elements: indices above 2^24 are not exact in "
                      "float32", "attrs.axis")
    if attrs["keepdims"]:
        return [x[:axis] + (1,) + x[axis + 1:]]
    return [(x[:axis] + x[axis + 1:]) or (1,)]


def _ref(arrays, attrs, n_out):
    x = np.asarray(arrays[0], np.float32)
    axis = attrs["axis"] % x.ndim
    if attrs["select_last_index"]:
        idx = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis)
    else:
        idx = np.argmax(x, axis=axis)
    return [idx.astype(np.float32).reshape(_infer([x.shape], attrs, 1)[0])]


register(OpSpec(
    "argmax", ("x",), 1, 1, _infer, _ref, lambda ins, outs, attrs: numel(ins[0]),
    attrs=[Attr("axis", "int", 0, doc="the axis searched (negative: from the end)"),
           Attr("keepdims", "bool", True, doc="keep the axis as size 1"),
           Attr("select_last_index", "bool", False, doc="ties: the last index")],
    doc="index of the largest element along axis, as float32 (ONNX ArgMax)"))
