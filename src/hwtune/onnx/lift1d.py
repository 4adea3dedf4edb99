"""1-D window ops (speech encoders: Conv, ConvTranspose, MaxPool,
AveragePool, GlobalAveragePool / GlobalMaxPool on [N, C, L]) imported as
their 2-D forms with H = 1: the input is reshaped to [N, C, 1, L], constant
weights [OC, C/g, K] become [OC, C/g, 1, K] params (run-time ones a
reshape), the node's 1-D attributes gain a leading H entry (kernel 1,
stride 1, no padding, dilation 1), the 2-D rule converts that view of the
node, and its [N, OC, 1, OL] result is reshaped back to [N, OC, OL].
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.errors import Unsupported

# attribute -> the value H takes
_H_VALUE = {"kernel_shape": 1, "strides": 1, "dilations": 1, "output_padding": 0}


def _attrs_2d(attrs):
    out = dict(attrs)
    for key, h in _H_VALUE.items():
        if key in attrs:
            v = [int(d) for d in attrs[key]]
            if len(v) != 1:
                raise Unsupported(f"{key} {v} on a 1-D input (one value expected)")
            out[key] = [h] + v
    if "pads" in attrs:
        p = [int(d) for d in attrs["pads"]]
        if len(p) != 2:
            raise Unsupported(f"pads {p} on a 1-D input (two values expected)")
        out["pads"] = [0, p[0], 0, p[1]]
    if "output_shape" in attrs:
        out["output_shape"] = [1] + [int(d) for d in attrs["output_shape"]]
    return out


class _Lifted:
    """The converter's context as the 2-D rule should see the node: input 0
    (and the weights, input 1) with H = 1, a fresh 4-D output."""

    def __init__(self, cx, weights: bool):
        self._cx = cx
        n, c, length = cx.shape(0)
        self._x = cx.emit("reshape", [cx.tensor(0)], {"shape": [n, c, 1, length]})
        self._w = self._wconst = None
        if weights and cx.has(1):
            w = cx.shape(1)
            if len(w) != 3:
                raise Unsupported(f"weights of shape {list(w)} for a 1-D input")
            shape4 = [w[0], w[1], 1, w[2]]
            if cx.is_const(1):
                self._wconst = np.asarray(cx.const(1)).reshape(shape4)
            self._wshape = tuple(shape4)
        self.y4 = cx.fresh(f"{cx.out()}:2d")

    def __getattr__(self, key):
        return getattr(self._cx, key)

    def tensor(self, i):
        if i == 0:
            return self._x
        if i == 1 and hasattr(self, "_wshape"):
            if self._w is None:
                self._w = (self._cx.param(f"{self._cx.node.input[1]}:2d", self._wconst)
                           if self._wconst is not None else
                           self._cx.emit("reshape", [self._cx.tensor(1)],
                                         {"shape": list(self._wshape)}))
            return self._w
        return self._cx.tensor(i)

    def shape(self, i):
        if i == 0:
            return self._cx.shapes[self._x]
        if i == 1 and hasattr(self, "_wshape"):
            return self._wshape
        return self._cx.shape(i)

    def const(self, i, what=""):
        if i == 1 and self._wconst is not None:
            return self._wconst
        return self._cx.const(i, what)

    def out(self, k=0):
        return self.y4 if k == 0 else self._cx.out(k)


def lift_1d(convert, weights=False):
    """convert for NCHW, and [N, C, L] through the H = 1 view."""
    def run(cx, attrs):
        if len(cx.shape(0)) != 3:
            return convert(cx, attrs)
        view = _Lifted(cx, weights)
        convert(view, _attrs_2d(attrs))
        y = cx.shapes[view.y4]
        cx.emit("reshape", [view.y4], {"shape": [y[0], y[1], y[3]]}, out=cx.out())
    return run
