"""The ONNX LSTM and GRU ops, unrolled over the sequence into hwtune ops.

The input projection of every time step is one matmul over all steps
([S*B, I] x [I, G*H], both biases folded in where the cell allows); each
step then adds its recurrent product h @ R^T, splits the gates and applies
the cell's element-wise update. The sequence length is a fixed dimension
of the imported graph, so unrolling is exact. Forward direction, default
activations and batch-second layout (what torch.onnx.export writes); any
other case is refused with the reason.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.convert import Unsupported


def _check(cx, attrs, what):
    if attrs.get("direction", "forward") != "forward":
        raise Unsupported(f'{what} direction "{attrs["direction"]}" is not supported yet '
                          "(forward only)")
    if attrs.get("layout", 0) != 0:
        raise Unsupported(f"{what} layout=1 (batch first) is not supported yet")
    if "clip" in attrs:
        raise Unsupported(f"{what} with a cell clip is not supported yet")
    if "activations" in attrs:
        default = ["Sigmoid", "Tanh", "Tanh"][:2 if what == "GRU" else 3]
        if list(attrs["activations"]) != default:
            raise Unsupported(f"{what} activations {list(attrs['activations'])} are not "
                              f"supported yet (only {default})")
    for i, name in ((1, "W"), (2, "R")):
        if not cx.is_const(i):
            raise Unsupported(f"{what} weights {name} computed at run time are not supported")
    seq, batch, _ = cx.shape(0)
    if cx.has(4):
        lens = np.asarray(cx.const(4, "sequence_lens"))
        if np.any(lens != seq):
            raise Unsupported(f"{what} sequence_lens {lens.tolist()} shorter than the "
                              f"sequence ({seq}) are not supported yet")
    return seq, batch


def _state(cx, i, batch, hidden, hint):
    """Initial state input i as a [B, H] tensor (zeros when omitted)."""
    if not cx.has(i):
        return cx.param(hint, np.zeros((batch, hidden), np.float32))
    if cx.is_const(i):
        return cx.param(hint, np.asarray(cx.const(i), np.float32).reshape(batch, hidden))
    return cx.emit("reshape", [cx.tensor(i)], {"shape": [batch, hidden]})


def _projected_steps(cx, w, bias, seq, batch):
    """X @ W^T + bias for all steps at once, then one [B, G*H] slice per step."""
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": [seq * batch, cx.shape(0)[2]]})
    xw = cx.emit("matmul", [x, cx.param(f"{cx.out()}:W", w.T.copy()),
                            cx.param(f"{cx.out()}:Wb", bias)])
    steps = []
    for t in range(seq):
        part = cx.emit("slice", [xw], {"axis": 0, "begin": t * batch, "end": (t + 1) * batch})
        steps.append(part)
    return steps


def _outputs(cx, hs, last_c, seq, batch, hidden):
    """Y [S, 1, B, H], Y_h [1, B, H] and (LSTM) Y_c [1, B, H], as the node
    lists them."""
    outs = list(cx.node.output) + ["", "", ""]
    if outs[0]:
        rows = [cx.emit("reshape", [h], {"shape": [1, 1, batch, hidden]}) for h in hs]
        if len(rows) == 1:
            cx.emit("reshape", [rows[0]], {"shape": [1, 1, batch, hidden]}, out=outs[0])
        else:
            cx.emit("concat", rows, {"axis": 0}, out=outs[0])
    for k, state in ((1, hs[-1]), (2, last_c)):
        if outs[k] and state is not None:
            cx.emit("reshape", [state], {"shape": [1, batch, hidden]}, out=outs[k])


def lstm(cx, attrs):
    seq, batch = _check(cx, attrs, "LSTM")
    if cx.has(7):
        raise Unsupported("LSTM peepholes (input P) are not supported yet")
    if seq > 64:  # concat of Y takes at most 64 inputs
        raise Unsupported(f"LSTM over {seq} steps: at most 64 are supported yet")
    w, r = cx.const(1)[0], cx.const(2)[0]               # [4H, I], [4H, H]; gates i, o, f, c
    hidden = r.shape[1]
    b = cx.const(3)[0] if cx.has(3) else np.zeros(8 * hidden, np.float32)
    bias = (b[:4 * hidden] + b[4 * hidden:]).astype(np.float32)
    rt = cx.param(f"{cx.out()}:R", r.T.copy())
    h = _state(cx, 5, batch, hidden, f"{cx.out()}:h0")
    c = _state(cx, 6, batch, hidden, f"{cx.out()}:c0")
    hs = []
    for xw in _projected_steps(cx, w, bias, seq, batch):
        g = cx.emit("add", [xw, cx.emit("matmul", [h, rt])])
        parts = [cx.fresh(f"{cx.out()}:gate") for _ in range(4)]
        i, o, f, cand = cx.emit("split", [g], {"axis": 1}, outputs=parts)
        i, o, f = (cx.emit("sigmoid", [v]) for v in (i, o, f))
        c = cx.emit("add", [cx.emit("mul", [f, c]), cx.emit("mul", [i, cx.emit("tanh", [cand])])])
        h = cx.emit("mul", [o, cx.emit("tanh", [c])])
        hs.append(h)
    _outputs(cx, hs, c, seq, batch, hidden)


def gru(cx, attrs):
    seq, batch = _check(cx, attrs, "GRU")
    if not attrs.get("linear_before_reset", 0):
        raise Unsupported("GRU with linear_before_reset=0 is not supported yet (PyTorch "
                          "exports 1)")
    if seq > 64:
        raise Unsupported(f"GRU over {seq} steps: at most 64 are supported yet")
    w, r = cx.const(1)[0], cx.const(2)[0]               # [3H, I], [3H, H]; gates z, r, h
    hidden = r.shape[1]
    b = cx.const(3)[0] if cx.has(3) else np.zeros(6 * hidden, np.float32)
    rt = cx.param(f"{cx.out()}:R", r.T.copy())
    rb = cx.param(f"{cx.out()}:Rb", b[3 * hidden:].astype(np.float32))
    h = _state(cx, 5, batch, hidden, f"{cx.out()}:h0")
    hs = []
    for xw in _projected_steps(cx, w, b[:3 * hidden].astype(np.float32), seq, batch):
        hr = cx.emit("matmul", [h, rt, rb])
        xz, xr, xn = cx.emit("split", [xw], {"axis": 1},
                             outputs=[cx.fresh(f"{cx.out()}:x") for _ in range(3)])
        hz, hr_, hn = cx.emit("split", [hr], {"axis": 1},
                              outputs=[cx.fresh(f"{cx.out()}:h") for _ in range(3)])
        z = cx.emit("sigmoid", [cx.emit("add", [xz, hz])])
        rg = cx.emit("sigmoid", [cx.emit("add", [xr, hr_])])
        n = cx.emit("tanh", [cx.emit("add", [xn, cx.emit("mul", [rg, hn])])])
        # (1 - z) n + z h = n + z (h - n)
        h = cx.emit("add", [n, cx.emit("mul", [z, cx.emit("sub", [h, n])])])
        hs.append(h)
    _outputs(cx, hs, None, seq, batch, hidden)
