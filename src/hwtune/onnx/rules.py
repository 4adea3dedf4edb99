"""The ONNX op table: one row per ONNX op type, saying how a node becomes
model.json ops (convert) and how it is evaluated when all its inputs are
constants (fold, from fold.py).

Adding an op is adding a row: a converter that reads the node through the
Context (cx.tensor(i), cx.const(i), cx.shape(i), attrs) and emits hwtune ops
with cx.emit(op, inputs, attrs, out=cx.out()). A case a row cannot express
yet raises Unsupported with the reason, and the importer reports it with
the node's name. An op type with no row is refused before anything is
converted, with the list of the rows below.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional

import numpy as np

from hwtune.onnx import fold as F
from hwtune.onnx.axes import check_perm, normalize_axes, normalize_axis
from hwtune.onnx import composed, norms, recurrent
from hwtune.onnx import clip as clip_rules
from hwtune.onnx import gather_nd, indicator, qlinear_ms, resize_fold, scatter
from hwtune.onnx import quant as Q
from hwtune.onnx.errors import Unsupported
from hwtune.onnx.lift1d import lift_1d
from hwtune.onnx import ncdhw as N3
from hwtune.onnx.windows import pad_attrs as _pad_attrs
from hwtune.onnx.windows import pads2d as _pads2d
from hwtune.onnx.windows import pair_attr as _pair_attr


class Rule(NamedTuple):
    convert: Optional[Callable]   # (cx, attrs) -> None; None: constants only
    fold: Optional[Callable]      # (values, attrs, cx) -> [arrays]; None: never folded


# -- helpers -----------------------------------------------------------------

def _check_2d(cx, what):
    shape = cx.shape(0)
    if len(shape) != 4:
        raise Unsupported(f"{what} on a rank-{len(shape)} tensor {list(shape)}: hwtune's "
                          "window ops are 2-D (NCHW)")
    return shape


def _ones(attrs, key, what):
    v = attrs.get(key)
    if v is not None and any(int(d) != 1 for d in v):
        raise Unsupported(f"{key} {list(v)} ({what}) are not supported yet")


# -- element-wise ------------------------------------------------------------

def unary(op):
    def convert(cx, attrs):
        cx.emit(op, [cx.tensor(0)], out=cx.out())
    return convert


# x OP c with a scalar constant c as one affine op (scale, shift), by which
# side c is on; None: no affine form (c / x).
_AFFINE = {
    "add": lambda c, right: (1.0, c),
    "sub": lambda c, right: (1.0, -c) if right else (-1.0, c),
    "mul": lambda c, right: (c, 0.0),
    "div": lambda c, right: (1.0 / c, 0.0) if right and c != 0 else None,
}


def binary(op):
    def convert(cx, attrs):
        for ci, xi in ((1, 0), (0, 1)):
            if cx.is_const(ci) and not cx.is_const(xi):
                c = cx.const(ci)
                if c.size == 1 and c.ndim <= len(cx.shape(xi)):
                    form = _AFFINE[op](float(c.reshape(())), ci == 1)
                    if form is not None:
                        cx.emit("affine", [cx.tensor(xi)],
                                {"scale": form[0], "shift": form[1]}, out=cx.out())
                        return
        cx.emit(op, [cx.tensor(0), cx.tensor(1)], out=cx.out())
    return convert


def mod(cx, attrs):
    if attrs.get("fmod", 0):
        raise Unsupported("Mod with fmod=1 (sign of the dividend) of a run-time tensor is not "
                          "supported yet (hwtune's mod is floored)")
    cx.emit("mod", [cx.tensor(0), cx.tensor(1)], out=cx.out())


def nary(op, pairwise):
    def convert(cx, attrs):
        names = [cx.tensor(i) for i in range(len(cx.node.input)) if cx.has(i)]
        if len(names) == 1:
            cx.bind(cx.out(), names[0])
        elif not pairwise:
            cx.emit(op, names, out=cx.out())
        else:
            cur = names[0]
            for k, name in enumerate(names[1:], start=2):
                cur = cx.emit(op, [cur, name], out=cx.out() if k == len(names) else None)
    return convert


def clip(cx, attrs):
    if cx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo, hi = cx.const(1, "min"), cx.const(2, "max")
        lo = None if lo is None else float(lo.reshape(()))
        hi = None if hi is None else float(hi.reshape(()))
    if lo is None and hi is None:
        cx.bind(cx.out(), cx.tensor(0))
    elif lo == 0 and hi is None:
        cx.emit("relu", [cx.tensor(0)], out=cx.out())
    else:
        bounds = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        cx.emit("clip", [cx.tensor(0)], bounds, out=cx.out())


def leaky_relu(cx, attrs):
    cx.emit("leaky_relu", [cx.tensor(0)], {"alpha": float(attrs.get("alpha", 0.01))},
            out=cx.out())


def gelu(cx, attrs):
    approx = attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f'Gelu with approximate="{approx}" (ONNX knows "none" and "tanh")')
    cx.emit("gelu" if approx == "none" else "gelu_tanh", [cx.tensor(0)], out=cx.out())


# -- activations of issue #41 --------------------------------------------------

def with_attrs(op, defaults):
    """A unary activation whose ONNX attributes map one to one (same names)
    onto the op's, with ONNX's defaults."""
    def convert(cx, attrs):
        cx.emit(op, [cx.tensor(0)], {k: float(attrs.get(k, d)) for k, d in defaults.items()},
                out=cx.out())
    return convert


def prelu(cx, attrs):
    """PRelu: a scalar constant slope is leaky_relu; any other slope (PyTorch's
    nn.PReLU(C) exports [C, 1, 1]) a binary prelu, broadcast as ONNX does
    (the slope to the input)."""
    if cx.is_const(1) and cx.const(1).size == 1 and cx.const(1).ndim <= len(cx.shape(0)):
        cx.emit("leaky_relu", [cx.tensor(0)], {"alpha": float(cx.const(1).reshape(()))},
                out=cx.out())
        return
    x, s = cx.shape(0), cx.shape(1)
    if len(s) > len(x) or any(a != b and a != 1 for a, b in zip(s[::-1], x[::-1])):
        raise Unsupported(f"PRelu slope of shape {list(s)} does not broadcast to the input "
                          f"{list(x)}")
    cx.emit("prelu", [cx.tensor(0), cx.tensor(1)], out=cx.out())


# x ^ c for a scalar constant c: the exponents models use become cheaper ops
# (3: the tanh GELU as exporters write it out, x + 0.044715 x^3; two muls
# instead of libm's pow lane by lane).
_POW_FORMS = {1.0: None, 2.0: "mul", 0.5: "sqrt", 3.0: "cube"}


def pow_(cx, attrs):
    if cx.is_const(1) and not cx.is_const(0) and cx.const(1).size == 1 \
            and cx.const(1).ndim <= len(cx.shape(0)):
        c = float(cx.const(1).reshape(()))
        if c in _POW_FORMS:
            x, form = cx.tensor(0), _POW_FORMS[c]
            if form is None:
                cx.bind(cx.out(), x)
            elif form == "cube":
                cx.emit("mul", [cx.emit("mul", [x, x]), x], out=cx.out())
            else:
                cx.emit(form, [x, x] if form == "mul" else [x], out=cx.out())
            return
    cx.emit("pow", [cx.tensor(0), cx.tensor(1)], out=cx.out())


# -- no-ops and shapes -------------------------------------------------------

def passthrough(cx, attrs):
    if len(cx.node.output) > 1 and cx.node.output[1]:
        raise Unsupported("the mask output of Dropout (inference graphs have none)")
    cx.bind(cx.out(), cx.tensor(0))


def shape(cx, attrs):
    cx.define(cx.out(), F.shape_of(cx.shape(0), attrs))


def size(cx, attrs):
    cx.define(cx.out(), np.asarray(int(np.prod(cx.shape(0), dtype=np.int64)), np.int64))


def cast(cx, attrs):
    to = np.dtype(F.np_dtype(attrs["to"]))
    if to != np.float32:
        cast_int(cx, to)
        return
    cx.bind(cx.out(), cx.tensor(0))


def _reshape_to(cx, target):
    target = tuple(int(d) for d in target)
    if target == tuple(cx.shape(0)):
        cx.bind(cx.out(), cx.tensor(0))
    else:
        cx.emit("reshape", [cx.tensor(0)], {"shape": list(target)}, out=cx.out())


def reshape(cx, attrs):
    target = cx.const(1, "shape") if cx.opset >= 5 else attrs["shape"]
    _reshape_to(cx, F.reshape_target(cx.shape(0), target, attrs.get("allowzero", 0)))


def squeeze(cx, attrs):
    axes = F.axes_of([None, cx.const(1, "axes")], attrs, cx, 13)
    _reshape_to(cx, F.squeeze_shape(cx.shape(0), axes))


def unsqueeze(cx, attrs):
    axes = F.axes_of([None, cx.const(1, "axes")], attrs, cx, 13)
    _reshape_to(cx, F.unsqueeze_shape(cx.shape(0), axes))


def flatten(cx, attrs):
    # ONNX's Flatten takes rank itself too: every dim in the first
    axis = normalize_axis(attrs.get("axis", 1), len(cx.shape(0)), inclusive=True)
    cx.emit("flatten", [cx.tensor(0)], {"axis": axis}, out=cx.out())


def transpose(cx, attrs):
    rank = len(cx.shape(0))
    perm = check_perm(attrs.get("perm", range(rank - 1, -1, -1)), rank)
    moved = [d for i, d in enumerate(cx.shape(0)) if perm[i] != i]
    if perm == list(range(rank)) or all(d == 1 for d in moved):
        # Only size-1 axes move: the same elements in the same order.
        _reshape_to(cx, [cx.shape(0)[p] for p in perm])
        return
    cx.emit("transpose", [cx.tensor(0)], {"perm": perm}, out=cx.out())


def concat(cx, attrs):
    """Concat; an empty input (an empty Slice's constant) adds nothing."""
    names = [cx.tensor(i) for i in range(len(cx.node.input)) if cx.has(i)
             and not (cx.is_const(i) and cx.const(i).size == 0)]
    if len(names) == 1:
        cx.bind(cx.out(), names[0])
        return
    axis = normalize_axis(attrs["axis"], len(cx.shape(0)))
    cx.emit("concat", names, {"axis": axis}, out=cx.out())


def split(cx, attrs):
    shp = cx.shape(0)
    axis = normalize_axis(attrs.get("axis", 0), len(shp))
    sizes = F.split_sizes([None, cx.const(1, "split") if cx.opset >= 13 else None], attrs,
                          cx, shp[axis], len(cx.node.output))
    outs = [o or cx.fresh(f"{cx.node.name}:part{k}") for k, o in enumerate(cx.node.output)]
    if len(outs) == 1:
        cx.bind(outs[0], cx.tensor(0))
        return
    cx.emit("split", [cx.tensor(0)], {"axis": axis, "sizes": sizes}, outputs=outs)


def slice_(cx, attrs):
    """Slice: step 1 on an axis is a slice op, any other step (negative
    too) a gather of the positions it visits."""
    shp = cx.shape(0)
    values = [None] + [cx.const(i) for i in range(1, len(cx.node.input))]
    cuts = []
    for axis, b, e, step in F.slice_params(values, attrs, cx, len(shp)):
        if step == 0:
            raise Unsupported("Slice with step 0")
        picked = range(*slice(b, e, step).indices(shp[axis]))
        if not picked:  # Phi-3's rotary "pass" part q[..., rotary_dim:] at factor 1.0
            empty = list(shp)
            empty[axis] = 0
            cx.define(cx.out(), np.zeros(empty, np.float32))
            return
        if step != 1:
            cuts.append(("gather", {"axis": axis, "indices": list(picked)}))
        elif (picked.start, picked.stop) != (0, shp[axis]):
            cuts.append(("slice", {"axis": axis, "begin": picked.start, "end": picked.stop}))
    cur = cx.tensor(0)
    if not cuts:
        cx.bind(cx.out(), cur)
    for k, (op, op_attrs) in enumerate(cuts):
        cur = cx.emit(op, [cur], op_attrs, out=cx.out() if k == len(cuts) - 1 else None)


def gather(cx, attrs):
    """Gather of run-time data at constant indices: one index or a run of
    consecutive ones is a slice (the [CLS] token, a head), others a gather
    op; then a reshape to the indices' shape."""
    if not cx.is_const(1):
        take(cx, attrs)
        return
    shp = cx.shape(0)
    axis = normalize_axis(attrs.get("axis", 0), len(shp))
    idx = np.asarray(cx.const(1, "indices")).astype(np.int64)
    bad = [int(i) for i in idx.reshape(-1) if not -shp[axis] <= i < shp[axis]]
    if bad:
        raise Unsupported(f"indices {bad[:5]} are out of range for axis {axis} of size "
                          f"{shp[axis]}")
    flat = [int(i) % shp[axis] for i in idx.reshape(-1)]
    if not flat:
        raise Unsupported("Gather with no indices")
    if flat == list(range(flat[0], flat[0] + len(flat))):
        g = cx.emit("slice", [cx.tensor(0)], {"axis": axis, "begin": flat[0],
                                               "end": flat[0] + len(flat)})
    else:
        g = cx.emit("gather", [cx.tensor(0)], {"axis": axis, "indices": flat})
    target = list(shp[:axis]) + list(idx.shape) + list(shp[axis + 1:])
    cx.emit("reshape", [g], {"shape": target or [1]}, out=cx.out())


def pad(cx, attrs):
    """Pad, mode constant: the pads (an attribute before opset 11, an input
    from it on, with optional constant_value and, from 18, axes)."""
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        raise Unsupported(f'Pad mode "{mode}" is not supported (only "constant")')
    rank = len(cx.shape(0))
    if cx.opset >= 11:
        pads = [int(p) for p in np.asarray(cx.const(1, "pads")).reshape(-1)]
        value = cx.const(2, "constant_value") if cx.has(2) else None
        value = 0.0 if value is None else float(np.asarray(value).reshape(-1)[0])
        axes = cx.const(3, "axes") if cx.has(3) else None
    else:
        pads, value, axes = [int(p) for p in attrs["pads"]], float(attrs.get("value", 0.0)), None
    if axes is not None:  # pads for the listed axes only
        axes = normalize_axes(np.asarray(axes).reshape(-1), rank)
        if len(pads) != 2 * len(axes):
            raise Unsupported(f"{len(pads)} pads for {len(axes)} axes")
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[a + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * rank:
        raise Unsupported(f"{len(pads)} pads for a rank-{rank} tensor")
    # Negative pads crop: a slice per cropped axis, then the padding.
    shp, cur = cx.shape(0), cx.tensor(0)
    crops = [a for a in range(rank) if pads[a] < 0 or pads[a + rank] < 0]
    grow = [max(p, 0) for p in pads]
    for k, a in enumerate(crops):
        begin, end = max(-pads[a], 0), shp[a] - max(-pads[a + rank], 0)
        if end <= begin:
            raise Unsupported(f"pads {pads} crop axis {a} (size {shp[a]}) to nothing")
        last = k == len(crops) - 1 and not any(grow)
        cur = cx.emit("slice", [cur], {"axis": a, "begin": begin, "end": end},
                      out=cx.out() if last else None)
    if any(grow):
        cx.emit("pad", [cur], {"pads": grow, "value": value}, out=cx.out())
    elif not crops:
        cx.bind(cx.out(), cur)


# -- dense and convolution ---------------------------------------------------

def matmul(cx, attrs):
    a, b = cx.shape(0), cx.shape(1)
    if len(a) == 2 and len(b) == 2:
        cx.emit("matmul", [cx.tensor(0), cx.tensor(1)], out=cx.out())
    elif len(a) > 2 and len(b) == 2:
        # [..., K] x [K, N]: the leading dims are rows of one 2-D product.
        rows = int(np.prod(a[:-1], dtype=np.int64))
        flat = cx.emit("reshape", [cx.tensor(0)], {"shape": [rows, a[-1]]})
        y = cx.emit("matmul", [flat, cx.tensor(1)])
        cx.emit("reshape", [y], {"shape": list(a[:-1]) + [b[1]]}, out=cx.out())
    elif len(a) >= 2 and len(b) >= 2:
        cx.emit("batch_matmul", [cx.tensor(0), cx.tensor(1)], out=cx.out())
    else:
        raise Unsupported(f"MatMul of {list(a)} by {list(b)}: 1-D MatMul is not supported "
                          "yet")


def gemm(cx, attrs):
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    a_name, b_name = cx.tensor(0), None
    if alpha != 1.0:
        if cx.is_const(1):
            b_name = cx.param(f"{cx.node.input[1]}:alpha", alpha * cx.const(1))
        else:
            a_name = cx.emit("affine", [a_name], {"scale": alpha})
    b_name = b_name or cx.tensor(1)
    n = cx.shape(1)[0] if tb else cx.shape(1)[1]
    flags = {"transpose_a": ta, "transpose_b": tb}
    c = cx.const(2) if cx.is_const(2) else None
    if not cx.has(2) or (c is not None and not c.any()):
        cx.emit("matmul", [a_name, b_name], flags, out=cx.out())
    elif c is not None and c.size in (1, n) and c.ndim <= 2 and c.shape[-1:] in ((), (1,), (n,)):
        bias = np.broadcast_to(beta * c.reshape(-1), (n,)).astype(np.float32)
        name = cx.tensor(2) if beta == 1.0 and c.size == n and c.ndim == 1 else \
            cx.param(f"{cx.node.input[2]}:bias", bias)
        cx.emit("matmul", [a_name, b_name, name], flags, out=cx.out())
    else:
        y = cx.emit("matmul", [a_name, b_name], flags)
        c_name = cx.tensor(2)
        if beta != 1.0:
            c_name = cx.emit("affine", [c_name], {"scale": beta})
        cx.emit("add", [y, c_name], out=cx.out())


def _check_kernel(cx, attrs):
    """kernel_shape is optional (the weights' spatial dims); one given must
    be those dims (ONNX Runtime refuses a model where it is not)."""
    kernel = attrs.get("kernel_shape")
    if kernel is not None and [int(k) for k in kernel] != list(cx.shape(1)[2:]):
        raise Unsupported(f"kernel_shape {list(kernel)} does not match the weights' spatial "
                          f"dims {list(cx.shape(1)[2:])}")


def conv(cx, attrs):
    _check_kernel(cx, attrs)
    x = cx.shape(0)
    if len(x) == 5:
        return N3.conv3d(cx, attrs)
    if len(x) != 4:
        raise Unsupported(f"{len(x) - 2}-D convolution: hwtune's conv2d is 2-D (NCHW)")
    _emit_conv(cx, attrs, "conv2d", _conv_attrs(cx, attrs))


def _conv_attrs(cx, attrs):
    """stride, padding (+ padding_end) and dilation (when not 1) of a Conv
    or ConvTranspose node; auto_pad SAME resolved against the dilated
    kernel's extent, as ONNX says."""
    strides = _pair_attr(attrs, "strides", [1, 1])
    dilations = _pair_attr(attrs, "dilations", [1, 1])
    pads = _pads2d(attrs, cx.shape(0)[2:], cx.shape(1)[2:], strides, dilations)
    out = {"stride": strides, **_pad_attrs(pads)}
    if dilations != [1, 1]:
        out["dilation"] = dilations
    return out


def _emit_conv(cx, attrs, op, op_attrs):
    group = int(attrs.get("group", 1))
    if group == 1 or op == "conv2d":
        if group != 1:
            c, oc = cx.shape(0)[1], cx.shape(1)[0]
            if group < 1 or c % group or oc % group or cx.shape(1)[1] * group != c:
                raise Unsupported(f"group={group} does not fit {c} input / {oc} output "
                                  f"channels with weights {list(cx.shape(1))}")
            op_attrs = dict(op_attrs, group=group)
        ins = [cx.tensor(0), cx.tensor(1)] + ([cx.tensor(2)] if cx.has(2) else [])
        cx.emit(op, ins, op_attrs, out=cx.out())
        return
    _grouped_conv(cx, group, op_attrs, op)


def _grouped_conv(cx, group, conv_attrs, op="conv_transpose2d"):
    """Grouped transposed convolution as one conv_transpose2d per group
    between a split and a concat of the channels, weights [C, OC/g, ...]
    cut along C at import. (A grouped Conv is one conv2d with `group`.)"""
    what = "transposed convolution"
    if not cx.is_const(1) or (cx.has(2) and not cx.is_const(2)):
        raise Unsupported(f"group={group} (grouped or depthwise {what}) with run-time "
                          "weights is not supported yet")
    if group > 64:  # the engine's ops take at most 64 inputs or outputs
        raise Unsupported(f"group={group} (grouped or depthwise {what}) over more than "
                          "64 groups is not supported yet")
    w = cx.const(1)
    bias = cx.const(2) if cx.has(2) else None
    c = cx.shape(0)[1]
    oc = w.shape[1] * group
    if c % group or oc % group:
        raise Unsupported(f"group={group} does not divide {c} input / {oc} output channels")
    parts = [cx.fresh(f"{cx.node.name or cx.out()}:g{g}") for g in range(group)]
    cx.emit("split", [cx.tensor(0)], {"axis": 1, "sizes": [c // group] * group},
            outputs=parts)
    wstep = w.shape[0] // group
    step, outs = oc // group, []
    for g, part in enumerate(parts):
        ins = [part, cx.param(f"{cx.node.input[1]}:g{g}", w[g * wstep:(g + 1) * wstep])]
        if bias is not None:
            ins.append(cx.param(f"{cx.node.input[2]}:g{g}", bias[g * step:(g + 1) * step]))
        outs.append(cx.emit(op, ins, conv_attrs))
    cx.emit("concat", outs, {"axis": 1}, out=cx.out())


def conv_transpose(cx, attrs):
    _check_kernel(cx, attrs)
    x = cx.shape(0)
    if len(x) != 4:
        raise Unsupported(f"{len(x) - 2}-D transposed convolution: hwtune's "
                          "conv_transpose2d is 2-D (NCHW)")
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        raise Unsupported(f'ConvTranspose auto_pad="{attrs["auto_pad"]}" is not supported yet '
                          "(give pads)")
    if attrs.get("output_shape") is not None:
        raise Unsupported("ConvTranspose output_shape is not supported yet (give pads and "
                          "output_padding)")
    ct_attrs = _conv_attrs(cx, attrs)  # auto_pad NOTSET or VALID here
    out_pad = _pair_attr(attrs, "output_padding", [0, 0])
    if out_pad != [0, 0]:
        ct_attrs["output_padding"] = out_pad
    _emit_conv(cx, attrs, "conv_transpose2d", ct_attrs)


def pool(mode):
    def convert(cx, attrs):
        if len(cx.shape(0)) == 5:
            return N3.pool3d(cx, attrs, mode)
        x = _check_2d(cx, f"{mode} pooling")
        if len(cx.node.output) > 1 and cx.node.output[1]:
            raise Unsupported("the Indices output of MaxPool is not supported")
        _ones(attrs, "dilations", "dilated pooling")
        kernel = _pair_attr(attrs, "kernel_shape", [])
        strides = _pair_attr(attrs, "strides", [1, 1])
        out = {"mode": mode, "kernel": kernel, "stride": strides,
               **_pad_attrs(_pads2d(attrs, x[2:], kernel, strides)),
               "ceil_mode": bool(attrs.get("ceil_mode", 0))}
        if mode == "avg":
            out["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        cx.emit("pool2d", [cx.tensor(0)], out, out=cx.out())
    return convert


def global_pool(mode):
    def convert(cx, attrs):
        if len(cx.shape(0)) == 5:
            return N3.global_pool3d(cx, mode)
        _check_2d(cx, f"global {mode} pooling")
        cx.emit("global_pool2d", [cx.tensor(0)], {"mode": mode}, out=cx.out())
    return convert


def _reduce_axes(cx, attrs, since):
    """Sorted non-negative axes of a Reduce* node (None: every axis), and
    whether it is a no-op (empty axes with noop_with_empty_axes)."""
    shp = cx.shape(0)
    axes = F.axes_of([None, cx.const(1, "axes") if cx.opset >= since else None], attrs, cx,
                     since)
    if not axes and attrs.get("noop_with_empty_axes", 0):
        return None, True
    if not axes:
        return list(range(len(shp))), False
    return sorted(set(normalize_axes(axes, len(shp)))), False


def reduce_(mode):
    """ReduceSum / ReduceMean / ReduceMax. Over H and W of an NCHW tensor
    (what exporters write for adaptive average pooling) a global pool;
    ReduceSum and ReduceMean over any other axes reduce_sum (mean: then
    scaled by 1/count, one pass over the smaller output)."""
    since = 13 if mode == "sum" else 18

    def convert(cx, attrs):
        shp = cx.shape(0)
        axes, noop = _reduce_axes(cx, attrs, since)
        if noop:
            cx.bind(cx.out(), cx.tensor(0))
            return
        keep = bool(attrs.get("keepdims", 1))
        if len(shp) == 4 and axes == [2, 3] and mode != "sum":
            y = cx.emit("global_pool2d", [cx.tensor(0)], {"mode": mode},
                        out=cx.out() if keep else None)
            if not keep:
                cx.emit("reshape", [y], {"shape": list(shp[:2])}, out=cx.out())
            return
        if mode == "max":  # other axes: transpose, then a global max (issue #41)
            norms.reduce_extreme("max")(cx, attrs)
            return
        count = int(np.prod([shp[a] for a in axes], dtype=np.int64))
        last = mode == "sum" or count == 1
        y = cx.emit("reduce_sum", [cx.tensor(0)], {"axes": axes, "keepdims": keep},
                    out=cx.out() if last else None)
        if not last:
            cx.emit("affine", [y], {"scale": 1.0 / count}, out=cx.out())
    return convert


def batch_norm(cx, attrs):
    if attrs.get("training_mode", 0) or any(o for o in cx.node.output[1:]):
        raise Unsupported("training-mode BatchNormalization of a run-time tensor (export the "
                          "model in eval mode)")
    cx.emit("batch_norm", [cx.tensor(i) for i in range(5)],
            {"epsilon": float(attrs.get("epsilon", 1e-5))}, out=cx.out())


def _broadcasts(shape, to) -> bool:
    """numpy's rule: shape broadcasts to `to` without changing it."""
    return len(shape) <= len(to) and all(
        s in (1, t) for s, t in zip(reversed(list(shape)), reversed(list(to))))


def layer_norm(cx, attrs):
    if any(o for o in cx.node.output[1:]):
        raise Unsupported("the Mean / InvStdDev outputs of LayerNormalization (training)")
    rank = len(cx.shape(0))
    axis = normalize_axis(attrs.get("axis", -1), rank)
    norm = list(cx.shape(0)[axis:])
    ins = [cx.tensor(0)]
    for i, what in ((1, "scale"), (2, "bias")):
        if not cx.has(i):
            continue
        if list(cx.shape(i)) == norm:
            ins.append(cx.tensor(i))
        elif cx.is_const(i) and _broadcasts(cx.shape(i), norm):
            # broadcast to the normalised shape at import
            ins.append(cx.param(f"{cx.node.input[i]}:{what}", np.broadcast_to(
                cx.const(i), norm).astype(np.float32)))
        else:
            raise Unsupported(f"LayerNormalization {what} of shape {list(cx.shape(i))} "
                              f"(the normalised shape is {norm})")
    cx.emit("layer_norm", ins, {"axis": axis, "epsilon": float(attrs.get("epsilon", 1e-5))},
            out=cx.out())


def softmax(cx, attrs):
    shp = cx.shape(0)
    rank = len(shp)
    if cx.opset >= 13:
        axis = normalize_axis(attrs.get("axis", -1), rank)
        cx.emit("softmax", [cx.tensor(0)], {"axis": axis}, out=cx.out())
        return
    # Before opset 13, Softmax normalises over all dims from `axis` on.
    axis = normalize_axis(attrs.get("axis", 1), rank)
    if axis == rank - 1:
        cx.emit("softmax", [cx.tensor(0)], {"axis": axis}, out=cx.out())
        return
    rows = int(np.prod(shp[:axis], dtype=np.int64))
    flat = cx.emit("reshape", [cx.tensor(0)], {"shape": [rows, -1]})
    y = cx.emit("softmax", [flat], {"axis": 1})
    cx.emit("reshape", [y], {"shape": list(shp)}, out=cx.out())


# -- comparisons, logic, indices ---------------------------------------------
# ONNX int and bool tensors are float32 values here (docs/onnx.md); the
# Context tracks which tensors hold integers and their bounds
# (intvalues.py).

def compare(op):
    """Equal, Less, ..., And, Or, Xor: 1.0 / 0.0, numpy broadcasting."""
    def convert(cx, attrs):
        cx.emit(op, [cx.tensor(0), cx.tensor(1)], out=cx.out())
    return convert


def _is_01(cx, name):
    b = cx.int_bounds.get(name)
    return b is not None and b[0] >= 0 and b[1] <= 1


def cast_int(cx, to):
    """Cast of a run-time tensor to bool (nonzero -> 1) or to an integer
    type (toward zero); a no-op when the tensor already holds such values."""
    x = cx.tensor(0)
    if to == np.bool_:
        if _is_01(cx, x):
            cx.bind(cx.out(), x)
        else:
            zero = cx.param(f"{cx.out()}:zero", np.zeros(1, np.float32))
            cx.emit("not_equal", [x, zero], out=cx.out())
    elif np.issubdtype(to, np.integer):
        if x in cx.int_bounds:
            cx.bind(cx.out(), x)
        else:
            cx.emit("trunc", [x], out=cx.out())
    elif np.issubdtype(to, np.floating):  # float16 / float64 run as float32
        cx.bind(cx.out(), x)
    else:
        raise Unsupported(f"Cast to {to.name} of a run-time tensor")


def where(cx, attrs):
    cx.emit("where", [cx.tensor(i) for i in range(3)], out=cx.out())


def take(cx, attrs):
    """Gather at run-time indices (an embedding lookup)."""
    axis = normalize_axis(attrs.get("axis", 0), len(cx.shape(0)))
    cx.emit("take", [cx.tensor(0), cx.tensor(1)], {"axis": axis}, out=cx.out())


def gather_elements(cx, attrs):
    axis = normalize_axis(attrs.get("axis", 0), len(cx.shape(0)))
    cx.emit("gather_elements", [cx.tensor(0), cx.tensor(1)], {"axis": axis}, out=cx.out())


def cumsum(cx, attrs):
    axis = normalize_axis(np.asarray(cx.const(1, "axis")).reshape(-1)[0], len(cx.shape(0)))
    cx.emit("cumsum", [cx.tensor(0)], {"axis": axis,
                                       "exclusive": bool(attrs.get("exclusive", 0)),
                                       "reverse": bool(attrs.get("reverse", 0))}, out=cx.out())


def expand(cx, attrs):
    target = [int(d) for d in np.asarray(cx.const(1, "shape")).reshape(-1)]
    try:
        out = np.broadcast_shapes(tuple(cx.shape(0)), tuple(target))
    except ValueError:
        raise Unsupported(f"shape {list(cx.shape(0))} does not broadcast with {target}") from None
    if tuple(out) == tuple(cx.shape(0)):
        cx.bind(cx.out(), cx.tensor(0))
    else:
        cx.emit("expand", [cx.tensor(0)], {"shape": list(out)}, out=cx.out())


def tile(cx, attrs):
    """Tile: per repeated axis a, the tensor viewed as [before, 1, d, after]
    broadcast to [before, r, d, after] (expand) and read as [.., r * d, ..]:
    any number of copies (SwiftFormer tiles a query vector 256 times)."""
    reps = [int(r) for r in np.asarray(cx.const(1, "repeats")).reshape(-1)]
    shp = [int(d) for d in cx.shape(0)]
    if len(reps) != len(shp) or any(r < 1 for r in reps):
        raise Unsupported(f"repeats {reps} for a rank-{len(shp)} tensor")
    axes = [a for a, r in enumerate(reps) if r > 1]
    cur = cx.tensor(0)
    if not axes:
        cx.bind(cx.out(), cur)
    for k, a in enumerate(axes):
        last = k == len(axes) - 1
        before, after = int(np.prod(shp[:a])), int(np.prod(shp[a + 1:]))
        cur = cx.emit("reshape", [cur], {"shape": [before, 1, shp[a], after]})
        cur = cx.emit("expand", [cur], {"shape": [before, reps[a], shp[a], after]})
        shp[a] *= reps[a]
        cur = cx.emit("reshape", [cur], {"shape": list(shp)}, out=cx.out() if last else None)


# -- resize (issue #41) ----------------------------------------------------------

_RESIZE_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


def _resize_targets(cx, attrs, shp):
    """(output dims, scale per dim or None where the sizes gave them) of a
    Resize / Upsample node."""
    rank = len(shp)
    if cx.node.op_type == "Upsample" or cx.opset < 11:
        scales = attrs.get("scales") if cx.node.op_type == "Upsample" and cx.opset < 9 else \
            cx.const(1, "scales")
        sizes = None
    else:
        scales = cx.const(2, "scales") if cx.has(2) else None
        sizes = cx.const(3, "sizes") if cx.has(3) else None
        if scales is not None and np.asarray(scales).size == 0:
            scales = None
        if sizes is not None and np.asarray(sizes).size == 0:
            sizes = None
    axes = attrs.get("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(axes, rank)
    if sizes is not None:
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise Unsupported(f'Resize keep_aspect_ratio_policy="'
                              f'{attrs["keep_aspect_ratio_policy"]}" (only "stretch")')
        out, sc = list(shp), [None] * rank
        for a, v in zip(axes, np.asarray(sizes).reshape(-1)):
            out[a] = int(v)
        return out, sc
    if scales is None:
        raise Unsupported("Resize with neither scales nor sizes")
    sc = [1.0] * rank
    for a, v in zip(axes, np.asarray(scales, np.float32).reshape(-1)):
        sc[a] = float(v)
    if not all(np.isfinite(s) and s > 0 for s in sc):
        raise Unsupported(f"Resize scales {sc} (each must be a positive finite number)")
    # floor(in * scale), the product in float32 as ONNX Runtime computes it
    out = [int(np.floor(np.float32(d) * np.float32(s))) for d, s in zip(shp, sc)]
    return out, sc


def resize(cx, attrs):
    """Resize (opset 10-19) and Upsample: nearest or bilinear over H and W
    of an NCHW tensor ([N, C, L] as H = 1); constant scales or sizes."""
    shp = list(cx.shape(0))
    old = cx.node.op_type == "Upsample" or cx.opset < 11
    mode = _RESIZE_MODES.get(attrs.get("mode", "nearest"))
    if mode is None:
        raise Unsupported(f'Resize mode "{attrs.get("mode")}" is not supported (nearest and '
                          "linear)")
    transform = "asymmetric" if old else attrs.get("coordinate_transformation_mode",
                                                   "half_pixel")
    if transform not in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
        raise Unsupported(f'Resize coordinate_transformation_mode="{transform}" is not '
                          "supported")
    if len(shp) not in (3, 4):
        raise Unsupported(f"Resize of a rank-{len(shp)} tensor (NCHW or [N, C, L] only)")
    out, sc = _resize_targets(cx, attrs, shp)
    if out[:2] != shp[:2]:
        raise Unsupported(f"Resize of N or C ({shp} to {out}): only the spatial axes")
    if any(d < 1 for d in out):
        raise Unsupported(f"Resize to an empty shape {out}")
    nearest = "floor" if old else attrs.get("nearest_mode", "round_prefer_floor")
    if old and mode == "nearest" and any(s is not None and s < 1 for s in sc[2:]):
        raise Unsupported("nearest downsampling by Resize before opset 11 / Upsample is not "
                          "supported")
    if attrs.get("antialias", 0) and mode == "linear" and any(
            o < i for o, i in zip(out[2:], shp[2:])):
        raise Unsupported("Resize antialias=1 when downsampling is not supported")
    if out == shp and all(s in (None, 1.0) for s in sc):
        cx.bind(cx.out(), cx.tensor(0))
        return
    x = cx.tensor(0)
    if len(shp) == 3:  # [N, C, L] as [N, C, 1, L]
        x = cx.emit("reshape", [x], {"shape": [shp[0], shp[1], 1, shp[2]]})
        out4, sc4 = [out[0], out[1], 1, out[2]], [1.0, 1.0, 1.0, sc[2]]
    else:
        out4, sc4 = out, sc
    r_attrs = {"mode": mode, "size": out4[2:], "coordinate_transformation_mode": transform}
    if mode == "nearest":
        r_attrs["nearest_mode"] = nearest
    for key, s in (("scale_h", sc4[2]), ("scale_w", sc4[3])):
        if s is not None:
            r_attrs[key] = s
    y = cx.emit("resize", [x], r_attrs, out=cx.out() if len(shp) == 4 else None)
    if len(shp) == 3:
        cx.emit("reshape", [y], {"shape": out}, out=cx.out())


# -- the table -----------------------------------------------------------------

RULES: Dict[str, Rule] = {
    # element-wise
    "Relu": Rule(unary("relu"), F.FOLDS["Relu"]),
    "Sigmoid": Rule(unary("sigmoid"), F.FOLDS["Sigmoid"]),
    "Tanh": Rule(unary("tanh"), F.FOLDS["Tanh"]),
    "Abs": Rule(unary("abs"), F.FOLDS["Abs"]),
    "Add": Rule(binary("add"), F.FOLDS["Add"]),
    "Sub": Rule(binary("sub"), F.FOLDS["Sub"]),
    "Mul": Rule(binary("mul"), F.FOLDS["Mul"]),
    "Div": Rule(binary("div"), F.FOLDS["Div"]),
    "Mod": Rule(mod, F.FOLDS["Mod"]),
    "Sum": Rule(nary("sum", pairwise=False), F.FOLDS["Sum"]),
    "Max": Rule(nary("maximum", pairwise=True), F.FOLDS["Max"]),
    "Min": Rule(nary("minimum", pairwise=True), F.FOLDS["Min"]),
    "Clip": Rule(clip, None),
    "LeakyRelu": Rule(leaky_relu, None),
    "Sqrt": Rule(unary("sqrt"), F.FOLDS.get("Sqrt")),
    "Exp": Rule(unary("exp"), F.FOLDS.get("Exp")),
    "Erf": Rule(unary("erf"), F.FOLDS.get("Erf")),
    "Floor": Rule(unary("floor"), F.FOLDS.get("Floor")),
    "Ceil": Rule(unary("ceil"), F.FOLDS.get("Ceil")),
    "Gelu": Rule(gelu, None),
    "Pow": Rule(pow_, F.FOLDS.get("Pow")),
    # activations (issue #41)
    "HardSigmoid": Rule(with_attrs("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}), None),
    "HardSwish": Rule(unary("hard_swish"), None),
    "Mish": Rule(unary("mish"), None),
    "Softplus": Rule(unary("softplus"), None),
    "Softsign": Rule(unary("softsign"), None),
    "Elu": Rule(with_attrs("elu", {"alpha": 1.0}), None),
    "Selu": Rule(with_attrs("selu", {"alpha": 1.67326319217681884765625,
                                     "gamma": 1.05070102214813232421875}), None),
    "Celu": Rule(with_attrs("celu", {"alpha": 1.0}), None),
    "ThresholdedRelu": Rule(with_attrs("thresholded_relu", {"alpha": 1.0}), None),
    "PRelu": Rule(prelu, None),
    "Reciprocal": Rule(unary("reciprocal"), F.FOLDS.get("Reciprocal")),
    "Neg": Rule(unary("neg"), F.FOLDS.get("Neg")),
    "Sign": Rule(unary("sign"), F.FOLDS.get("Sign")),
    "Log": Rule(unary("log"), F.FOLDS.get("Log")),
    "Sin": Rule(unary("sin"), F.FOLDS.get("Sin")),
    "Cos": Rule(unary("cos"), F.FOLDS.get("Cos")),
    "Acos": Rule(unary("acos"), F.FOLDS["Acos"]),
    "Asin": Rule(unary("asin"), F.FOLDS["Asin"]),
    "Atan": Rule(unary("atan"), F.FOLDS["Atan"]),
    "Tan": Rule(unary("tan"), F.FOLDS["Tan"]),
    "Sinh": Rule(unary("sinh"), F.FOLDS["Sinh"]),
    "Cosh": Rule(unary("cosh"), F.FOLDS["Cosh"]),
    "Asinh": Rule(unary("asinh"), F.FOLDS["Asinh"]),
    "Acosh": Rule(unary("acosh"), F.FOLDS["Acosh"]),
    "Atanh": Rule(unary("atanh"), F.FOLDS["Atanh"]),
    "Round": Rule(unary("round"), F.FOLDS["Round"]),
    # resampling (issue #41)
    "Resize": Rule(resize, None),
    "Upsample": Rule(resize, None),
    # normalisations, reductions, einsum (issue #41; onnx/norms.py)
    "InstanceNormalization": Rule(norms.instance_norm, None),
    "GroupNormalization": Rule(norms.group_norm, None),
    "LpNormalization": Rule(norms.lp_normalization, None),
    "ReduceL1": Rule(norms.reduce_norm("l1"), None),
    "ReduceL2": Rule(norms.reduce_norm("l2"), None),
    "ReduceSumSquare": Rule(norms.reduce_norm("sumsquare"), None),
    "ReduceMin": Rule(norms.reduce_extreme("min"), F.FOLDS["ReduceMin"]),
    "Einsum": Rule(norms.einsum, None),
    "ArgMax": Rule(norms.argmax, F.FOLDS.get("ArgMax")),
    # dense, convolution, pooling, normalisation
    "MatMul": Rule(matmul, None),
    "Gemm": Rule(gemm, None),
    "Conv": Rule(lift_1d(conv, weights=True), None),
    "ConvTranspose": Rule(lift_1d(conv_transpose, weights=True), None),
    "MaxPool": Rule(lift_1d(pool("max")), None),
    "AveragePool": Rule(lift_1d(pool("avg")), None),
    "GlobalAveragePool": Rule(lift_1d(global_pool("avg")), None),
    "GlobalMaxPool": Rule(lift_1d(global_pool("max")), None),
    "ReduceMean": Rule(reduce_("avg"), F.FOLDS["ReduceMean"]),
    "ReduceMax": Rule(reduce_("max"), F.FOLDS["ReduceMax"]),
    "ReduceSum": Rule(reduce_("sum"), F.FOLDS["ReduceSum"]),
    "BatchNormalization": Rule(batch_norm, F.FOLDS["BatchNormalization"]),
    "Softmax": Rule(softmax, None),
    "LayerNormalization": Rule(layer_norm, None),
    # recurrent cells, unrolled over the sequence
    "LSTM": Rule(recurrent.lstm, None),
    "GRU": Rule(recurrent.gru, None),
    # data movement
    "Concat": Rule(concat, F.FOLDS["Concat"]),
    "Split": Rule(split, F.FOLDS["Split"]),
    "Slice": Rule(slice_, F.FOLDS["Slice"]),
    "Gather": Rule(gather, F.FOLDS["Gather"]),
    "Reshape": Rule(reshape, F.FOLDS["Reshape"]),
    "Flatten": Rule(flatten, F.FOLDS["Flatten"]),
    "Squeeze": Rule(squeeze, F.FOLDS["Squeeze"]),
    "Unsqueeze": Rule(unsqueeze, F.FOLDS["Unsqueeze"]),
    "Transpose": Rule(transpose, F.FOLDS["Transpose"]),
    "Pad": Rule(pad, None),
    # no-ops at inference
    "Identity": Rule(passthrough, F.FOLDS["Identity"]),
    "Dropout": Rule(passthrough, F.FOLDS["Dropout"]),
    "Cast": Rule(cast, F.FOLDS["Cast"]),
    # shapes
    "Shape": Rule(shape, F.FOLDS["Shape"]),
    "Size": Rule(size, F.FOLDS["Size"]),
    # comparisons, logic and run-time indices (int and bool as float32 values)
    "Equal": Rule(compare("equal"), F.FOLDS["Equal"]),
    "Less": Rule(compare("less"), F.FOLDS["Less"]),
    "LessOrEqual": Rule(compare("less_equal"), F.FOLDS["LessOrEqual"]),
    "Greater": Rule(compare("greater"), F.FOLDS["Greater"]),
    "GreaterOrEqual": Rule(compare("greater_equal"), F.FOLDS["GreaterOrEqual"]),
    "And": Rule(compare("logical_and"), F.FOLDS["And"]),
    "Or": Rule(compare("logical_or"), F.FOLDS["Or"]),
    "Xor": Rule(compare("logical_xor"), F.FOLDS["Xor"]),
    "Not": Rule(unary("logical_not"), F.FOLDS["Not"]),
    "Where": Rule(where, F.FOLDS["Where"]),
    "GatherElements": Rule(gather_elements, F.FOLDS["GatherElements"]),
    "CumSum": Rule(cumsum, F.FOLDS["CumSum"]),
    "Expand": Rule(expand, F.FOLDS["Expand"]),
    "Tile": Rule(tile, F.FOLDS["Tile"]),
}
# held-out architectures of issue #41 (benchmarks/heldout_models.py)
RULES.update({
    "OneHot": Rule(indicator.one_hot, indicator.fold_one_hot),
    "GatherND": Rule(gather_nd.gather_nd, gather_nd.fold_gather_nd),
    "ScatterElements": Rule(scatter.scatter_elements, scatter.fold_scatter_elements),
    "EyeLike": Rule(indicator.eye_like, None),
    "ScatterND": Rule(scatter.scatter_nd, F.FOLDS["ScatterND"]),
    "Clip": Rule(clip_rules.one_sided(clip), clip_rules.fold_clip),
    "Resize": Rule(resize, resize_fold.folder(_resize_targets)),
})
# quantized (issue #43): QOperator ops, and the QDQ form folded into int8
# ops by the float rules' quantization-aware wrappers (onnx/quant.py).
RULES.update({
    "QuantizeLinear": Rule(Q.quantize_linear, Q.fold_quantize),
    "DequantizeLinear": Rule(Q.dequantize_linear, Q.fold_dequantize),
    "QLinearConv": Rule(Q.qlinear_conv, None),
    "QLinearMatMul": Rule(Q.qlinear_matmul, None),
    "QLinearAdd": Rule(Q.qlinear_add, None),
    "QLinearGlobalAveragePool": Rule(Q.qlinear_global_average_pool, None),
    "QGemm": Rule(Q.qgemm, None),
    "MatMulInteger": Rule(Q.matmul_integer, None),
    "ConvInteger": Rule(Q.conv_integer, None),
    "DynamicQuantizeLinear": Rule(Q.dynamic_quantize_linear, None),
    # the float rows above (Conv lifted for 1-D inputs) stay the fallback
    "Conv": Rule(Q.qdq_aware("Conv", RULES["Conv"].convert), None),
    "MatMul": Rule(Q.qdq_aware("MatMul", RULES["MatMul"].convert), None),
    "Gemm": Rule(Q.qdq_aware("Gemm", RULES["Gemm"].convert), None),
    "Relu": Rule(Q.relu_aware(RULES["Relu"].convert), RULES["Relu"].fold),
    "Mul": Rule(Q.scale_aware(RULES["Mul"].convert), RULES["Mul"].fold),
    "Add": Rule(Q.add_aware(RULES["Add"].convert), RULES["Add"].fold),
    "MaxPool": Rule(Q.max_pool_aware(RULES["MaxPool"].convert), None),
})
RULES.update({k: Rule(fn, None) for k, fn in qlinear_ms.table(RULES).items()})
RULES["QLinearMatMul"] = Rule(qlinear_ms.matmul(Q.qlinear_matmul, RULES["MatMul"].convert), None)
# ops imported as a few engine ops each (onnx/composed.py)
RULES.update({k: Rule(c, f) for k, (c, f) in composed.RULES.items()})
# Ops imported only when every input is a constant (folded at import).
for _op, _fn in F.FOLDS.items():
    RULES.setdefault(_op, Rule(None, _fn))


def supported_ops() -> str:
    """The table as one line for error messages."""
    run = sorted(k for k, r in RULES.items() if r.convert is not None)
    const = sorted(k for k, r in RULES.items() if r.convert is None)
    return f"{', '.join(run)}; on constants and shapes only: {', '.join(const)}"
