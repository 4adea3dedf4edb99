"""model.json graph -> ONNX (`hwtune model export`, and the ONNX Runtime
side of `hwtune compare` for model.json models): the same ops, tensor names
and weights (the values the engine binds: the weights file, or the seeded
values), so a peer computes exactly what hwtune computes.

One row per hwtune op in EXPORTERS. A row gets an Emitter and the op, and
appends ONNX nodes (constant operands such as shapes become initializers).
"""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np

from hwtune.errors import UsageError
from hwtune.graph.ops.conv import conv_pads

OPSET = 17
# ONNX Runtime builds of the last years all read IR 8 (the onnx package
# writes newer by default).
IR_VERSION = 8


class Emitter:
    def __init__(self, graph):
        self.graph = graph
        self.nodes: List = []
        self.inits: List = []
        self._n = 0

    def const(self, hint: str, value, dtype=np.int64) -> str:
        from onnx import numpy_helper
        self._n += 1
        name = f"{hint}:c{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op_type: str, inputs, outputs, name: str, **attrs) -> None:
        from onnx import helper
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name,
                                           **attrs))

    def tmp(self, hint: str) -> str:
        self._n += 1
        return f"{hint}:t{self._n}"


def _plain(op):
    layout = (op.resolved or {}).get("layout")
    if layout not in (None, "NCHW"):
        raise UsageError(f'op "{op.name}" ({op.op}) uses layout {layout}: ONNX export takes a '
                         "plain NCHW graph")


def _simple(onnx_type):
    def emit(e, op, a):
        e.node(onnx_type, op.inputs, op.outputs, op.name)
    return emit


def _matmul(e, op, a):
    if len(op.inputs) == 3 or a["transpose_a"] or a["transpose_b"]:
        e.node("Gemm", op.inputs, op.outputs, op.name, transA=int(a["transpose_a"]),
               transB=int(a["transpose_b"]))
    else:
        e.node("MatMul", op.inputs, op.outputs, op.name)


def _mod(e, op, a):
    # Floored modulo a - b * floor(a / b): ONNX Mod on floats is fmod only.
    q, f, p = e.tmp(op.name), e.tmp(op.name), e.tmp(op.name)
    e.node("Div", op.inputs, [q], f"{op.name}/div")
    e.node("Floor", [q], [f], f"{op.name}/floor")
    e.node("Mul", [op.inputs[1], f], [p], f"{op.name}/mul")
    e.node("Sub", [op.inputs[0], p], op.outputs, op.name)


def _affine(e, op, a):
    x = op.inputs[0]
    if a["scale"] != 1.0:
        y = e.tmp(op.name) if a["shift"] != 0.0 else op.outputs[0]
        e.node("Mul", [x, e.const(op.name, a["scale"], np.float32)], [y], f"{op.name}/scale")
        x = y
    if a["shift"] != 0.0 or x == op.inputs[0]:
        e.node("Add", [x, e.const(op.name, a["shift"], np.float32)], op.outputs, op.name)


def _pads(a):
    """ONNX pads [top, left, bottom, right] of padding (+ padding_end)."""
    return list(conv_pads(a))


def _conv(e, op, a):
    _plain(op)
    kh, kw = e.graph.shapes[op.inputs[1]][2:]
    # A fused epilogue (residual add, ReLU, SiLU, HardSwish) is ONNX's Add and
    # Relu / Clip / Sigmoid -> Mul / HardSwish after the Conv.
    clip = a.get("relu") and a.get("relu_max") is not None
    act = {"silu": ["Silu"], "hard_swish": ["HardSwish"]}.get(a.get("act"), [])
    steps = (["Add"] if len(op.inputs) == 4 else []) + (
        ["Clip"] if clip else ["Relu"] if a.get("relu") else []) + act
    out = [f"{op.outputs[0]}@conv"] if steps else op.outputs
    e.node("Conv", op.inputs[:3], out, op.name, kernel_shape=[kh, kw],
           strides=list(a["stride"]), pads=_pads(a), dilations=list(a["dilation"]),
           group=int(a.get("group") or 1))
    for i, kind in enumerate(steps):
        last = i == len(steps) - 1
        dst = op.outputs if last else [f"{op.outputs[0]}@{kind.lower()}"]
        ins = out + ([op.inputs[3]] if kind == "Add" else [])
        if kind == "Clip":  # ReLU6: clip(0, relu_max)
            ins += [e.const(f"{op.name}@min", 0.0, np.float32),
                    e.const(f"{op.name}@max", a["relu_max"], np.float32)]
        if kind == "Silu":  # x * sigmoid(x), as the silu op exports
            s = e.tmp(f"{op.name}@silu")
            e.node("Sigmoid", ins, [s], f"{op.name}@silu/sigmoid")
            e.node("Mul", ins + [s], dst, f"{op.name}@silu")
        else:
            e.node(kind, ins, dst, f"{op.name}@{kind.lower()}")
        out = dst


def _conv3d(e, op, a):
    # A fused epilogue (residual add, ReLU) is ONNX's Add and Relu after the Conv.
    steps = (["Add"] if len(op.inputs) == 4 else []) + (["Relu"] if a["relu"] else [])
    out = [f"{op.outputs[0]}@conv"] if steps else op.outputs
    pad_end = a["padding_end"] if a["padding_end"] is not None else a["padding"]
    e.node("Conv", op.inputs[:3], out, op.name,
           kernel_shape=list(e.graph.shapes[op.inputs[1]][2:]), strides=list(a["stride"]),
           pads=list(a["padding"]) + list(pad_end), dilations=list(a["dilation"]), group=1)
    for i, kind in enumerate(steps):
        dst = op.outputs if i == len(steps) - 1 else [f"{op.outputs[0]}@{kind.lower()}"]
        ins = out + ([op.inputs[3]] if kind == "Add" else [])
        e.node(kind, ins, dst, f"{op.name}@{kind.lower()}")
        out = dst


def _conv_transpose(e, op, a):
    kh, kw = e.graph.shapes[op.inputs[1]][2:]
    e.node("ConvTranspose", op.inputs, op.outputs, op.name, kernel_shape=[kh, kw],
           strides=list(a["stride"]), pads=_pads(a), dilations=list(a["dilation"]),
           output_padding=list(a["output_padding"]))


def _pool(e, op, a):
    _plain(op)
    kh, kw = a["kernel"]
    sh, sw = a["stride"] if a["stride"] is not None else a["kernel"]
    extra = {"count_include_pad": int(a["count_include_pad"])} if a["mode"] == "avg" else {}
    e.node("MaxPool" if a["mode"] == "max" else "AveragePool", op.inputs, op.outputs, op.name,
           kernel_shape=[kh, kw], strides=[sh, sw], pads=_pads(a),
           ceil_mode=int(a["ceil_mode"]), **extra)


def _global_pool(e, op, a):
    _plain(op)
    e.node("GlobalMaxPool" if a["mode"] == "max" else "GlobalAveragePool", op.inputs,
           op.outputs, op.name)


def _batch_norm(e, op, a):
    _plain(op)
    e.node("BatchNormalization", op.inputs, op.outputs, op.name, epsilon=a["epsilon"])


def _split(e, op, a):
    sizes = [e.graph.shapes[o][a["axis"]] for o in op.outputs]
    e.node("Split", [op.inputs[0], e.const(op.name, sizes)], op.outputs, op.name,
           axis=a["axis"])


def _slice(e, op, a):
    rank = len(e.graph.shapes[op.inputs[0]])
    axis = a["axis"] % rank
    b, end, _ = slice(a["begin"], a["end"]).indices(e.graph.shapes[op.inputs[0]][axis])
    e.node("Slice", [op.inputs[0], e.const(op.name, [b]), e.const(op.name, [end]),
                     e.const(op.name, [axis])], op.outputs, op.name)


def _pad(e, op, a):
    e.node("Pad", [op.inputs[0], e.const(op.name, list(a["pads"])),
                   e.const(op.name, a["value"], np.float32)], op.outputs, op.name)


def _reduce_sum(e, op, a):
    rank = len(e.graph.shapes[op.inputs[0]])
    axes = list(a["axes"]) or list(range(rank))
    keep = a["keepdims"] or len(axes) == rank  # hwtune keeps [1] when every axis goes
    y = op.outputs[0] if keep == a["keepdims"] else e.tmp(op.name)
    e.node("ReduceSum", [op.inputs[0], e.const(op.name, axes)], [y], op.name,
           keepdims=int(keep))
    if y != op.outputs[0]:
        e.node("Reshape", [y, e.const(op.name, [1])], op.outputs, f"{op.name}:shape")


def _reshape(e, op, a):
    e.node("Reshape", [op.inputs[0], e.const(op.name, list(e.graph.shapes[op.outputs[0]]))],
           op.outputs, op.name)


def _clip(e, op, a):
    bounds = [e.const(op.name, a[k], np.float32) if np.isfinite(a[k]) else ""
              for k in ("min", "max")]
    e.node("Clip", [op.inputs[0]] + bounds, op.outputs, op.name)


def _gelu(e, op, a):
    # Opset 17 has no Gelu: x/2 (1 + erf(x / sqrt 2)), as PyTorch exports it.
    x = op.inputs[0]
    s, f, p, h = (e.tmp(op.name) for _ in range(4))
    e.node("Mul", [x, e.const(op.name, 0.7071067811865476, np.float32)], [s], f"{op.name}/s")
    e.node("Erf", [s], [f], f"{op.name}/erf")
    e.node("Add", [f, e.const(op.name, 1.0, np.float32)], [p], f"{op.name}/add")
    e.node("Mul", [x, e.const(op.name, 0.5, np.float32)], [h], f"{op.name}/half")
    e.node("Mul", [h, p], op.outputs, op.name)


# -- activations of issue #41 --------------------------------------------------

def _silu(e, op, a):
    s = e.tmp(op.name)
    e.node("Sigmoid", op.inputs, [s], f"{op.name}/sigmoid")
    e.node("Mul", [op.inputs[0], s], op.outputs, op.name)


def _mish(e, op, a):
    # Opset 17 has no Mish (18 has): x tanh(softplus(x)).
    sp, t = e.tmp(op.name), e.tmp(op.name)
    e.node("Softplus", op.inputs, [sp], f"{op.name}/softplus")
    e.node("Tanh", [sp], [t], f"{op.name}/tanh")
    e.node("Mul", [op.inputs[0], t], op.outputs, op.name)


def _gelu_tanh(e, op, a):
    # Opset 17 has no Gelu: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as
    # PyTorch exports gelu(approximate="tanh") there.
    x = op.inputs[0]
    c = lambda v: e.const(op.name, v, np.float32)  # noqa: E731
    x2, x3, inner, u, t, p, h = (e.tmp(op.name) for _ in range(7))
    e.node("Mul", [x, x], [x2], f"{op.name}/x2")
    e.node("Mul", [x2, x], [x3], f"{op.name}/x3")
    e.node("Mul", [x3, c(0.044715)], [inner], f"{op.name}/cubic")
    s = e.tmp(op.name)
    e.node("Add", [x, inner], [s], f"{op.name}/sum")
    e.node("Mul", [s, c(0.7978845608028654)], [u], f"{op.name}/u")
    e.node("Tanh", [u], [t], f"{op.name}/tanh")
    e.node("Add", [t, c(1.0)], [p], f"{op.name}/add")
    e.node("Mul", [x, c(0.5)], [h], f"{op.name}/half")
    e.node("Mul", [h, p], op.outputs, op.name)


def _attr_node(onnx_type, names):
    def emit(e, op, a):
        e.node(onnx_type, op.inputs, op.outputs, op.name, **{k: float(a[k]) for k in names})
    return emit


def _resize(e, op, a):
    # Scales when the model gave them (the coordinates use them, and
    # floor(in * scale) gives the same output size), sizes otherwise.
    n, c, h, w = e.graph.shapes[op.inputs[0]]
    oh, ow = a["size"]
    extra = {"nearest_mode": a["nearest_mode"]} if a["mode"] == "nearest" else {}
    given = [(s, o / i) for s, o, i in ((a["scale_h"], oh, h), (a["scale_w"], ow, w))
             if s is not None]
    if len(given) == 2:
        ins = [op.inputs[0], "", e.const(op.name, [1.0, 1.0, a["scale_h"], a["scale_w"]],
                                         np.float32)]
    elif given and given[0][0] != given[0][1]:
        raise UsageError(f'op "{op.name}" (resize) has one scale that is not out / in: ONNX '
                         "Resize takes scales for every axis or sizes")
    else:
        ins = [op.inputs[0], "", "", e.const(op.name, [n, c, oh, ow])]
    e.node("Resize", ins, op.outputs, op.name, mode=a["mode"],
           coordinate_transformation_mode=a["coordinate_transformation_mode"], **extra)


def _argmax(e, op, a):
    # ONNX's indices are int64; hwtune's are float32 values.
    idx = e.tmp(op.name)
    e.node("ArgMax", op.inputs, [idx], f"{op.name}/argmax", axis=a["axis"],
           keepdims=int(a["keepdims"]), select_last_index=int(a["select_last_index"]))
    y = op.outputs[0] if a["keepdims"] or len(e.graph.shapes[op.inputs[0]]) > 1 else \
        e.tmp(op.name)
    e.node("Cast", [idx], [y], op.name, to=1)
    if y != op.outputs[0]:  # a 1-D input: hwtune keeps [1]
        e.node("Reshape", [y, e.const(op.name, [1])], op.outputs, f"{op.name}:shape")


def _lstm_cell(e, op, a):
    # The fused cell written out as the unfused one (graph/ops/rnn.py): gate
    # pre-activations (+ a step's rows of the hoisted projection, + bias),
    # split into i, f, g, o, then c and h.
    b, h4 = e.graph.shapes[op.inputs[0]]
    z = op.inputs[0]
    if len(op.inputs) > 2:
        rows, zx = e.tmp(op.name), e.tmp(op.name)
        e.node("Slice", [op.inputs[2], e.const(op.name, [a["x_row"]]),
                         e.const(op.name, [a["x_row"] + b]), e.const(op.name, [0])],
               [rows], f"{op.name}/x_rows")
        e.node("Add", [z, rows], [zx], f"{op.name}/x_add")
        z = zx
    if len(op.inputs) > 3:
        zb = e.tmp(op.name)
        e.node("Add", [z, op.inputs[3]], [zb], f"{op.name}/bias")
        z = zb
    gi, gf, gg, go = (e.tmp(op.name) for _ in range(4))
    e.node("Split", [z, e.const(op.name, [h4 // 4] * 4)], [gi, gf, gg, go], f"{op.name}/split",
           axis=1)
    si, sf, tg, so = (e.tmp(op.name) for _ in range(4))
    e.node("Sigmoid", [gi], [si], f"{op.name}/i")
    e.node("Sigmoid", [gf], [sf], f"{op.name}/f")
    e.node("Tanh", [gg], [tg], f"{op.name}/g")
    e.node("Sigmoid", [go], [so], f"{op.name}/o")
    keep, new, tc = e.tmp(op.name), e.tmp(op.name), e.tmp(op.name)
    e.node("Mul", [sf, op.inputs[1]], [keep], f"{op.name}/keep")
    e.node("Mul", [si, tg], [new], f"{op.name}/new")
    e.node("Add", [keep, new], [op.outputs[1]], f"{op.name}/c")
    e.node("Tanh", [op.outputs[1]], [tc], f"{op.name}/tanh_c")
    e.node("Mul", [so, tc], [op.outputs[0]], op.name)


# -- comparisons, logic, indices: ONNX takes bool / int64 operands where
# hwtune carries float32 values (Cast around them; Cast of a float to bool is
# "nonzero", to int64 toward zero, as hwtune defines them).

def _cast(e, op, name, to):
    from onnx import TensorProto
    out = e.tmp(op.name)
    e.node("Cast", [name], [out], f"{op.name}/cast{e._n}", to=getattr(TensorProto, to))
    return out


def _predicate(onnx_type, logic):
    def emit(e, op, a):
        ins = [_cast(e, op, n, "BOOL") for n in op.inputs] if logic else op.inputs
        b = e.tmp(op.name)
        e.node(onnx_type, ins, [b], op.name + "/bool")
        e.node("Cast", [b], op.outputs, op.name, to=1)
    return emit


def _not_equal(e, op, a):
    b, n = e.tmp(op.name), e.tmp(op.name)
    e.node("Equal", op.inputs, [b], op.name + "/eq")
    e.node("Not", [b], [n], op.name + "/not")
    e.node("Cast", [n], op.outputs, op.name, to=1)


def _trunc(e, op, a):
    e.node("Cast", [_cast(e, op, op.inputs[0], "INT64")], op.outputs, op.name, to=1)


def _indexed(onnx_type):
    def emit(e, op, a):
        e.node(onnx_type, [op.inputs[0], _cast(e, op, op.inputs[1], "INT64")], op.outputs,
               op.name, axis=a["axis"])
    return emit


def _attention(e, op, a):
    """softmax(q . kt * scale + mask) . v as the five ONNX nodes it fused."""
    s, p = e.tmp(op.name), e.tmp(op.name)
    e.node("MatMul", op.inputs[:2], [s], op.name + "/qk")
    if a["scale"] != 1.0:
        s2 = e.tmp(op.name)
        e.node("Mul", [s, e.const(op.name, a["scale"], np.float32)], [s2], op.name + "/scale")
        s = s2
    if len(op.inputs) > 3:
        s2 = e.tmp(op.name)
        e.node("Add", [s, op.inputs[3]], [s2], op.name + "/mask")
        s = s2
    e.node("Softmax", [s], [p], op.name + "/softmax", axis=-1)
    e.node("MatMul", [p, op.inputs[2]], op.outputs, op.name)


_INDEXING = {
    "equal": _predicate("Equal", False), "less": _predicate("Less", False),
    "less_equal": _predicate("LessOrEqual", False), "greater": _predicate("Greater", False),
    "greater_equal": _predicate("GreaterOrEqual", False), "not_equal": _not_equal,
    "logical_and": _predicate("And", True), "logical_or": _predicate("Or", True),
    "logical_xor": _predicate("Xor", True), "logical_not": _predicate("Not", True),
    "trunc": _trunc, "take": _indexed("Gather"), "gather_elements": _indexed("GatherElements"),
    "cumsum": lambda e, op, a: e.node("CumSum", [op.inputs[0], e.const(op.name, a["axis"])],
                                      op.outputs, op.name, exclusive=int(a["exclusive"]),
                                      reverse=int(a["reverse"])),
    "expand": lambda e, op, a: e.node("Expand", [op.inputs[0], e.const(op.name,
                                                                       list(a["shape"]))],
                                      op.outputs, op.name),
    "where": lambda e, op, a: e.node("Where", [_cast(e, op, op.inputs[0], "BOOL")]
                                     + op.inputs[1:], op.outputs, op.name),
    "attention": _attention,
}


EXPORTERS: Dict[str, Callable] = {
    "lstm_cell": _lstm_cell,
    "matmul": _matmul,
    "add": _simple("Add"), "sub": _simple("Sub"), "mul": _simple("Mul"),
    "div": _simple("Div"), "minimum": _simple("Min"), "maximum": _simple("Max"),
    "sum": _simple("Sum"), "mod": _mod, "affine": _affine,
    "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"), "relu": _simple("Relu"),
    "abs": _simple("Abs"), "sqrt": _simple("Sqrt"), "exp": _simple("Exp"),
    "erf": _simple("Erf"), "floor": _simple("Floor"), "ceil": _simple("Ceil"),
    "pow": _simple("Pow"), "clip": _clip, "gelu": _gelu,
    "leaky_relu": lambda e, op, a: e.node("LeakyRelu", op.inputs, op.outputs, op.name,
                                          alpha=a["alpha"]),
    # activations of issue #41
    "hard_sigmoid": _attr_node("HardSigmoid", ("alpha", "beta")),
    "hard_swish": _simple("HardSwish"), "silu": _silu, "mish": _mish,
    "gelu_tanh": _gelu_tanh, "softplus": _simple("Softplus"), "softsign": _simple("Softsign"),
    "elu": _attr_node("Elu", ("alpha",)), "selu": _attr_node("Selu", ("alpha", "gamma")),
    "celu": _attr_node("Celu", ("alpha",)),
    "thresholded_relu": _attr_node("ThresholdedRelu", ("alpha",)),
    "resize": _resize, "argmax": _argmax,
    "prelu": _simple("PRelu"), "reciprocal": _simple("Reciprocal"), "neg": _simple("Neg"),
    "sign": _simple("Sign"), "log": _simple("Log"), "sin": _simple("Sin"), "cos": _simple("Cos"),
    "acos": _simple("Acos"), "asin": _simple("Asin"), "atan": _simple("Atan"),
    "tan": _simple("Tan"), "sinh": _simple("Sinh"), "cosh": _simple("Cosh"),
    "asinh": _simple("Asinh"), "acosh": _simple("Acosh"), "atanh": _simple("Atanh"),
    "round": _simple("Round"),
    "batch_matmul": _simple("MatMul"),
    "layer_norm": lambda e, op, a: e.node("LayerNormalization", op.inputs, op.outputs,
                                          op.name, axis=a["axis"], epsilon=a["epsilon"]),
    "transpose": lambda e, op, a: e.node("Transpose", op.inputs, op.outputs, op.name,
                                         perm=list(a["perm"]) if a["perm"] is not None else
                                         list(range(len(e.graph.shapes[op.inputs[0]])))[::-1]),
    "conv2d": _conv, "pool2d": _pool, "global_pool2d": _global_pool,
    "conv3d": _conv3d,
    "conv_transpose2d": _conv_transpose, "batch_norm": _batch_norm,
    "softmax": lambda e, op, a: e.node("Softmax", op.inputs, op.outputs, op.name,
                                       axis=a["axis"]),
    "concat": lambda e, op, a: e.node("Concat", op.inputs, op.outputs, op.name,
                                      axis=a["axis"]),
    "split": _split, "slice": _slice, "reshape": _reshape, "pad": _pad,
    "reduce_sum": _reduce_sum,
    "gather": lambda e, op, a: e.node("Gather", [op.inputs[0], e.const(op.name, a["indices"])],
                                      op.outputs, op.name, axis=a["axis"]),
    "flatten": lambda e, op, a: e.node("Flatten", op.inputs, op.outputs, op.name,
                                       axis=a["axis"]),
    **_INDEXING,
}


def to_onnx(graph, params=None):
    """ONNX ModelProto of a validated graph; params: name -> array (default:
    the values the engine binds)."""
    from onnx import TensorProto, helper, numpy_helper

    from hwtune.graph.reference import init_params
    params = init_params(graph) if params is None else params
    e = Emitter(graph)
    for i in graph.order or range(len(graph.ops)):
        op = graph.ops[i]
        fn = EXPORTERS.get(op.op)
        if fn is None:
            raise UsageError(f'op "{op.name}" ({op.op}) has no ONNX export (exportable: '
                             f"{', '.join(sorted(EXPORTERS))})")
        fn(e, op, op.resolved or {})
    inits = [numpy_helper.from_array(np.asarray(params[t.name], np.float32), t.name)
             for t in graph.params] + e.inits
    value = lambda n: helper.make_tensor_value_info(  # noqa: E731
        n, TensorProto.FLOAT, list(graph.shapes[n]))
    g = helper.make_graph(e.nodes, graph.name, [value(t.name) for t in graph.inputs],
                          [value(n) for n in graph.outputs], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hwtune")
    model.ir_version = min(model.ir_version, IR_VERSION)
    return model


def export_onnx(graph, path: str) -> int:
    """Write graph to path as ONNX; returns the bytes written."""
    data = to_onnx(graph).SerializeToString()
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return len(data)
