"""lstm_cell: the element-wise part of one LSTM step, fused.

Given the gate pre-activations of a batch of B rows (four blocks of H
columns: input i, forget f, cell g, output o, the order of torch.nn.LSTM),
optionally plus rows of a second pre-activation tensor (the hoisted input
projection x W + b of several steps, DeepCPU Sec. 5.2.1) and a bias:

    z = gates + x_gates[x_row : x_row + B] + bias
    c = sigmoid(z_f) * c_prev + sigmoid(z_i) * tanh(z_g)
    h = sigmoid(z_o) * tanh(c)

The same function as the unfused cell of configs/models/templates/lstm.json
(add, split, 3 sigmoid, 2 tanh, 3 mul, add), in one op and one pass.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, check_bias, register, show_shape


def _dims(in_shapes, attrs):
    """(B, H) after checking every input against the gates' shape."""
    gates = in_shapes[0]
    if len(gates) != 2 or gates[1] % 4 or gates[1] == 0:
        raise OpError(f"gates must be [B, 4H] with H >= 1, got {show_shape(gates)}",
                      "inputs[0]")
    b, h = gates[0], gates[1] // 4
    if tuple(in_shapes[1]) != (b, h):
        raise OpError(f"c_prev must have shape [{b}, {h}], got {show_shape(in_shapes[1])}",
                      "inputs[1]")
    if len(in_shapes) > 2:
        xg = in_shapes[2]
        if len(xg) != 2 or xg[1] != 4 * h:
            raise OpError(f"x_gates must be [R, {4 * h}], got {show_shape(xg)}", "inputs[2]")
        if attrs["x_row"] + b > xg[0]:
            raise OpError(f"rows {attrs['x_row']}..{attrs['x_row'] + b - 1} are past the "
                          f"{xg[0]} rows of x_gates", "attrs.x_row")
    elif attrs["x_row"] != 0:
        raise OpError("x_row needs an x_gates input", "attrs.x_row")
    check_bias(in_shapes, 3, 4 * h)
    return b, h


def _infer(in_shapes, attrs, n_out):
    b, h = _dims(in_shapes, attrs)
    return [(b, h), (b, h)]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _ref(arrays, attrs, n_out):
    z = arrays[0].astype(np.float64)
    b, h = z.shape[0], z.shape[1] // 4
    if len(arrays) > 2:
        z = z + arrays[2][attrs["x_row"]:attrs["x_row"] + b]
    if len(arrays) > 3:
        z = z + arrays[3]
    zi, zf, zg, zo = (z[:, k * h:(k + 1) * h] for k in range(4))
    c = _sigmoid(zf) * arrays[1] + _sigmoid(zi) * np.tanh(zg)
    hh = _sigmoid(zo) * np.tanh(c)
    return [hh.astype(np.float32), c.astype(np.float32)]


def _flops(in_shapes, out_shapes, attrs):
    """As the unfused cell counts them: one per element of every add and
    mul, one per activation."""
    b, h = out_shapes[0]
    adds = 4 * h * (len(in_shapes) - 2 if len(in_shapes) > 2 else 0)
    return b * (adds + 5 * h + 4 * h)


register(OpSpec(
    "lstm_cell", ("gates", "c_prev", "x_gates", "bias"), 2, 4, _infer, _ref, _flops,
    attrs=[Attr("x_row", "int", 0, minimum=0,
                doc="first row of x_gates added to gates (a step's rows of a hoisted "
                    "projection)")],
    n_outputs=2,
    doc="h, c of an LSTM step from its gate pre-activations [B, 4H] (i, f, g, o) "
        "(+ x_gates rows, + bias): c = s(f) c_prev + s(i) tanh(g), h = s(o) tanh(c)"))
