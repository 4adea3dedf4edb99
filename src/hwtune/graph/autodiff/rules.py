"""Gradient rules: one function per forward op type.

A rule gets the emitter, the forward op (attributes resolved) and the
gradient of each of its outputs (a tensor name; zeros are materialised by
the caller for outputs nothing used), plus which inputs need a gradient; it
emits backward ops and returns one gradient name (or None) per input. Rules
express backward work with forward ops where one fits (matmul with
transposes, slice, concat, reshape) and otherwise with the training ops of
hwtune.graph.ops.train. Every gradient has its tensor's shape.

Kept apart from the op definitions (hwtune.graph.ops) so that adding a
forward op and adding its rule are separate changes.
"""

from typing import Callable, Dict, List, Optional, Sequence

from hwtune.graph.ops import normalize_axis

Rule = Callable[..., List[Optional[str]]]
RULES: Dict[str, Rule] = {}


def rule(*names):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


class NoRule(Exception):
    """The op has no gradient rule (or none for these attributes)."""


def unbroadcast(e, g: str, shape: Sequence[int]) -> str:
    """Sum a gradient of the broadcast shape back to an operand's shape."""
    gshape = tuple(e.shape(g))
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = list(range(lead)) + [i + lead for i, d in enumerate(shape)
                                if d == 1 and gshape[i + lead] != 1]
    out = e.op("reduce_sum", [g], axes=axes, keepdims=True)
    if tuple(e.shape(out)) != shape:
        out = e.op("reshape", [out], shape=list(shape) or [1])
    return out


def _shape_of(e, name):
    return tuple(e.shape(name))


@rule("add", "sum")
def _add(e, op, dys, wants):
    return [unbroadcast(e, dys[0], _shape_of(e, x)) if w else None
            for x, w in zip(op.inputs, wants)]


@rule("sub")
def _sub(e, op, dys, wants):
    a, b = op.inputs
    da = unbroadcast(e, dys[0], _shape_of(e, a)) if wants[0] else None
    db = None
    if wants[1]:
        db = unbroadcast(e, e.op("affine", [dys[0]], scale=-1.0, shift=0.0), _shape_of(e, b))
    return [da, db]


@rule("mul")
def _mul(e, op, dys, wants):
    a, b = op.inputs
    da = unbroadcast(e, e.op("mul", [dys[0], b]), _shape_of(e, a)) if wants[0] else None
    db = unbroadcast(e, e.op("mul", [dys[0], a]), _shape_of(e, b)) if wants[1] else None
    return [da, db]


@rule("div")
def _div(e, op, dys, wants):
    a, b = op.inputs
    y = op.outputs[0]
    da = unbroadcast(e, e.op("div", [dys[0], b]), _shape_of(e, a)) if wants[0] else None
    db = None
    if wants[1]:  # d(a/b)/db = -(a/b)/b
        t = e.op("div", [e.op("mul", [dys[0], y]), b])
        db = unbroadcast(e, e.op("affine", [t], scale=-1.0, shift=0.0), _shape_of(e, b))
    return [da, db]


@rule("minimum", "maximum")
def _minmax(e, op, dys, wants):
    """The larger (maximum) or smaller (minimum) operand takes dy; a tie
    gives each half, as PyTorch does. One op computes both shares in the
    broadcast shape; each is summed back to its operand's shape."""
    a, b = op.inputs
    da, db = e.op(f"{op.op}_grad", [a, b, dys[0]], n_out=2)
    return [unbroadcast(e, da, _shape_of(e, a)) if wants[0] else None,
            unbroadcast(e, db, _shape_of(e, b)) if wants[1] else None]


@rule("mod")
def _mod(e, op, dys, wants):
    """y = a - b floor(a / b): da = dy, db = -floor(a / b) dy. floor(a / b)
    is recovered from the output as (a - y) / b rounded to the nearest
    integer (exact where a / b in float rounds across an integer), instead
    of keeping a / b for the backward pass."""
    a, b = op.inputs
    y = op.outputs[0]
    da = unbroadcast(e, dys[0], _shape_of(e, a)) if wants[0] else None
    db = None
    if wants[1]:
        q = e.op("div", [e.op("sub", [a, y]), b])
        k = e.op("floor", [e.op("affine", [q], scale=1.0, shift=0.5)])
        t = e.op("mul", [dys[0], k])
        db = unbroadcast(e, e.op("affine", [t], scale=-1.0, shift=0.0), _shape_of(e, b))
    return [da, db]


# One-input ops whose gradient is one training op of (the forward op's input
# or its output, dy): op -> (gradient op, what it reads, the forward
# attributes it takes).
_ONE_OP = {
    "abs": ("abs_grad", "input", ()),
    "relu": ("relu_grad", "input", ()),
    "leaky_relu": ("relu_grad", "input", ("alpha",)),
    "sigmoid": ("sigmoid_grad", "output", ()),
    "tanh": ("tanh_grad", "output", ()),
    "softmax": ("softmax_grad", "output", ("axis",)),
}


@rule(*_ONE_OP)
def _one_op(e, op, dys, wants):
    grad, reads, attrs = _ONE_OP[op.op]
    x = op.inputs[0] if reads == "input" else op.outputs[0]
    return [e.op(grad, [x, dys[0]], **{a: op.resolved[a] for a in attrs})]


@rule("affine")
def _affine(e, op, dys, wants):
    return [e.op("affine", [dys[0]], scale=op.resolved["scale"], shift=0.0)]


@rule("matmul")
def _matmul(e, op, dys, wants):
    """y = A B (+ bias), A = op(a), B = op(b): dA = dy B^T, dB = A^T dy,
    each written as one GEMM with the transposes that give the stored
    layout of a and b directly."""
    a, b = op.inputs[0], op.inputs[1]
    ta, tb = op.resolved["transpose_a"], op.resolved["transpose_b"]
    dy = dys[0]
    out = [None] * len(op.inputs)
    if wants[0]:
        out[0] = (e.op("matmul", [b, dy], transpose_a=tb, transpose_b=True) if ta
                  else e.op("matmul", [dy, b], transpose_b=not tb))
    if wants[1]:
        out[1] = (e.op("matmul", [dy, a], transpose_a=True, transpose_b=ta) if tb
                  else e.op("matmul", [a, dy], transpose_a=not ta))
    if len(op.inputs) == 3 and wants[2]:
        out[2] = e.op("reduce_sum", [dy], axes=[0], keepdims=False)
    return out


def _nchw_only(op):
    if op.resolved.get("layout", "NCHW") != "NCHW":
        raise NoRule(f"{op.op} in layout {op.resolved['layout']} (NCHW only)")


def _symmetric_only(op, dilated=False):
    r = op.resolved
    if r.get("padding_end") is not None and tuple(r["padding_end"]) != tuple(r["padding"]):
        raise NoRule(f"{op.op} with asymmetric padding (padding_end)")
    if dilated and tuple(r.get("dilation", (1, 1))) != (1, 1):
        raise NoRule(f"dilated {op.op}")


@rule("conv2d")
def _conv2d(e, op, dys, wants):
    _nchw_only(op)
    if int(op.resolved.get("group") or 1) > 1:
        raise NoRule(f"grouped conv2d (group={op.resolved['group']})")
    if len(op.inputs) == 4 or op.resolved.get("relu") or op.resolved.get("act"):
        raise NoRule("conv2d with a fused epilogue (relu / act / residual): train the unfused "
                     "model (conv2d, add, relu / silu / hard_swish)")
    _symmetric_only(op, dilated=True)
    x, w = op.inputs[0], op.inputs[1]
    st, pad = list(op.resolved["stride"]), list(op.resolved["padding"])
    xs, ws = _shape_of(e, x), _shape_of(e, w)
    out = [None] * len(op.inputs)
    if wants[0]:
        out[0] = e.op("conv2d_grad_data", [dys[0], w], stride=st, padding=pad,
                      input_size=[xs[2], xs[3]])
    if wants[1]:
        out[1] = e.op("conv2d_grad_weight", [x, dys[0]], stride=st, padding=pad,
                      kernel=[ws[2], ws[3]])
    if len(op.inputs) == 3 and wants[2]:
        out[2] = e.op("reduce_sum", [dys[0]], axes=[0, 2, 3], keepdims=False)
    return out


@rule("pool2d")
def _pool2d(e, op, dys, wants):
    _nchw_only(op)
    _symmetric_only(op)
    r = op.resolved
    attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()
             if k not in ("layout", "padding_end") and v is not None}
    return [e.op("pool2d_grad", [op.inputs[0], dys[0]], **attrs)]


@rule("global_pool2d")
def _global_pool2d(e, op, dys, wants):
    _nchw_only(op)
    h, w = _shape_of(e, op.inputs[0])[2:4]
    return [e.op("pool2d_grad", [op.inputs[0], dys[0]], mode=op.resolved["mode"],
                 kernel=[h, w])]


@rule("batch_norm")
def _batch_norm(e, op, dys, wants):
    """Statistics are the op's inputs (inference-mode batch_norm): x, gamma
    and beta get gradients, mean and var are constants."""
    _nchw_only(op)
    x, gamma, _, mean, var = op.inputs
    if wants[3] or wants[4]:
        raise NoRule("batch_norm with respect to its mean or var (they are statistics)")
    dx, dgamma, dbeta = e.op("batch_norm_grad", [x, dys[0], gamma, mean, var], n_out=3,
                             epsilon=op.resolved["epsilon"])
    return [dx, dgamma, dbeta, None, None]


@rule("batch_norm_train")
def _batch_norm_train(e, op, dys, wants):
    """Batch statistics (training mode): dx also flows through the mean and
    variance; the op's saved mean and invstd are not differentiated (nothing
    but this rule reads them)."""
    x, gamma, _ = op.inputs
    _, mean, inv = op.outputs
    dx, dgamma, dbeta = e.op("batch_norm_train_grad", [x, dys[0], gamma, mean, inv], n_out=3)
    return [dx, dgamma, dbeta]


@rule("concat")
def _concat(e, op, dys, wants):
    axis = normalize_axis(op.resolved["axis"], len(_shape_of(e, op.outputs[0])))
    out, begin = [], 0
    for x, w in zip(op.inputs, wants):
        size = _shape_of(e, x)[axis]
        out.append(e.op("slice", [dys[0]], axis=axis, begin=begin, end=begin + size)
                   if w else None)
        begin += size
    return out


@rule("split")
def _split(e, op, dys, wants):
    return [e.op("concat", list(dys), axis=op.resolved["axis"])]


@rule("slice")
def _slice(e, op, dys, wants):
    shape = _shape_of(e, op.inputs[0])
    axis = normalize_axis(op.resolved["axis"], len(shape))
    begin, _, _ = slice(op.resolved["begin"], op.resolved["end"]).indices(shape[axis])
    return [e.op("slice_grad", [dys[0]], axis=axis, begin=begin, size=shape[axis])]


@rule("reshape", "flatten")
def _reshape(e, op, dys, wants):
    return [e.op("reshape", [dys[0]], shape=list(_shape_of(e, op.inputs[0])))]


@rule("layout_transform")
def _layout_transform(e, op, dys, wants):
    return [e.op("layout_transform", [dys[0]], src=op.resolved["dst"], dst=op.resolved["src"])]


@rule("lstm_cell")
def _lstm_cell(e, op, dys, wants):
    """The fused cell (hwtune.graph.ops.rnn) differentiated as its unfused
    form: the gates are recomputed from z (cheaper to keep than four more
    [B, H] activations), then
        dc_total = dc + dh * o * (1 - tanh(c)^2)
        dz_i = dc_total * g * i(1-i)    dz_f = dc_total * c_prev * f(1-f)
        dz_g = dc_total * i * (1-g^2)   dz_o = dh * tanh(c) * o(1-o)
        dc_prev = dc_total * f."""
    gates, c_prev = op.inputs[0], op.inputs[1]
    b, h4 = _shape_of(e, gates)
    h = h4 // 4
    z = gates
    if len(op.inputs) > 2:
        row = op.resolved["x_row"]
        z = e.op("add", [z, e.op("slice", [op.inputs[2]], axis=0, begin=row, end=row + b)])
    if len(op.inputs) > 3:
        z = e.op("add", [z, op.inputs[3]])
    zi, zf, zg, zo = (e.op("slice", [z], axis=1, begin=k * h, end=(k + 1) * h)
                      for k in range(4))
    i, f, o = (e.op("sigmoid", [x]) for x in (zi, zf, zo))
    g = e.op("tanh", [zg])
    dh, dc = dys
    tc = e.op("tanh", [op.outputs[1]])
    dct = e.op("add", [dc, e.op("tanh_grad", [tc, e.op("mul", [dh, o])])])
    dz = e.op("concat", [e.op("sigmoid_grad", [i, e.op("mul", [dct, g])]),
                         e.op("sigmoid_grad", [f, e.op("mul", [dct, c_prev])]),
                         e.op("tanh_grad", [g, e.op("mul", [dct, i])]),
                         e.op("sigmoid_grad", [o, e.op("mul", [dh, tc])])], axis=1)
    out = [dz if wants[0] else None,
           e.op("mul", [dct, f]) if wants[1] else None]
    if len(op.inputs) > 2:
        rows = _shape_of(e, op.inputs[2])[0]
        out.append(e.op("slice_grad", [dz], axis=0, begin=op.resolved["x_row"], size=rows)
                   if wants[2] else None)
    if len(op.inputs) > 3:
        out.append(unbroadcast(e, dz, _shape_of(e, op.inputs[3])) if wants[3] else None)
    return out
