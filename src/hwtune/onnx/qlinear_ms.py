"""ONNX Runtime's QOperator element-wise and pooling ops (com.microsoft
QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
QLinearAveragePool, QLinearConcat, QLinearWhere):
`quantize_static(..., quant_format=QOperator)` writes them around the convs
and matmuls of transformers and mobile CNNs, and a model holding one did not
import (issue #43).

Each becomes what it means: its quantized inputs dequantized (per tensor),
the float op of the same name through its own import rule (its attributes
read as that rule reads them), then the output quantized. The float rule
sees a stand-in node whose inputs are the dequantized tensors, so the
attribute handling is not written twice; a constant quantized input (a
QLinearMul by a weight) is dequantized at import.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx import quant as Q
from hwtune.onnx.errors import Unsupported


class _Node:
    """The float op's view of a QLinear node: inputs and output renamed."""

    def __init__(self, node, op_type, inputs, output):
        self.name, self.domain, self.op_type = node.name, "", op_type
        self.input, self.output, self.attribute = list(inputs), [output], node.attribute


def _scale_zero(cx, i_scale, i_zero):
    scale = float(Q._scalar(cx.const(i_scale, "scale"), "the scale (per tensor here)"))
    zero, signed = Q._zp_info(cx, i_zero)
    return scale, zero, signed


def _dequantized(cx, i_x, i_scale, i_zero):
    """A stand-in ONNX name bound to input i_x dequantized."""
    scale, zero, _ = _scale_zero(cx, i_scale, i_zero)
    name = cx.fresh(f"{cx.node.input[i_x]}:dq")
    if cx.is_const(i_x):
        q = np.asarray(cx.const(i_x), np.float64)
        cx.define(name, ((q - zero) * scale).astype(np.float32))
    else:
        cx.bind(name, cx.emit("dequantize", [cx.tensor(i_x)],
                              {"scale": scale, "zero_point": float(zero)}))
    return name


def via_float(op_type, float_rule, layout):
    """The rule of a QLinear op whose inputs are laid out as `layout`: a
    list of ("q", x, scale, zero) quantized inputs, ("f", i) float or
    boolean inputs taken as they are, and last ("y", scale, zero);
    float_rule converts the float op op_type."""
    def convert(cx, attrs):
        inputs, (_, i_ys, i_yz) = [], layout[-1]
        for part in layout[:-1]:
            if part[0] == "q":
                inputs.append(_dequantized(cx, *part[1:]))
            else:
                inputs.append(cx.node.input[part[1]])
        if attrs.get("channels_last", 0):
            raise Unsupported("channels_last=1 is not supported yet (NCHW only)")
        node, out, opset = cx.node, cx.fresh(f"{cx.out()}:float"), cx.opset
        cx.node = _Node(node, op_type, inputs, out)
        # QLinearSoftmax names the opset of the Softmax it stands for.
        cx.opset = int(attrs.get("opset", 13))
        try:
            float_rule(cx, {k: v for k, v in attrs.items()
                                        if k not in ("opset", "channels_last")})
        finally:
            cx.node, cx.opset = node, opset
        scale, zero, signed = _scale_zero(cx, i_ys, i_yz)
        kind = "s8" if signed else "u8"
        src = cx.alias.get(out, out)
        if out in cx.consts:
            raise Unsupported(f"{node.op_type} of constants only")
        cx.emit(f"quantize_{kind}", [src], {"scale": scale, "zero_point": float(zero)},
                out=cx.out())
        Q._st(cx).signed[cx.out()] = signed
    return convert


def table(float_rules):
    """op type -> rule, each over float_rules[its float op].convert (the
    float import table, onnx/rules.py)."""
    def make(op_type, layout):
        return via_float(op_type, float_rules[op_type].convert, layout)

    unary = [("q", 0, 1, 2), ("y", 3, 4)]
    binary = [("q", 0, 1, 2), ("q", 3, 4, 5), ("y", 6, 7)]

    def concat(cx, attrs):
        """QLinearConcat: Y_scale, Y_zero, then (X, X_scale, X_zero) per input."""
        n = (len(cx.node.input) - 2) // 3
        if len(cx.node.input) != 2 + 3 * n or n < 1:
            raise Unsupported("QLinearConcat inputs are Y_scale, Y_zero and triples "
                              "(X, X_scale, X_zero)")
        layout = [("q", 2 + 3 * k, 3 + 3 * k, 4 + 3 * k) for k in range(n)] + [("y", 0, 1)]
        make("Concat", layout)(cx, attrs)

    return {
        "QLinearMul": make("Mul", binary),
        "QLinearSigmoid": make("Sigmoid", unary),
        "QLinearLeakyRelu": make("LeakyRelu", unary),
        "QLinearSoftmax": make("Softmax", unary),
        "QLinearAveragePool": make("AveragePool", unary),
        "QLinearConcat": concat,
        "QLinearWhere": make("Where", [("f", 0), ("q", 1, 2, 3), ("q", 4, 5, 6), ("y", 7, 8)]),
    }


def matmul(qlinear_matmul, float_matmul):
    """QLinearMatMul: by a constant b the int8 qmatmul (quant.py); by a
    run-time b (attention's Q by K transposed in a QOperator transformer)
    dequantize both, the float MatMul, quantize."""
    by_tensor = via_float("MatMul", float_matmul, [("q", 0, 1, 2), ("q", 3, 4, 5), ("y", 6, 7)])

    def convert(cx, attrs):
        (qlinear_matmul if cx.is_const(3) else by_tensor)(cx, attrs)
    return convert
