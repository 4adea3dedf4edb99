"""The ONNX LSTM and GRU ops, unrolled over the sequence into hwtune ops.

The input projection of every time step is one matmul over all steps
([S*B, I] x [I, G*H], both biases folded in where the cell allows); each
step then adds its recurrent product h @ R^T, splits the gates and applies
the cell's element-wise update. The sequence length is a fixed dimension
of the imported graph, so unrolling is exact.

Directions forward, reverse (steps S-1 down to 0) and bidirectional (both,
each with its own weights and initial state; Y stacks them on axis 1, Y_h
and Y_c on axis 0), as ONNX defines them. Constant `sequence_lens`
shorter than the sequence mask each step per batch row: past a row's
length its output is zero and its state is held, so the forward state at
the end is the state at the row's length, and the reverse direction starts
its row at step length - 1 from the initial state (it holds that state
until then). A row of length 0 has zero outputs and zero final states
(what ONNX Runtime returns). Default activations and batch-second layout (what
torch.onnx.export writes); any other case is refused with the reason.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.errors import Unsupported

# The engine's ops take at most 64 inputs: longer concats go in rounds.
_MAX_INPUTS = 64

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def _check_shapes(cx, attrs, what, ndir):
    """X is [seq, batch, input]; W, R and B are the shapes ONNX gives them
    for ndir directions and R's hidden size, which hidden_size (if given)
    must equal: the weights are sliced per gate by these sizes."""
    x = list(cx.shape(0))
    if len(x) != 3:
        raise Unsupported(f"{what} input X of shape {x} (ONNX's is [seq, batch, input])")
    gates = 3 if what == "GRU" else 4
    r = list(cx.shape(2))
    if len(r) != 3 or r[2] < 1:
        raise Unsupported(f"{what} R of shape {r} (ONNX's is [directions, {gates} x hidden, "
                          "hidden])")
    hidden = r[2]
    wants = [("R", 2, [ndir, gates * hidden, hidden]), ("W", 1, [ndir, gates * hidden, x[2]])]
    if cx.has(3):
        wants.append(("B", 3, [ndir, 2 * gates * hidden]))
    for name, i, want in wants:
        got = list(cx.shape(i))
        if got != want:
            raise Unsupported(f"{what} {name} of shape {got}: expected {want} for {ndir} "
                              f"direction(s), hidden size {hidden} (R's last dim) and input "
                              f"size {x[2]}")
    size = attrs.get("hidden_size", hidden)
    if size != hidden:
        raise Unsupported(f"{what} hidden_size={size} but R {r} is for hidden size {hidden}")


def _check(cx, attrs, what):
    """(seq, batch, reverse flag per direction, sequence lengths or None)."""
    direction = attrs.get("direction", "forward")
    if direction not in _DIRECTIONS:
        raise Unsupported(f'{what} direction "{direction}" (ONNX knows forward, reverse and '
                          "bidirectional)")
    dirs = _DIRECTIONS[direction]
    if attrs.get("layout", 0) != 0:
        raise Unsupported(f"{what} layout=1 (batch first) is not supported yet")
    if "clip" in attrs:
        raise Unsupported(f"{what} with a cell clip is not supported yet")
    if "activations" in attrs:
        default = ["Sigmoid", "Tanh", "Tanh"][:2 if what == "GRU" else 3] * len(dirs)
        if list(attrs["activations"]) != default:
            raise Unsupported(f"{what} activations {list(attrs['activations'])} are not "
                              f"supported yet (only {default})")
    for i, name in ((1, "W"), (2, "R")):
        if not cx.is_const(i):
            raise Unsupported(f"{what} weights {name} computed at run time are not supported")
    _check_shapes(cx, attrs, what, len(dirs))
    seq, batch, _ = cx.shape(0)
    lens = None
    if cx.has(4):
        if not cx.is_const(4):
            raise Unsupported(f"{what} sequence_lens computed at run time are not supported "
                              "(only constants)")
        lens = np.asarray(cx.const(4, "sequence_lens")).reshape(-1).astype(np.int64)
        if lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > seq):
            raise Unsupported(f"{what} sequence_lens {lens.tolist()} (one length in 0..{seq} "
                              f"per batch row, {batch} rows)")
        if np.all(lens == seq):
            lens = None
    return seq, batch, dirs, lens


def _state(cx, i, d, ndir, batch, hidden, hint):
    """Direction d's initial state from input i ([dirs, B, H]) as a [B, H]
    tensor (zeros when omitted)."""
    if not cx.has(i):
        return cx.param(hint, np.zeros((batch, hidden), np.float32))
    if tuple(cx.shape(i)) != (ndir, batch, hidden):
        raise Unsupported(f"initial state (input {i}) of shape {list(cx.shape(i))} (expected "
                          f"{[ndir, batch, hidden]})")
    if cx.is_const(i):
        v = np.asarray(cx.const(i), np.float32).reshape(ndir, batch, hidden)[d]
        return cx.param(hint, v.copy())
    x = cx.tensor(i)
    if ndir > 1:
        x = cx.emit("slice", [x], {"axis": 0, "begin": d, "end": d + 1})
    return cx.emit("reshape", [x], {"shape": [batch, hidden]})


def _projected_steps(cx, w, bias, seq, batch, tag):
    """X @ W^T + bias for all steps at once, then one [B, G*H] slice per step."""
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": [seq * batch, cx.shape(0)[2]]})
    xw = cx.emit("matmul", [x, cx.param(f"{cx.out()}:W{tag}", w.T.copy()),
                            cx.param(f"{cx.out()}:Wb{tag}", bias)])
    return [cx.emit("slice", [xw], {"axis": 0, "begin": t * batch, "end": (t + 1) * batch})
            for t in range(seq)]


def _masks(cx, lens, seq, batch, tag):
    """Per step t: ([B, 1] 1 where t < length, its complement), or None
    without lengths."""
    if lens is None:
        return [None] * seq
    out = []
    for t in range(seq):
        m = (t < lens).astype(np.float32).reshape(batch, 1)
        out.append((cx.param(f"{cx.out()}:m{tag}_{t}", m),
                    cx.param(f"{cx.out()}:n{tag}_{t}", 1.0 - m)))
    return out


def _hold(cx, mask, new, old):
    """new where the step is inside the row's length, old past it: new * m +
    old * (1 - m) (exact for m in {0, 1}); (value, the step's output: new * m)."""
    if mask is None:
        return new, new
    out = cx.emit("mul", [new, mask[0]])
    return cx.emit("add", [out, cx.emit("mul", [old, mask[1]])]), out


def _empty_rows(cx, lens, batch, state, tag):
    """state with the rows of length 0 zeroed (their Y_h / Y_c are 0)."""
    if lens is None or np.all(lens > 0):
        return state
    keep = (lens > 0).astype(np.float32).reshape(batch, 1)
    return cx.emit("mul", [state, cx.param(f"{cx.out()}:nonempty{tag}", keep)])


def _concat(cx, names, axis, out=None):
    """concat of any number of tensors, in rounds of at most 64 inputs."""
    while len(names) > _MAX_INPUTS:
        names = [cx.emit("concat", names[k:k + _MAX_INPUTS], {"axis": axis})
                 if len(names[k:k + _MAX_INPUTS]) > 1 else names[k]
                 for k in range(0, len(names), _MAX_INPUTS)]
    if len(names) == 1:
        return cx.emit("reshape", names, {"shape": list(cx.shapes[names[0]])}, out=out)
    return cx.emit("concat", names, {"axis": axis}, out=out)


def _outputs(cx, ys, hs, cs, seq, batch, hidden):
    """Y [S, dirs, B, H], Y_h [dirs, B, H] and (LSTM) Y_c [dirs, B, H], as the
    node lists them; ys[d][t] is direction d's output at step t (in time
    order), hs[d] / cs[d] its last state."""
    outs = list(cx.node.output) + ["", "", ""]
    ndir = len(ys)
    if outs[0]:
        per_dir = []
        for d, steps in enumerate(ys):
            rows = [cx.emit("reshape", [h], {"shape": [1, 1, batch, hidden]}) for h in steps]
            per_dir.append(_concat(cx, rows, 0, out=outs[0] if ndir == 1 else None))
        if ndir > 1:
            cx.emit("concat", per_dir, {"axis": 1}, out=outs[0])
    for k, states in ((1, hs), (2, cs)):
        if outs[k] and states is not None:
            rows = [cx.emit("reshape", [s], {"shape": [1, batch, hidden]},
                            out=outs[k] if ndir == 1 else None) for s in states]
            if ndir > 1:
                cx.emit("concat", rows, {"axis": 0}, out=outs[k])


def lstm(cx, attrs):
    seq, batch, dirs, lens = _check(cx, attrs, "LSTM")
    if cx.has(7):
        raise Unsupported("LSTM peepholes (input P) are not supported yet")
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(dirs):
        tag = str(d) if len(dirs) > 1 else ""
        w, r = cx.const(1)[d], cx.const(2)[d]           # [4H, I], [4H, H]; gates i, o, f, c
        hidden = r.shape[1]
        b = cx.const(3)[d] if cx.has(3) else np.zeros(8 * hidden, np.float32)
        bias = (b[:4 * hidden] + b[4 * hidden:]).astype(np.float32)
        rt = cx.param(f"{cx.out()}:R{tag}", r.T.copy())
        h = _state(cx, 5, d, len(dirs), batch, hidden, f"{cx.out()}:h0{tag}")
        c = _state(cx, 6, d, len(dirs), batch, hidden, f"{cx.out()}:c0{tag}")
        steps = _projected_steps(cx, w, bias, seq, batch, tag)
        masks = _masks(cx, lens, seq, batch, tag)
        y = [None] * seq
        for t in (reversed(range(seq)) if reverse else range(seq)):
            g = cx.emit("add", [steps[t], cx.emit("matmul", [h, rt])])
            parts = [cx.fresh(f"{cx.out()}:gate") for _ in range(4)]
            i, o, f, cand = cx.emit("split", [g], {"axis": 1}, outputs=parts)
            i, o, f = (cx.emit("sigmoid", [v]) for v in (i, o, f))
            c_new = cx.emit("add", [cx.emit("mul", [f, c]),
                                    cx.emit("mul", [i, cx.emit("tanh", [cand])])])
            h_new = cx.emit("mul", [o, cx.emit("tanh", [c_new])])
            c, _ = _hold(cx, masks[t], c_new, c)
            h, y[t] = _hold(cx, masks[t], h_new, h)
        ys.append(y)
        hs.append(_empty_rows(cx, lens, batch, h, f"h{tag}"))
        cs.append(_empty_rows(cx, lens, batch, c, f"c{tag}"))
    _outputs(cx, ys, hs, cs, seq, batch, hidden)


def gru(cx, attrs):
    seq, batch, dirs, lens = _check(cx, attrs, "GRU")
    if not attrs.get("linear_before_reset", 0):
        raise Unsupported("GRU with linear_before_reset=0 is not supported yet (PyTorch "
                          "exports 1)")
    ys, hs = [], []
    for d, reverse in enumerate(dirs):
        tag = str(d) if len(dirs) > 1 else ""
        w, r = cx.const(1)[d], cx.const(2)[d]           # [3H, I], [3H, H]; gates z, r, h
        hidden = r.shape[1]
        b = cx.const(3)[d] if cx.has(3) else np.zeros(6 * hidden, np.float32)
        rt = cx.param(f"{cx.out()}:R{tag}", r.T.copy())
        rb = cx.param(f"{cx.out()}:Rb{tag}", b[3 * hidden:].astype(np.float32))
        h = _state(cx, 5, d, len(dirs), batch, hidden, f"{cx.out()}:h0{tag}")
        steps = _projected_steps(cx, w, b[:3 * hidden].astype(np.float32), seq, batch, tag)
        masks = _masks(cx, lens, seq, batch, tag)
        y = [None] * seq
        for t in (reversed(range(seq)) if reverse else range(seq)):
            hr = cx.emit("matmul", [h, rt, rb])
            xz, xr, xn = cx.emit("split", [steps[t]], {"axis": 1},
                                 outputs=[cx.fresh(f"{cx.out()}:x") for _ in range(3)])
            hz, hr_, hn = cx.emit("split", [hr], {"axis": 1},
                                  outputs=[cx.fresh(f"{cx.out()}:h") for _ in range(3)])
            z = cx.emit("sigmoid", [cx.emit("add", [xz, hz])])
            rg = cx.emit("sigmoid", [cx.emit("add", [xr, hr_])])
            n = cx.emit("tanh", [cx.emit("add", [xn, cx.emit("mul", [rg, hn])])])
            # (1 - z) n + z h = n + z (h - n)
            h_new = cx.emit("add", [n, cx.emit("mul", [z, cx.emit("sub", [h, n])])])
            h, y[t] = _hold(cx, masks[t], h_new, h)
        ys.append(y)
        hs.append(_empty_rows(cx, lens, batch, h, f"h{tag}"))
    _outputs(cx, ys, hs, None, seq, batch, hidden)
