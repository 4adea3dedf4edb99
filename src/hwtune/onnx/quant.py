"""Quantized ONNX models (issue #43): the converters of the RULES block
"# quantized (issue #43)" in rules.py.

Both forms ONNX Runtime's quantization tools write import onto hwtune's
int8 ops (graph/ops/quant.py):
- QOperator: QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger,
  DynamicQuantizeLinear, QuantizeLinear, DequantizeLinear, and
  com.microsoft's QGemm, QLinearAdd and QLinearGlobalAveragePool (the last
  two as dequantize, the float op, quantize).
- QDQ: a DequantizeLinear of a constant weight feeding Conv / MatMul / Gemm,
  whose activation input is itself a DequantizeLinear of a run-time tensor,
  becomes one qconv2d / qmatmul on the quantized tensor (per-tensor or
  per-channel weight scales, u8/s8 zero points); a Relu and then a
  QuantizeLinear on its float output fold into it (requantised output).
  Folding re-emits the op under the later name: the float version is dropped
  by the importer when nothing else reads it.

Quantized activations travel as integer values in float32 tensors
(docs/onnx.md). Weights become s8 params: u8 weights move by -128, their
zero points with them, which leaves every (w - zero_point) unchanged.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.axes import normalize_axis
from hwtune.onnx.errors import Unsupported
from hwtune.onnx.windows import pad_attrs, pads2d, pair_attr


class _State:
    """What the quantized rules remember across nodes of one import."""

    def __init__(self):
        self.deq = {}     # ONNX name of a run-time DQ output -> (tensor, scale, zp, signed)
        self.wq = {}      # ONNX name of a constant DQ output -> (ints, scale, zp, axis)
        self.bq = {}      # ONNX name of a constant int32 DQ output -> (ints, scale)
        self.signed = {}  # hwtune tensor of integers -> True for s8 values
        self.fusable = {}  # hwtune tensor -> (op, inputs, attrs) of a qop with f32 output
        self.acc_mm = {}  # hwtune tensor -> (inputs, n) of a MatMulInteger qmatmul (a_zero_t)
        self.scaled_mm = {}  # hwtune tensor -> (inputs, attrs, n) of a scale_t qmatmul, no bias
        self.dq_add = {}  # hwtune tensor -> (deq a, deq b): a float Add of two run-time DQs
        self.dq_pool = {}  # hwtune tensor -> (deq x, pool2d item): a MaxPool of a run-time DQ


def _st(cx) -> _State:
    st = getattr(cx, "quant_state", None)
    if st is None:
        st = cx.quant_state = _State()
    return st


def _scalar(v, what):
    a = np.asarray(v)
    if a.size != 1:
        raise Unsupported(f"{what} must be one value per tensor here, got shape {list(a.shape)}")
    return a.reshape(())


def _zp_info(cx, i, default_signed=False):
    """(zero point as int, signed) of optional const input i."""
    if not cx.has(i):
        return 0, default_signed
    z = _scalar(cx.const(i, "zero point"), "the zero point")
    if z.dtype not in (np.uint8, np.int8):
        raise Unsupported(f"zero point of type {z.dtype}: hwtune quantizes to uint8 / int8")
    return int(z), z.dtype == np.int8


# -- folding constants --------------------------------------------------------

def _axis_shape(x, scale, axis):
    """scale (or a zero point) shaped to broadcast along x's axis. The axis
    is checked only for a per-axis scale: a per-tensor one ignores it (ONNX's
    default 1 is no axis of a 1-D bias)."""
    s = np.asarray(scale)
    if s.size == 1:
        return s.reshape(())
    shape = [1] * x.ndim
    shape[normalize_axis(axis, x.ndim)] = -1
    return s.reshape(shape)


def fold_dequantize(values, attrs, cx):
    """Constant DequantizeLinear (weights, int32 biases): the real values;
    int8 / uint8 integers are also remembered, so that a Conv / MatMul /
    Gemm reading them runs on the integers (qdq_aware)."""
    x, scale = values[0], values[1]
    zp = values[2] if len(values) > 2 and values[2] is not None else np.zeros((), x.dtype)
    axis = int(attrs.get("axis", 1))
    if np.size(scale) > 1:  # per axis: the axis indexes x (else it is ignored)
        axis = normalize_axis(axis, x.ndim)
    if x.dtype == np.int32 and cx is not None and cx.node is not None:
        _st(cx).bq[cx.node.output[0]] = (x, np.asarray(scale, np.float32))
    if x.dtype in (np.int8, np.uint8) and cx is not None and cx.node is not None:
        _st(cx).wq[cx.node.output[0]] = (x, np.asarray(scale, np.float32), np.asarray(zp),
                                         axis)
    xs = x.astype(np.float64) - _axis_shape(x, zp, axis).astype(np.float64)
    return [(xs.astype(np.float32) * _axis_shape(x, scale, axis).astype(np.float32))
            .astype(np.float32)]


def fold_quantize(values, attrs, cx):
    x, scale = values[0].astype(np.float32), values[1]
    zp = values[2] if len(values) > 2 and values[2] is not None else np.zeros((), np.uint8)
    axis = int(attrs.get("axis", 1))
    info = np.iinfo(zp.dtype)
    v = np.rint(x / _axis_shape(x, scale, axis).astype(np.float32)) + _axis_shape(x, zp, axis)
    return [np.clip(v, info.min, info.max).astype(zp.dtype)]


# -- QDQ: QuantizeLinear / DequantizeLinear -----------------------------------

def quantize_linear(cx, attrs):
    st = _st(cx)
    scale = float(_scalar(cx.const(1, "y_scale"), "QuantizeLinear's scale (run-time tensors "
                                                    "are quantized per tensor)"))
    zp, signed = _zp_info(cx, 2)
    x = cx.tensor(0)
    out_type = "s8" if signed else "u8"
    fused = st.fusable.get(x)
    if x in st.dq_add:  # DQ(a) + DQ(b) -> Q: one qadd (the residual add of QDQ CNNs)
        (ta, sa, za, _), (tb, sb, zb, _) = st.dq_add[x]
        cx.emit("qadd", [ta, tb], {"a_scale": sa, "a_zero": za, "b_scale": sb, "b_zero": zb,
                                   "y_scale": scale, "y_zero": zp, "out": out_type},
                out=cx.out())
    elif x in st.dq_pool and st.dq_pool[x][0][1:] == (scale, zp, signed):
        # DQ -> MaxPool -> Q at one scale and zero point: the pool on the
        # integers. The max commutes with the increasing (q - z) * s, and
        # quantizing (q - z) * s back at s returns q exactly (the float
        # error, under 255 * 2^-23, is far from a rounding boundary).
        (tq, _, _, _), item = st.dq_pool[x]
        cx.emit("pool2d", [tq], item.get("attrs", {}), out=cx.out())
    elif fused is not None and fused[2]["out"] == "f32":
        op, ins, at = fused
        cx.emit(op, ins, {**at, "out": out_type, "y_scale": scale, "y_zero": zp}, out=cx.out())
    else:
        cx.emit(f"quantize_{out_type}", [x], {"scale": scale, "zero_point": float(zp)},
                out=cx.out())
    st.signed[cx.out()] = signed


def dequantize_linear(cx, attrs):
    """Run-time input (the constant case is folded): per tensor."""
    st = _st(cx)
    scale = float(_scalar(cx.const(1, "x_scale"), "DequantizeLinear's scale of a run-time "
                                                    "tensor"))
    x = cx.tensor(0)
    zp, signed = _zp_info(cx, 2, st.signed.get(x, False))
    cx.emit("dequantize", [x], {"scale": scale, "zero_point": float(zp)}, out=cx.out())
    st.deq[cx.out()] = (x, scale, zp, signed)


def _weight_params(cx, hint, q, scale, zp, n, axis_ok):
    """params (ints, w_scale, w_zero) with u8 weights shifted to s8."""
    if q.dtype == np.uint8:
        q, zp = q.astype(np.int32) - 128, np.asarray(zp).astype(np.int32) - 128
    elif q.dtype != np.int8:
        raise Unsupported(f"weights of type {q.dtype}: hwtune's int8 GEMM takes uint8 / int8")
    scale, zp = np.asarray(scale, np.float32).reshape(-1), np.asarray(zp).reshape(-1)
    if scale.size not in (1, n) or zp.size not in (1, n) or (scale.size == n != 1 and
                                                              not axis_ok):
        raise Unsupported(f"weight scales of shape {list(scale.shape)}: per tensor or per "
                          f"output channel ({n}) only")
    return q, cx.param(f"{hint}:scale", scale), cx.param(f"{hint}:zero",
                                                         zp.astype(np.float32))


def _fusable(cx, op, ins, attrs, out):
    cx.emit(op, ins, attrs, out=out)
    if attrs.get("out", "f32") == "f32":
        _st(cx).fusable[out] = (op, list(ins), dict(attrs))


def _act_attrs(scale, zp, signed):
    return {"a_scale": float(scale), "a_zero": int(zp), "a_signed": bool(signed), "out": "f32"}


def qdq_aware(op_type, fallback):
    """Conv / MatMul / Gemm: the quantized op when the activation is a
    run-time DequantizeLinear and the weight a constant one; else the
    float converter."""
    def convert(cx, attrs):
        st = _st(cx)
        a, w = cx.node.input[0], cx.node.input[1]
        if a in st.deq and w in st.wq and not (op_type == "Conv" and
                                               _float_depthwise(cx, attrs, st.deq[a])):
            _QDQ[op_type](cx, attrs, st.deq[a], st.wq[w])
        else:
            fallback(cx, attrs)
    return convert


def _float_depthwise(cx, attrs, act):
    """A depthwise Conv the int8 depthwise kernel does not take (s8
    activations, several filters per channel) or should not (an output read
    by other ops than convs, _feeds_int8_convs): the float form below.
    With u8 activations and one filter per channel (ORT's quantize_static
    MobileNetV2 / EfficientNet) it is a qconv2d that runs the depthwise int8
    kernel on channels-last bytes (kernels/qdw), linked by bytes to the int8
    1x1 convs around it (hwtune.engine.qlayout)."""
    if not _depthwise(cx, attrs):
        return False
    g, a_signed = int(attrs.get("group", 1)), act[3]
    return bool(a_signed) or cx.shape(1)[0] != g or not _feeds_int8_convs(cx, cx.node.output[0])


def _feeds_int8_convs(cx, name, depth=0):
    """Whether every reader of ONNX tensor `name`, through Relu / Clip and a
    QuantizeLinear -> DequantizeLinear pair, is a Conv: the depthwise conv's
    output then travels as bytes to int8 convs (hwtune.engine.qlayout),
    where the int8 depthwise kernel runs without a conversion on either side.
    Read by anything else (EfficientNet's SiLU), its float planes out of the
    int8 kernel cost more than the float form (int8 EfficientNet-B0 at 1
    thread: 13.2-13.5 ms with every depthwise conv in float, 15.4-18.2 with
    the int8 kernel; MobileNetV2, whose depthwise convs sit between int8
    1x1 convs: 5.96-6.57 ms in float, 3.92-3.98 with it; `hwtune run`,
    alternated builds, 20:45 UTC, load 0.4-0.9)."""
    users = cx.readers.get(name, [])
    if not users or depth > 4:
        return False
    for node in users:
        if node.op_type in ("Conv", "QLinearConv"):
            continue
        if node.op_type in ("Relu", "Clip", "QuantizeLinear", "DequantizeLinear"):
            if not _feeds_int8_convs(cx, node.output[0], depth + 1):
                return False
            continue
        return False
    return True


def _depthwise(cx, attrs):
    """A depthwise Conv (one input channel per group, MobileNet's and
    EfficientNet's 3x3 / 5x5): its QDQ form runs as the float depthwise conv
    on the dequantized input and weights, then the QuantizeLinear after it.
    qconv2d would run each channel as its own GEMM with K = kh * kw and one
    output column: int8 MobileNetV2 took 54.3 ms in qconv2d at 1 thread
    where ORT's QLinearConvs took 3.2 (benchmarks/op_breakdown.py on
    bench_quant's model, under load)."""
    g = int(attrs.get("group", 1))
    return g > 1 and len(cx.shape(1)) == 4 and cx.shape(1)[1] == 1


def _conv_qdq(cx, attrs, act, wq):
    x, a_scale, a_zp, a_signed = act
    q, scale, zp, axis = wq
    oc = q.shape[0]
    qi, ws, wz = _weight_params(cx, cx.node.input[1], q, scale, zp, oc, axis == 0)
    bias, at = _qdq_bias(cx, 2, a_scale, scale, oc), _act_attrs(a_scale, a_zp, a_signed)
    if bias is not None and bias[1]:
        at["bias_int"] = True
    _emit_qconv(cx, attrs, x, qi, ws, wz, None if bias is None else bias[0], at, cx.shape(0),
                q.shape)


def _qdq_bias(cx, i, a_scale, w_scale, n):
    """(values, is_int) of the bias input i: the int32 integers of a constant
    DequantizeLinear whose scale is a_scale * w_scale (what ONNX Runtime's
    fused QLinearConv adds to its accumulator), else the real values."""
    if not cx.has(i):
        return None
    b = cx.node.input[i]
    hit = _st(cx).bq.get(b)
    if hit is not None:
        ints, scale = hit
        want = np.float32(a_scale) * np.asarray(w_scale, np.float32).reshape(-1)
        if (ints.size == n and np.abs(ints).max(initial=0) < 2 ** 24 and
                np.allclose(np.broadcast_to(scale.reshape(-1), (n,)), want, rtol=1e-6, atol=0)):
            return ints.reshape(-1).astype(np.float32), True
    return np.asarray(cx.const(i, "bias"), np.float32).reshape(-1), False


def _window(attrs, x_shape, w_shape):
    """Conv's window attributes (stride, padding, dilation when not 1), read
    as for a float Conv (onnx/windows.py)."""
    if len(x_shape) != 4:
        raise Unsupported(f"{len(x_shape) - 2}-D convolution: qconv2d is 2-D (NCHW)")
    strides = pair_attr(attrs, "strides", [1, 1])
    dilations = pair_attr(attrs, "dilations", [1, 1])
    at = {"stride": strides,
          **pad_attrs(pads2d(attrs, x_shape[2:], w_shape[2:], strides, dilations))}
    if dilations != [1, 1]:
        at["dilation"] = dilations
    return at


def _float_conv(cx, attrs, x, w, w_input, bias, out=None):
    """A float conv2d of x by the weights w (the node's input w_input, as
    floats) and bias, Conv's window and group: the quantized forms qconv2d
    does not run well (below)."""
    at = _window(attrs, cx.shape(0), w.shape)
    if int(attrs.get("group", 1)) != 1:
        at["group"] = int(attrs["group"])
    ins = [x, cx.param(f"{cx.node.input[w_input]}:float", w.astype(np.float32))]
    if bias is not None:
        ins.append(cx.param(f"{cx.node.name or cx.out()}:bias", bias.astype(np.float32)))
    return cx.emit("conv2d", ins, at, out=out)


def _emit_qconv(cx, attrs, x, qi, ws, wz, bias, at, x_shape, w_shape):
    at = {**at, **_window(attrs, x_shape, w_shape), "groups": int(attrs.get("group", 1))}
    ins = [x, cx.param(f"{cx.node.input[1]}:s8", qi.astype(np.float32)), ws, wz]
    if bias is not None:
        ins.append(cx.param(f"{cx.node.name or cx.out()}:bias",
                            np.asarray(bias, np.float32).reshape(-1)))
    _fusable(cx, "qconv2d", ins, at, cx.out())


def _matmul_ins(cx, x, qi, ws, wz, bias):
    ins = [x, cx.param(f"{cx.node.input[1]}:s8", qi.astype(np.float32)), ws, wz]
    if bias is not None:
        ins.append(cx.param(f"{cx.node.name or cx.out()}:bias",
                            np.asarray(bias, np.float32).reshape(-1)))
    return ins


def _matmul_qdq(cx, attrs, act, wq):
    x, a_scale, a_zp, a_signed = act
    q, scale, zp, axis = wq
    if q.ndim != 2:
        raise Unsupported(f"quantized MatMul by a rank-{q.ndim} weight: 2-D weights only")
    if len(cx.shape(0)) < 2:
        raise Unsupported("1-D quantized MatMul is not supported yet")
    qi, ws, wz = _weight_params(cx, cx.node.input[1], q, scale, zp, q.shape[1], axis == 1)
    _fusable(cx, "qmatmul", _matmul_ins(cx, x, qi, ws, wz, None),
             _act_attrs(a_scale, a_zp, a_signed), cx.out())


def _gemm_qdq(cx, attrs, act, wq):
    x, a_scale, a_zp, a_signed = act
    q, scale, zp, axis = wq
    if float(attrs.get("alpha", 1.0)) != 1.0 or attrs.get("transA", 0) or q.ndim != 2:
        raise Unsupported("quantized Gemm with alpha != 1 or transA: not supported yet")
    tb = bool(attrs.get("transB", 0))
    if tb:  # [N, K] -> [K, N]; per-channel scales follow N (axis 0 here)
        q, axis = q.T, 1 - axis
    qi, ws, wz = _weight_params(cx, cx.node.input[1], q, scale, zp, q.shape[1], axis == 1)
    bias, at = None, _act_attrs(a_scale, a_zp, a_signed)
    if cx.has(2) and float(attrs.get("beta", 1.0)) == 1.0 and cx.const(2).size == q.shape[1]:
        bias, is_int = _qdq_bias(cx, 2, a_scale, scale, q.shape[1])
        if is_int:
            at["bias_int"] = True
    elif cx.has(2):
        c = np.asarray(cx.const(2, "C"), np.float32) * float(attrs.get("beta", 1.0))
        bias = np.broadcast_to(c.reshape(-1), (q.shape[1],))
    _fusable(cx, "qmatmul", _matmul_ins(cx, x, qi, ws, wz, bias), at, cx.out())


_QDQ = {"Conv": _conv_qdq, "MatMul": _matmul_qdq, "Gemm": _gemm_qdq}


def relu_aware(fallback):
    """Relu on a quantized op's float output: that op with relu set."""
    def convert(cx, attrs):
        st = _st(cx)
        fused = st.fusable.get(cx.tensor(0))
        if fused is not None and not fused[2].get("relu"):
            op, ins, at = fused
            _fusable(cx, op, ins, {**at, "relu": True}, cx.out())
        else:
            fallback(cx, attrs)
    return convert


# -- QOperator ----------------------------------------------------------------

def _act(cx, i_scale, i_zp, i_x=0):
    scale = float(_scalar(cx.const(i_scale, "scale"), "the activation scale"))
    zp, signed = _zp_info(cx, i_zp)
    return cx.tensor(i_x), scale, zp, signed


def _requant(cx, i_scale, i_zp):
    scale = float(_scalar(cx.const(i_scale, "y_scale"), "the output scale"))
    zp, signed = _zp_info(cx, i_zp)
    return {"out": "s8" if signed else "u8", "y_scale": scale, "y_zero": zp}, signed


def qlinear_conv(cx, attrs):
    x, a_scale, a_zp, a_signed = _act(cx, 1, 2)
    q = np.asarray(cx.const(3, "w"))
    g = int(attrs.get("group", 1))
    if g > 1 and q.ndim == 4 and q.shape[1] == 1 and (
            a_signed or q.shape[0] != g or _requant(cx, 6, 7)[1] or
            not _feeds_int8_convs(cx, cx.node.output[0])):
        # the int8 depthwise kernel takes u8 in and out, one filter a channel
        _qlinear_depthwise(cx, attrs, x, a_scale, a_zp, q)
        return
    qi, ws, wz = _weight_params(cx, cx.node.input[3], q, cx.const(4, "w_scale"),
                                cx.const(5, "w_zero_point"), q.shape[0], True)
    out, signed = _requant(cx, 6, 7)
    at, bias = {**_act_attrs(a_scale, a_zp, a_signed), **out}, None
    if cx.has(8):  # int32, scale a_scale * w_scale, added to the accumulator
        bias = np.asarray(cx.const(8, "B"), np.float64).reshape(-1)
        if np.abs(bias).max(initial=0) < 2 ** 24:
            at["bias_int"] = True
        else:
            bias = bias * np.float32(a_scale) * np.asarray(cx.const(4), np.float64).reshape(-1)
    _emit_qconv(cx, attrs, x, qi, ws, wz, bias, at, cx.shape(0), q.shape)
    _st(cx).signed[cx.out()] = signed


def _qlinear_depthwise(cx, attrs, x, a_scale, a_zp, q):
    """A depthwise QLinearConv the int8 depthwise kernel does not take (s8
    activations or output, several filters per channel) as the QDQ form's
    (_float_depthwise): dequantize, the float depthwise conv2d with the
    dequantized weights and bias, quantize."""
    ws = _per_channel(cx.const(4, "w_scale"), q.ndim)
    w = (q.astype(np.float32) - _per_channel(cx.const(5, "w_zero_point"), q.ndim)) * ws
    bias = None
    if cx.has(8):  # int32, scale a_scale * w_scale
        bias = (np.asarray(cx.const(8, "B"), np.float64).reshape(-1) * np.float32(a_scale)
                * np.asarray(ws, np.float64).reshape(-1))
    xf = cx.emit("dequantize", [x], {"scale": a_scale, "zero_point": float(a_zp)})
    y = _float_conv(cx, attrs, xf, w, 3, bias)
    out, signed = _requant(cx, 6, 7)
    cx.emit(f"quantize_{out['out']}", [y], {"scale": out["y_scale"],
                                            "zero_point": float(out["y_zero"])}, out=cx.out())
    _st(cx).signed[cx.out()] = signed


def qlinear_matmul(cx, attrs):
    x, a_scale, a_zp, a_signed = _act(cx, 1, 2)
    q = np.asarray(cx.const(3, "b"))
    if q.ndim != 2:
        raise Unsupported(f"QLinearMatMul by a rank-{q.ndim} b: 2-D constant b only")
    qi, ws, wz = _weight_params(cx, cx.node.input[3], q, cx.const(4, "b_scale"),
                                cx.const(5, "b_zero_point"), q.shape[1], True)
    out, signed = _requant(cx, 6, 7)
    cx.emit("qmatmul", _matmul_ins(cx, x, qi, ws, wz, None),
            {**_act_attrs(a_scale, a_zp, a_signed), **out}, out=cx.out())
    _st(cx).signed[cx.out()] = signed


def _runtime_zp(cx, i, x):
    """(attrs, extra inputs) of MatMulInteger / ConvInteger's a_zero_point."""
    st = _st(cx)
    if not cx.has(i):
        return {"a_zero": 0, "a_signed": st.signed.get(x, False)}, []
    if cx.is_const(i):
        zp, signed = _zp_info(cx, i)
        return {"a_zero": zp, "a_signed": signed}, []
    if cx.shape(i) not in ((), (1,)):
        raise Unsupported("a_zero_point per row is not supported yet")
    return {"a_signed": st.signed.get(x, False)}, [cx.tensor(i)]


def matmul_integer(cx, attrs):
    x = cx.tensor(0)
    q = np.asarray(cx.const(1, "B"))
    if q.ndim != 2 or len(cx.shape(0)) < 2:
        raise Unsupported("MatMulInteger: 2-D constant B and A of rank >= 2 only")
    n = q.shape[1]
    zp = cx.const(3) if cx.has(3) else np.zeros((), q.dtype)
    qi, ws, wz = _weight_params(cx, cx.node.input[1], q, np.ones(1, np.float32), zp, n, True)
    at, extra = _runtime_zp(cx, 2, x)
    ins = [x, cx.param(f"{cx.node.input[1]}:s8", qi.astype(np.float32)), ws, wz]
    if extra:
        ins += [cx.param(f"{cx.node.name or cx.out()}:nobias", np.zeros(n, np.float32))] + extra
    cx.emit("qmatmul", ins, {**at, "out": "acc"}, out=cx.out())
    if extra:
        _st(cx).acc_mm[cx.out()] = (ins, dict(at), n)


# quantize_dynamic's epilogue, MatMulInteger -> Cast -> Mul(a_scale * w_scale)
# -> Add(bias), folds into the qmatmul (scale_t, bias): two element-wise
# passes over each output fewer, and the same float32 operations (the
# product rounded once, then the bias added).

def scale_aware(fallback):
    """Mul of a MatMulInteger's accumulator (Cast to float is an alias) by
    a run-time [1] or [N] scale: the qmatmul with scale_t, output f32."""
    def convert(cx, attrs):
        st = _st(cx)
        for ai, si in ((0, 1), (1, 0)):
            hit = st.acc_mm.get(cx.tensor(ai)) if not cx.is_const(ai) else None
            if hit is None or cx.is_const(si):
                continue
            ins, at, n = hit
            if tuple(cx.shape(si)) not in ((), (1,), (n,)):
                continue
            ins = list(ins) + [cx.tensor(si)]
            at = {**at, "out": "f32"}
            cx.emit("qmatmul", ins, at, out=cx.out())
            st.scaled_mm[cx.out()] = (ins, at, n)
            return
        fallback(cx, attrs)
    return convert


def max_pool_aware(fallback):
    """MaxPool of a run-time DequantizeLinear output: the float pool,
    remembered so that a QuantizeLinear of it at the same scale and zero
    point becomes the pool on the quantized tensor (the DQ -> MaxPool -> Q
    of QDQ CNNs, ResNet's stem; ORT runs it on u8 too)."""
    def convert(cx, attrs):
        st = _st(cx)
        n = len(cx.ops)
        fallback(cx, attrs)
        a = cx.node.input[0]
        if a in st.deq and len(cx.ops) == n + 1 and cx.ops[-1]["op"] == "pool2d":
            st.dq_pool[cx.out()] = (st.deq[a], cx.ops[-1])
    return convert


def add_aware(fallback):
    """Add of a constant [N] bias to a scale_t qmatmul's output: its bias.
    Add of two run-time DequantizeLinear outputs of one shape: the float add,
    remembered so that a QuantizeLinear of it becomes one qadd."""
    def convert(cx, attrs):
        st = _st(cx)
        a, b = cx.node.input[0], cx.node.input[1]
        if a in st.deq and b in st.deq and tuple(cx.shape(0)) == tuple(cx.shape(1)):
            fallback(cx, attrs)
            st.dq_add[cx.out()] = (st.deq[a], st.deq[b])
            return
        for ai, bi in ((0, 1), (1, 0)):
            hit = st.scaled_mm.get(cx.tensor(ai)) if not cx.is_const(ai) else None
            if hit is None or not cx.is_const(bi):
                continue
            ins, at, n = hit
            b = np.asarray(cx.const(bi))
            if b.shape != (n,):
                continue
            ins = list(ins)
            ins[4] = cx.param(f"{cx.node.name or cx.out()}:bias", b.astype(np.float32))
            cx.emit("qmatmul", ins, at, out=cx.out())
            return
        fallback(cx, attrs)
    return convert


def conv_integer(cx, attrs):
    x = cx.tensor(0)
    q = np.asarray(cx.const(1, "w"))
    zp = cx.const(3) if cx.has(3) else np.zeros((), q.dtype)
    qi, ws, wz = _weight_params(cx, cx.node.input[1], q, np.ones(1, np.float32), zp,
                                q.shape[0], True)
    at, extra = _runtime_zp(cx, 2, x)
    if extra:
        _conv_integer_float(cx, attrs, x, q, zp, extra[0])
        return
    _emit_qconv(cx, attrs, x, qi, ws, wz, None, {**at, "out": "acc"}, cx.shape(0), q.shape)


def _conv_integer_float(cx, attrs, x, q, zp, x_zero):
    """ConvInteger whose x_zero_point is computed at run time
    (quantize_dynamic's DynamicQuantizeLinear before ViT's patch-embedding
    conv): qconv2d takes a constant activation zero point, so this one is a
    float conv2d of x - x_zero by the weight's integers minus their zero
    point. Each product is an integer float32 holds exactly (255 * 255 <
    2^24); a sum past 2^24 rounds by about 1e-7 of itself, where ORT's int32
    is exact."""
    centred = cx.emit("sub", [x, x_zero])
    _float_conv(cx, attrs, centred, q.astype(np.float32) - _per_channel(zp, q.ndim), 1, None,
                out=cx.out())


def _per_channel(v, ndim):
    """A per-tensor or per-output-channel value, shaped to broadcast over
    [OC, C/g, KH, KW] weights."""
    v = np.asarray(v, np.float32).reshape(-1)
    return v.reshape((-1,) + (1,) * (ndim - 1)) if v.size > 1 else v.reshape(())


def dynamic_quantize_linear(cx, attrs):
    outs = [o for o in cx.node.output]
    names = [o if o else cx.fresh(f"{outs[0]}:dq{k}") for k, o in enumerate(outs)]
    cx.emit("dynamic_quantize", [cx.tensor(0)], outputs=names)
    _st(cx).signed[names[0]] = False


def qlinear_add(cx, attrs):
    """com.microsoft QLinearAdd: dequantize both, add, quantize."""
    parts = []
    for ix, isc, izp in ((0, 1, 2), (3, 4, 5)):
        scale = float(_scalar(cx.const(isc, "scale"), "QLinearAdd's scales"))
        zp, _ = _zp_info(cx, izp)
        parts.append(cx.emit("dequantize", [cx.tensor(ix)],
                             {"scale": scale, "zero_point": float(zp)}))
    s = cx.emit("add", parts)
    out, signed = _requant(cx, 6, 7)
    cx.emit(f"quantize_{out['out']}", [s], {"scale": out["y_scale"],
                                            "zero_point": float(out["y_zero"])}, out=cx.out())
    _st(cx).signed[cx.out()] = signed


def qlinear_global_average_pool(cx, attrs):
    """com.microsoft QLinearGlobalAveragePool (NCHW): dequantize, average,
    quantize."""
    if attrs.get("channels_last", 0):
        raise Unsupported("channels_last=1 is not supported yet (NCHW only)")
    scale = float(_scalar(cx.const(1, "x_scale"), "the input scale"))
    zp, _ = _zp_info(cx, 2)
    d = cx.emit("dequantize", [cx.tensor(0)], {"scale": scale, "zero_point": float(zp)})
    p = cx.emit("global_pool2d", [d], {"mode": "avg"})
    out, signed = _requant(cx, 3, 4)
    cx.emit(f"quantize_{out['out']}", [p], {"scale": out["y_scale"],
                                            "zero_point": float(out["y_zero"])}, out=cx.out())
    _st(cx).signed[cx.out()] = signed


def qgemm(cx, attrs):
    """com.microsoft QGemm: A, a_scale, a_zp, B, b_scale, b_zp, [C (int32,
    scale a_scale * b_scale)], [y_scale, y_zp] (absent: float output)."""
    if float(attrs.get("alpha", 1.0)) != 1.0 or attrs.get("transA", 0):
        raise Unsupported("QGemm with alpha != 1 or transA: not supported yet")
    x, a_scale, a_zp, a_signed = _act(cx, 1, 2)
    q = np.asarray(cx.const(3, "B"))
    b_scale = np.asarray(cx.const(4, "b_scale"), np.float32)
    if attrs.get("transB", 0):
        q = q.T
    qi, ws, wz = _weight_params(cx, cx.node.input[3], q, b_scale, cx.const(5, "b_zero_point"),
                                q.shape[1], True)
    bias, at = None, _act_attrs(a_scale, a_zp, a_signed)
    if cx.has(6):  # int32, scale a_scale * b_scale, added to the accumulator
        bias = np.broadcast_to(np.asarray(cx.const(6, "C"), np.float64).reshape(-1),
                               (q.shape[1],))
        if np.abs(bias).max(initial=0) < 2 ** 24:
            at["bias_int"] = True
        else:
            bias = bias * np.float32(a_scale) * b_scale.astype(np.float64).reshape(-1)
    if cx.has(7):
        out, signed = _requant(cx, 7, 8)
        at.update(out)
        _st(cx).signed[cx.out()] = signed
    cx.emit("qmatmul", _matmul_ins(cx, x, qi, ws, wz, bias), at, out=cx.out())


# Ops of the com.microsoft domain these rules import (ORT's QOperator form).
MS_OPS = ("QLinearAdd", "QLinearGlobalAveragePool", "QGemm", "QLinearMul", "QLinearSigmoid",
          "QLinearLeakyRelu", "QLinearSoftmax", "QLinearAveragePool", "QLinearConcat",
          "QLinearWhere")  # the last seven: onnx/qlinear_ms.py
