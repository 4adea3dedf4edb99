"""Quantized ops (issue #43): qmatmul, qconv2d, qadd and dynamic_quantize.

Quantized activations travel between ops as their integer values held in
float32 tensors (exact: every u8/s8 value is a float), so the engine's
buffers, planner and schedulers need no second element type; the ops
convert to bytes inside, where the int8 GEMM (kernels/qgemm) packs its
operands. The element-wise quantize_u8 / quantize_s8 / dequantize ops
(eltwise.py) convert between real and integer values. docs/onnx.md says
what this costs.

Weights (b, w) are params holding s8 values (u8 weights are shifted by -128
at import, their zero points with them); w_scale and w_zero are per tensor
([1]) or per output column / channel ([N], [OC]). The output is one of
  f32   dequantized: (a - za)(b - zb) * a_scale * w_scale + bias (then relu)
  acc   the integer sum of (a - za)(b - zb) itself (ONNX MatMulInteger)
  u8/s8 requantised: clamp(rne(v / y_scale) + y_zero) of the f32 value v
computed in float32 as the kernel does: acc * (a_scale * w_scale / y_scale)
+ bias / y_scale.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, expect_rank, register, show_shape
from hwtune.graph.ops.conv import DILATION, STRIDE, conv2d_nchw_f64, conv_pads

RANGES = {"u8": (0, 255), "s8": (-128, 127)}

QUANT_ATTRS = [
    Attr("a_scale", "float", 1.0, doc="activation scale (per tensor)"),
    Attr("a_zero", "int", 0, doc="activation zero point (u8 or s8 by a_signed)"),
    Attr("a_signed", "bool", False, doc="activations hold s8 values (else u8)"),
    Attr("out", "str", "f32", choices=("f32", "acc", "u8", "s8"),
         doc="f32: dequantized; acc: the integer accumulator; u8/s8: requantised"),
    Attr("y_scale", "float", 1.0, doc="output scale (u8/s8 outputs)"),
    Attr("y_zero", "int", 0, doc="output zero point (u8/s8 outputs)"),
    Attr("relu", "bool", False, doc="max(v, 0) before requantisation"),
    Attr("bias_int", "bool", False,
         doc="bias holds integers added to the accumulator (ONNX Runtime's int32 bias of "
             "scale a_scale * w_scale), not a real value added after scaling"),
]


def _per_channel(in_shapes, i, n, what):
    if len(in_shapes) > i and tuple(in_shapes[i]) not in ((1,), (n,)):
        raise OpError(f"{what} must be [1] or [{n}], got {show_shape(in_shapes[i])}",
                      f"inputs[{i}]")


def epilogue(acc, n_axis, w_scale, bias, attrs):
    """The output from the exact accumulator acc (float64 of integers),
    channels along n_axis; float32 arithmetic in the kernel's order."""
    f = np.float32
    if attrs["bias_int"] and bias is not None:
        shape = [1] * acc.ndim
        shape[n_axis] = -1
        acc, bias = acc + bias.astype(np.float64).reshape(shape), None
    if attrs["out"] == "acc":
        return acc.astype(f)
    shape = [1] * acc.ndim
    shape[n_axis] = -1
    n = acc.shape[n_axis]
    scale = np.broadcast_to(f(attrs["a_scale"]) * w_scale.astype(f), (n,)).astype(f)
    b = np.zeros(n, f) if bias is None else bias.astype(f)
    requant = attrs["out"] in RANGES
    if requant:
        scale = scale / f(attrs["y_scale"])
        b = b / f(attrs["y_scale"])
    v = acc.astype(f) * scale.reshape(shape) + b.reshape(shape)
    if attrs["relu"]:
        # a float output keeps NaN, as ONNX Runtime's Relu; a requantised
        # one has no NaN and takes 0 for it (kernels/qgemm/epi.h)
        v = np.where(v > 0, v, f(0)) if requant else np.where(v < 0, f(0), v)
    if requant:
        qmin, qmax = RANGES[attrs["out"]]
        zy = attrs["y_zero"]
        v = np.clip(v, f(qmin - zy), f(qmax - zy))
        v = np.rint(v) + f(zy)
    return v.astype(f)


def _check_ranges(attrs, where="attrs.a_zero"):
    lo, hi = RANGES["s8" if attrs["a_signed"] else "u8"]
    if not lo <= attrs["a_zero"] <= hi:
        raise OpError(f"a_zero {attrs['a_zero']} is outside {lo}..{hi}", where)
    if attrs["out"] in RANGES:
        lo, hi = RANGES[attrs["out"]]
        if not lo <= attrs["y_zero"] <= hi:
            raise OpError(f"y_zero {attrs['y_zero']} is outside {lo}..{hi}", "attrs.y_zero")
        if not attrs["y_scale"] > 0:
            raise OpError("y_scale must be > 0", "attrs.y_scale")


# -- qmatmul -----------------------------------------------------------------

def _mm_dims(in_shapes, attrs):
    a, b = in_shapes[0], in_shapes[1]
    if len(a) < 2:
        raise OpError(f"qmatmul needs a of rank >= 2, got {show_shape(a)}", "inputs[0]")
    expect_rank(b, 2, "qmatmul weights must be [K, N]", "inputs[1]")
    if a[-1] != b[0]:
        raise OpError(f"inner dimensions differ: {show_shape(a)} by {show_shape(b)}",
                      "inputs[1]")
    return int(np.prod(a[:-1], dtype=np.int64)), b[1], b[0]


def _mm_infer(in_shapes, attrs, n_out):
    _, n, _ = _mm_dims(in_shapes, attrs)
    _check_ranges(attrs)
    _per_channel(in_shapes, 2, n, "w_scale")
    _per_channel(in_shapes, 3, n, "w_zero")
    if len(in_shapes) > 4 and tuple(in_shapes[4]) != (n,):
        raise OpError(f"bias must have shape [{n}], got {show_shape(in_shapes[4])}",
                      "inputs[4]")
    if len(in_shapes) > 5 and tuple(in_shapes[5]) != (1,):
        raise OpError(f"a_zero_t must be [1], got {show_shape(in_shapes[5])}", "inputs[5]")
    if len(in_shapes) > 6:
        if tuple(in_shapes[6]) not in ((), (1,), (n,)):
            raise OpError(f"scale_t must be [1] or [{n}], got {show_shape(in_shapes[6])}",
                          "inputs[6]")
        if attrs["out"] != "f32":
            raise OpError(f"scale_t scales a dequantized output: out must be f32, not "
                          f"{attrs['out']}", "attrs.out")
    return [tuple(in_shapes[0][:-1]) + (n,)]


def _mm_ref(arrays, attrs, n_out):
    a, b, w_scale, w_zero = arrays[:4]
    bias = arrays[4] if len(arrays) > 4 else None
    za = float(arrays[5].reshape(-1)[0]) if len(arrays) > 5 else attrs["a_zero"]
    k, n = b.shape
    acc = (a.reshape(-1, k).astype(np.float64) - za) @ \
        (b.astype(np.float64) - w_zero.astype(np.float64).reshape(1, -1))
    if len(arrays) > 6:  # the run-time product replaces a_scale * w_scale
        w_scale, attrs = arrays[6].astype(np.float32), {**attrs, "a_scale": 1.0}
    y = epilogue(acc, 1, w_scale.reshape(-1), bias, attrs)
    return [y.reshape(tuple(a.shape[:-1]) + (n,))]


def _mm_flops(in_shapes, out_shapes, attrs):
    m, n, k = _mm_dims(in_shapes, attrs)
    return 2 * m * n * k


register(OpSpec(
    "qmatmul", ("a", "b", "w_scale", "w_zero", "bias", "a_zero_t", "scale_t"), 4, 7, _mm_infer,
    _mm_ref,
    _mm_flops, attrs=list(QUANT_ATTRS),
    doc="int8 y[..., N] = a[..., K] x b[K, N] on integer values (u8/s8 activations, s8 "
        "weights, int32 accumulation), dequantized, accumulated or requantised by `out`; "
        "a_zero_t, when given, is the activation zero point computed at run time "
        "(dynamic_quantize); scale_t ([1] or [N], run time, out f32 only) replaces a_scale * "
        "w_scale (ONNX Runtime's quantize_dynamic multiplies MatMulInteger's sum by it)"))


# -- qconv2d -----------------------------------------------------------------

def _conv_geometry(in_shapes, attrs):
    x, w = in_shapes[0], in_shapes[1]
    expect_rank(x, 4, "qconv2d input must be [N, C, H, W]", "inputs[0]")
    expect_rank(w, 4, "qconv2d weights must be [OC, IC/groups, KH, KW]", "inputs[1]")
    n, ic, h, wd = x
    oc, wic, kh, kw = w
    g = attrs["groups"]
    if ic % g or oc % g or wic * g != ic:
        raise OpError(f"weights {show_shape(w)} with groups={g} do not fit {ic} input "
                      "channels", "inputs[1]")
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    pt, pl, pb, pr = conv_pads(attrs)
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise OpError(f"kernel {kh}x{kw} does not fit the padded input", "inputs[1]")
    return n, ic, oc, kh, kw, oh, ow


def _conv_infer(in_shapes, attrs, n_out):
    n, _, oc, _, _, oh, ow = _conv_geometry(in_shapes, attrs)
    _check_ranges(attrs)
    _per_channel(in_shapes, 2, oc, "w_scale")
    _per_channel(in_shapes, 3, oc, "w_zero")
    if len(in_shapes) > 4 and tuple(in_shapes[4]) != (oc,):
        raise OpError(f"bias must have shape [{oc}], got {show_shape(in_shapes[4])}",
                      "inputs[4]")
    return [(n, oc, oh, ow)]


def _conv_ref(arrays, attrs, n_out):
    x, w, w_scale, w_zero = arrays[:4]
    bias = arrays[4] if len(arrays) > 4 else None
    g, oc = attrs["groups"], w.shape[0]
    xs = x.astype(np.float64) - attrs["a_zero"]  # padding holds the zero point: 0 here
    ws = w.astype(np.float64) - np.broadcast_to(w_zero.reshape(-1), (oc,)).reshape(-1, 1, 1, 1)
    acc = conv2d_nchw_f64(xs, ws, attrs["stride"], attrs["padding"], attrs["dilation"],
                          attrs["padding_end"], g)
    return [epilogue(acc, 1, w_scale.reshape(-1), bias, attrs)]


def _conv_flops(in_shapes, out_shapes, attrs):
    n, ic, oc, kh, kw, oh, ow = _conv_geometry(in_shapes, attrs)
    return 2 * n * oc * oh * ow * (ic // attrs["groups"]) * kh * kw


register(OpSpec(
    "qconv2d", ("x", "w", "w_scale", "w_zero", "bias"), 4, 5, _conv_infer, _conv_ref,
    _conv_flops,
    attrs=[STRIDE,
           Attr("padding", "pair", (0, 0), minimum=0,
                doc="int or [ph, pw] (the padding holds the activation zero point)"),
           Attr("padding_end", "pair", None, minimum=0,
                doc="int or [bottom, right] when it differs from padding"),
           DILATION,
           Attr("groups", "int", 1, minimum=1, doc="channel groups (depthwise: groups = C)"),
           *[a for a in QUANT_ATTRS]],
    doc="int8 2-D convolution, NCHW, on integer values (u8/s8 activations, s8 weights, int32 "
        "accumulation; im2col into the int8 GEMM), output f32 (dequantized), acc (the "
        "integer sum, ConvInteger) or u8/s8 (requantised) by `out`"))


# -- qadd --------------------------------------------------------------------

def _qadd_infer(in_shapes, attrs, n_out):
    if tuple(in_shapes[0]) != tuple(in_shapes[1]):
        raise OpError(f"qadd adds tensors of one shape, got {show_shape(in_shapes[0])} and "
                      f"{show_shape(in_shapes[1])}", "inputs[1]")
    if not (attrs["a_scale"] > 0 and attrs["b_scale"] > 0 and attrs["y_scale"] > 0):
        raise OpError("qadd's scales must be > 0", "attrs")
    return [tuple(in_shapes[0])]


def _qadd_ref(arrays, attrs, n_out):
    f = np.float32
    a = (arrays[0].astype(f) - f(attrs["a_zero"])) * f(attrs["a_scale"])
    b = (arrays[1].astype(f) - f(attrs["b_zero"])) * f(attrs["b_scale"])
    s = (a + b).astype(f)
    qmin, qmax = RANGES[attrs["out"]]
    zy = f(attrs["y_zero"])
    v = s / f(attrs["y_scale"])
    v = np.where(v > f(qmin) - zy, v, f(qmin) - zy)
    v = np.where(v < f(qmax) - zy, v, f(qmax) - zy)
    return [(np.rint(v) + zy).astype(f)]


register(OpSpec(
    "qadd", ("a", "b"), 2, 2, _qadd_infer, _qadd_ref,
    lambda ins, outs, attrs: 6 * int(np.prod(ins[0], dtype=np.int64)),
    attrs=[Attr("a_scale", "float", 1.0, doc="a's scale"),
           Attr("a_zero", "int", 0, doc="a's zero point"),
           Attr("b_scale", "float", 1.0, doc="b's scale"),
           Attr("b_zero", "int", 0, doc="b's zero point"),
           Attr("y_scale", "float", 1.0, doc="output scale"),
           Attr("y_zero", "int", 0, doc="output zero point"),
           Attr("out", "str", "u8", choices=("u8", "s8"), doc="output integer type")],
    doc="quantized add of two tensors of one shape (integer values in float32): "
        "quantize((a - a_zero) * a_scale + (b - b_zero) * b_scale) to u8/s8 by y_scale and "
        "y_zero, the float32 operations of dequantize, add, quantize in one pass (QDQ "
        "residual adds)"))


# -- dynamic_quantize --------------------------------------------------------

def dynamic_params(x):
    """ONNX DynamicQuantizeLinear's scale and zero point of x (float32)."""
    f = np.float32
    lo = min(f(0), f(np.min(x))) if x.size else f(0)
    hi = max(f(0), f(np.max(x))) if x.size else f(0)
    scale = f((hi - lo) / f(255))
    if scale == 0:
        return f(1), f(0)  # all zeros: any scale gives q = 0
    zp = np.clip(np.rint(f(0) - lo / scale), 0, 255)
    return scale, f(zp)


def _dq_infer(in_shapes, attrs, n_out):
    if n_out != 3:
        raise OpError("dynamic_quantize has three outputs: y, scale, zero_point", "")
    return [tuple(in_shapes[0]), (1,), (1,)]


def _dq_ref(arrays, attrs, n_out):
    x = arrays[0]
    scale, zp = dynamic_params(x)
    v = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.float32)
    return [v, np.array([scale], np.float32), np.array([zp], np.float32)]


register(OpSpec(
    "dynamic_quantize", ("x",), 1, 1, _dq_infer, _dq_ref,
    lambda ins, outs, attrs: 3 * int(np.prod(ins[0], dtype=np.int64)), n_outputs=3,
    doc="ONNX DynamicQuantizeLinear: u8 with scale = (max(x, 0) - min(x, 0)) / 255 and "
        "zero_point = rne(-min(x, 0) / scale); outputs y (integers in float32), scale [1], "
        "zero_point [1]"))
