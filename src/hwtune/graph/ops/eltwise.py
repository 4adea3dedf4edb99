"""Element-wise ops: unary activations, affine, binary with numpy-style
broadcasting, and the n-ary sum.

FLOPs count one per output element per arithmetic step; transcendental
functions (sigmoid, tanh) count as one too, so FLOP totals compare graphs,
not instruction counts.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape


def broadcast(shapes):
    """numpy broadcasting of several shapes; raises OpError at the input
    that does not fit."""
    out = tuple(shapes[0])
    for i, s in enumerate(shapes[1:], start=1):
        rank = max(len(out), len(s))
        a = (1,) * (rank - len(out)) + tuple(out)
        b = (1,) * (rank - len(s)) + tuple(s)
        merged = []
        for x, y in zip(a, b):
            if x != y and 1 not in (x, y):
                raise OpError(f"shape {show_shape(s)} does not broadcast with "
                              f"{show_shape(out)}", f"inputs[{i}]")
            merged.append(max(x, y))
        out = tuple(merged)
    return out


def _same_shape(in_shapes, attrs, n_out):
    return [tuple(in_shapes[0])]


def _broadcast_shape(in_shapes, attrs, n_out):
    return [broadcast(in_shapes)]


def _per_elem(k):
    return lambda ins, outs, attrs: k * numel(outs[0])


def _sigmoid(x):
    # tanh form: exact identity, never overflows for large |x| in float32.
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


_UNARY = {
    "sigmoid": (_sigmoid, "1 / (1 + exp(-x))"),
    "tanh": (lambda x: np.tanh(x), "tanh(x)"),
    "relu": (lambda x: np.where(x > 0, x, np.float32(0)),
             "x > 0 ? x : 0 (NaN and -0 give +0, as the kernels)"),
    "abs": (lambda x: np.abs(x), "|x|"),
}

_BINARY = {
    "add": (np.add, "a + b"),
    "sub": (np.subtract, "a - b"),
    "mul": (np.multiply, "a * b"),
    "div": (np.divide, "a / b"),
    "minimum": (np.minimum, "min(a, b)"),
    "maximum": (np.maximum, "max(a, b)"),
    # floored modulo (result has the sign of b), as numpy and Python define
    # it; PhasedLSTM's phase needs a non-negative result for negative times.
    "mod": (np.mod, "a - b * floor(a / b)"),
}


def _unary_ref(fn):
    return lambda arrays, attrs, n_out: [np.asarray(fn(arrays[0]), np.float32)]


def _binary_ref(fn):
    return lambda arrays, attrs, n_out: [np.asarray(fn(arrays[0], arrays[1]), np.float32)]


for _name, (_fn, _formula) in _UNARY.items():
    register(OpSpec(_name, ("x",), 1, 1, _same_shape, _unary_ref(_fn), _per_elem(1),
                    doc=f"y = {_formula}"))

for _name, (_fn, _formula) in _BINARY.items():
    register(OpSpec(_name, ("a", "b"), 2, 2, _broadcast_shape, _binary_ref(_fn),
                    _per_elem(1), doc=f"y = {_formula} (numpy broadcasting)"))


def _sum_ref(arrays, attrs, n_out):
    out = np.zeros(broadcast([a.shape for a in arrays]), np.float32)
    for a in arrays:
        out = out + a
    return [out.astype(np.float32)]


register(OpSpec(
    "sum", ("x0", "x1", "..."), 2, None, _broadcast_shape, _sum_ref,
    lambda ins, outs, attrs: (len(ins) - 1) * numel(outs[0]),
    doc="y = x0 + x1 + ... (two or more inputs, numpy broadcasting)"))


def _affine_ref(arrays, attrs, n_out):
    x = arrays[0]
    return [(x * np.float32(attrs["scale"]) + np.float32(attrs["shift"])).astype(np.float32)]


register(OpSpec(
    "affine", ("x",), 1, 1, _same_shape, _affine_ref, _per_elem(2),
    attrs=[Attr("scale", "float", 1.0, doc="multiplier"),
           Attr("shift", "float", 0.0, doc="added after scaling")],
    doc="y = scale * x + shift (scalar constants: 1 - x is scale -1, shift 1)"))
