"""attention: softmax(q . kt * scale + mask) . v as one op, what the ONNX
importer makes of a transformer's eager attention (batch_matmul, affine,
add of the mask, softmax over the last axis, batch_matmul;
src/hwtune/onnx/attention.py), so the [..., S, T] scores are never
written out between four ops."""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape
from hwtune.graph.ops.eltwise import broadcast


def _infer(in_shapes, attrs, n_out):
    q, kt, v = (tuple(s) for s in in_shapes[:3])
    if len(q) < 2 or len(kt) != len(q) or len(v) != len(q):
        raise OpError(f"q {show_shape(q)}, kt {show_shape(kt)} and v {show_shape(v)} must "
                      "have one rank of at least 2", "inputs")
    if kt[:-2] != q[:-2] or v[:-2] != q[:-2]:
        raise OpError(f"leading dims of q {show_shape(q)}, kt {show_shape(kt)} and v "
                      f"{show_shape(v)} differ", "inputs")
    if kt[-2] != q[-1] or v[-2] != kt[-1]:
        raise OpError(f"q {show_shape(q)} . kt {show_shape(kt)} . v {show_shape(v)}: inner "
                      "dimensions differ", "inputs")
    scores = q[:-1] + (kt[-1],)
    if len(in_shapes) > 3 and broadcast([scores, tuple(in_shapes[3])]) != scores:
        raise OpError(f"mask {show_shape(in_shapes[3])} does not broadcast to the scores "
                      f"{show_shape(scores)}", "inputs[3]")
    return [q[:-1] + (v[-1],)]


def _ref(arrays, attrs, n_out):
    q, kt, v = (a.astype(np.float64) for a in arrays[:3])
    s = (np.matmul(q, kt).astype(np.float32) * np.float32(attrs["scale"])).astype(np.float32)
    if len(arrays) > 3:
        s = (s + arrays[3]).astype(np.float32)
    s = s.astype(np.float64)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    # the probabilities rounded to float32, as softmax's output would be
    p = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32).astype(np.float64)
    return [np.matmul(p, v).astype(np.float32)]


def _flops(ins, outs, attrs):
    q, kt, v = ins[:3]
    rows = numel(q[:-1])
    return rows * kt[-1] * (2 * q[-1] + 2 * v[-1] + 4)


register(OpSpec(
    "attention", ("q", "kt", "v", "mask"), 3, 4, _infer, _ref, _flops,
    attrs=[Attr("scale", "float", 1.0, doc="multiplies q . kt before the mask is added")],
    doc="softmax(q . kt * scale + mask, last axis) . v: q [..., S, D], kt [..., D, T], "
        "v [..., T, E], the mask broadcasting to [..., S, T]; output [..., S, E]"))
