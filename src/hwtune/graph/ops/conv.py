"""conv2d in NCHW or the blocked NCHW[x]c layout, with the CONV template's
tunable knobs (ic_bn, oc_bn, reg_n, unroll_ker, reg_h, winograd) as optional
attributes, and an optional epilogue: a residual input (4th, the output's shape, added
after the bias) and a ReLU (`relu`, clamped by `relu_max`) or another activation
(`act`: "silu" or "hard_swish", the element-wise ops of those names), which the
fusion pass (graph/passes/fuse.py) sets for ResNet's conv -> [add] -> relu,
MobileNetV2's clip(0, 6), EfficientNet's silu and MobileNetV3's hard_swish.
Any stride, dilation and zero padding (asymmetric through `padding_end`, as
TF-style "same" padding with an even kernel needs) runs on the template.

`group` > 1 splits the channels into that many independent convolutions
(weights [OC, C/group, KH, KW], output channel k reads input group
k // (OC/group)): depthwise when group == C (MobileNet, EfficientNet,
ConvNeXt; the engine's depthwise kernel, kernels/conv/dw*.c), otherwise
the dense template once per group (ResNeXt, RegNet). Grouped convs run on
NCHW tensors and take no template knobs (the layout pass and the CONV
search leave them alone).

The knobs and their legal values are declared once, by the C template next
to the code they shape (hwt_conv_knobs in kernels/conv/conv.c);
`conv2d_knobs` reads that declaration through the binding, so validation,
the engine and the tuner agree.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, check_bias, expect_rank, register, show_shape
from hwtune.graph.ops.eltwise import REFERENCES as ELTWISE_REFERENCES
from hwtune.graph.ops.layout import from_nchwc, from_oihwio, to_nchwc
from hwtune.graph.ops.linear import bf16_round
from hwtune.native.eltwise import TABLE

def conv_pads(attrs):
    """(top, left, bottom, right) zeros of a conv2d / pool2d / conv_transpose2d."""
    (pt, pl) = attrs["padding"]
    pb, pr = attrs["padding_end"] if attrs.get("padding_end") is not None else (pt, pl)
    return pt, pl, pb, pr


def _geometry(in_shapes, attrs):
    """(N, IC, H, W, OC, KH, KW, OH, OW, ic_bn, oc_bn) or OpError."""
    x, w = in_shapes[0], in_shapes[1]
    if attrs["layout"] == "NCHW":
        expect_rank(x, 4, "NCHW conv2d input must be [N, C, H, W]", "inputs[0]")
        expect_rank(w, 4, "NCHW conv2d weights must be [OC, IC, KH, KW]", "inputs[1]")
        n, ic, h, wd = x
        oc, wic, kh, kw = w
        ic_bn, oc_bn = attrs["ic_bn"], attrs["oc_bn"]
        group = attrs.get("group") or 1
        if group > 1:
            if ic % group or oc % group:
                raise OpError(f"group {group} must divide the {ic} input and {oc} output "
                              "channels", "attrs.group")
            if wic * group != ic:
                raise OpError(f"weights {show_shape(w)} of a group={group} conv must be "
                              f"[OC, C/group={ic // group}, KH, KW]", "inputs[1]")
            wic = ic
            knobs = [k for k in _KNOB_KEYS if attrs.get(k) is not None]
            if knobs:
                raise OpError(f"a grouped conv2d (group={group}) takes no template knobs, "
                              f"got {knobs[0]}", f"attrs.{knobs[0]}")
    elif (attrs.get("group") or 1) > 1:
        # Depthwise in NCHW[x]c (what the layout pass makes between blocked
        # CONVs): x [N, C/b, H, W, b], the weights as in NCHW, y x's block.
        expect_rank(x, 5, "NCHWc conv2d input must be [N, C/b, H, W, b]", "inputs[0]")
        expect_rank(w, 4, "a grouped NCHWc conv2d's weights must be [C, 1, KH, KW]",
                    "inputs[1]")
        n, icb, h, wd, ic_bn = x
        ic, group = icb * ic_bn, attrs["group"]
        oc, wic, kh, kw = w
        if group != ic or oc != ic or wic != 1:
            raise OpError(f"a grouped NCHWc conv2d must be depthwise with one filter per "
                          f"channel (group = C = OC = {ic}, weights [C, 1, KH, KW]), got "
                          f"group {group} and weights {show_shape(w)}", "attrs.group")
        knobs = [k for k in _KNOB_KEYS if attrs.get(k) is not None]
        if knobs:
            raise OpError(f"a grouped conv2d (group={group}) takes no template knobs, "
                          f"got {knobs[0]}", f"attrs.{knobs[0]}")
        wic, oc_bn = ic, ic_bn
    else:
        expect_rank(x, 5, "NCHWc conv2d input must be [N, C/ic_bn, H, W, ic_bn]", "inputs[0]")
        expect_rank(w, 6, "NCHWc conv2d weights must be [OC/oc_bn, IC/ic_bn, KH, KW, ic_bn, "
                    "oc_bn]", "inputs[1]")
        n, icb, h, wd, ic_bn = x
        ocb, wicb, kh, kw, wib, oc_bn = w
        if wib != ic_bn or wicb != icb:
            raise OpError(f"weights {show_shape(w)} do not match input blocks "
                          f"{icb} x {ic_bn}", "inputs[1]")
        for key, have in (("ic_bn", ic_bn), ("oc_bn", oc_bn)):
            if attrs[key] is not None and attrs[key] != have:
                raise OpError(f"{attrs[key]} disagrees with the tensor's block "
                              f"size {have}", f"attrs.{key}")
        ic, wic, oc = icb * ic_bn, wicb * wib, ocb * oc_bn
    if wic != ic:
        raise OpError(f"weights expect {wic} input channels, input has {ic}", "inputs[1]")
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    pt, pl, pb, pr = conv_pads(attrs)
    # The window's extent: a dilated kernel spans (k - 1) * d + 1 inputs.
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    hp, wp = h + pt + pb, wd + pl + pr
    oh = (hp - eh) // sh + 1
    ow = (wp - ew) // sw + 1
    what = f"kernel {kh}x{kw}" + (f" dilated {dh},{dw}" if (dh, dw) != (1, 1) else "")
    if oh < 1 or ow < 1:
        raise OpError(f"{what} does not fit input {h}x{wd} with padding "
                      f"{pt},{pl},{pb},{pr}", "inputs[1]")
    for key, pads in (("padding", (pt, pl)), ("padding_end", (pb, pr))):
        if attrs.get(key) is not None and (pads[0] >= eh or pads[1] >= ew):
            raise OpError(f"{key} {pads[0]},{pads[1]} must be smaller than the {what} "
                          f"(extent {eh}x{ew})", f"attrs.{key}")
    if ic * hp * wp > _MAX_ELEMENTS:
        # The template stages the padded input: a dilation of 2**30 makes
        # padding of that size legal, and the copy would not fit 32-bit ints.
        raise OpError(f"the padded input [{ic}, {hp}, {wp}] has more than {_MAX_ELEMENTS} "
                      "elements", "attrs.padding")
    if sh > hp or sw > wp:
        # Same output as a stride of the padded extent (one window), but the
        # template stages stride-wide rows: a stride of 2**30 asked for 77 GB.
        raise OpError(f"stride {sh},{sw} is larger than the padded input {hp}x"
                      f"{wp}: any stride beyond it gives the same output; use at most "
                      "that", "attrs.stride")
    return n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn


_KNOB_KEYS = ("ic_bn", "oc_bn", "reg_n", "unroll_ker", "reg_h", "winograd")


def conv_group(attrs) -> int:
    """The conv2d's group count (1: a dense conv)."""
    return int(attrs.get("group") or 1)


def conv2d_knobs(in_shapes, attrs):
    """Legal values of each tunable knob for this conv (the search space);
    a grouped conv has none (every list empty)."""
    n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn = _geometry(in_shapes, attrs)
    if conv_group(attrs) > 1:
        return {k: [] for k in _KNOB_KEYS}
    from hwtune.native import conv as native_conv  # loads the C library on first use
    pt, pl, pb, pr = conv_pads(attrs)
    legal = native_conv.knobs((n, ic, h, wd), (oc, ic, kh, kw), stride=attrs["stride"],
                              pad=(pt, pl), pad_end=(pb, pr), dilation=attrs["dilation"])
    blocked = attrs["layout"] == "NCHWc"
    return {
        "ic_bn": [ic_bn] if blocked else legal["ic_bn"],
        "oc_bn": [oc_bn] if blocked else legal["oc_bn"],
        "reg_n": legal["reg_n"],
        "unroll_ker": [bool(v) for v in legal["unroll_ker"]],
        "reg_h": legal["reg_h"],
        "winograd": legal["winograd"],
    }


# The CONV kernels index with 32-bit ints: an output past this is refused
# here, before the C template is asked for its knobs.
_MAX_ELEMENTS = 2 ** 31 - 1


def _infer(in_shapes, attrs, n_out):
    n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn = _geometry(in_shapes, attrs)
    if n * oc * oh * ow > _MAX_ELEMENTS:
        raise OpError(f"the output [{n}, {oc}, {oh}, {ow}] has more than {_MAX_ELEMENTS} "
                      "elements", "inputs[1]")
    check_bias(in_shapes, 2, oc)
    if attrs.get("relu_max") is not None:
        if not attrs["relu"] or conv_group(attrs) not in (1, ic) or attrs["relu_max"] <= 0:
            raise OpError("relu_max (ReLU6's 6) needs relu and a dense (group 1) or depthwise "
                          f"(group = C = {ic}) conv2d and must be positive", "attrs.relu_max")
    if attrs.get("act") is not None and attrs["relu"]:
        raise OpError(f"act {attrs['act']} replaces the ReLU: give one of act and relu",
                      "attrs.act")
    if attrs.get("precision") == "bf16" and (conv_group(attrs) != 1
                                             or attrs["layout"] != "NCHW"):
        raise OpError("precision bf16 needs a dense (group 1) NCHW conv2d", "attrs.precision")
    legal = conv2d_knobs(in_shapes, attrs)
    for key in ("ic_bn", "oc_bn", "reg_n", "reg_h", "winograd"):
        if attrs[key] is not None and attrs[key] not in legal[key]:
            raise OpError(f"{attrs[key]} is not legal here (legal: "
                          f"{', '.join(map(str, legal[key]))})", f"attrs.{key}")
    out = (n, oc // oc_bn, oh, ow, oc_bn) if attrs["layout"] == "NCHWc" else (n, oc, oh, ow)
    if len(in_shapes) == 4 and tuple(in_shapes[3]) != out:
        raise OpError(f"the residual must have the output's shape {show_shape(out)}, got "
                      f"{show_shape(in_shapes[3])}", "inputs[3]")
    return [out]


def conv2d_nchw(x, w, bias, stride, padding, dilation=(1, 1), padding_end=None, group=1):
    """Direct convolution as one float64 matrix product over gathered
    patches (im2col): cheap to read, and BLAS keeps the reference fast.
    padding: [top, left] zeros; padding_end: [bottom, right] (None: the
    same); tap (i, j) reads the padded input at (i * dh, j * dw). group:
    one batched product per channel group (w [OC, C/group, KH, KW])."""
    out = conv2d_nchw_f64(x, w, stride, padding, dilation, padding_end, group)
    if bias is not None:
        out += bias.reshape(1, w.shape[0], 1, 1)
    return out.astype(np.float32)


def conv2d_nchw_f64(x, w, stride, padding, dilation=(1, 1), padding_end=None, group=1):
    """conv2d_nchw's sums in float64, no bias: exact on the integers of
    the int8 ops' references (graph/ops/quant.py)."""
    (sh, sw), (pt, pl), (dh, dw) = stride, padding, dilation
    pb, pr = padding_end if padding_end is not None else (pt, pl)
    n, ic, h, wd = x.shape
    oc, _, kh, kw = w.shape
    group = group or 1
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    xp = np.zeros((n, ic, h + pt + pb, wd + pl + pr), np.float64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    cols = np.empty((n, ic, kh, kw, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            cols[:, :, i, j] = xp[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
    # [group, OC/group, C/group*KH*KW] @ [n, group, C/group*KH*KW, OH*OW]
    wg = w.reshape(group, oc // group, -1).astype(np.float64)
    out = wg @ cols.reshape(n, group, ic // group * kh * kw, oh * ow)
    return out.reshape(n, oc, oh, ow)


def _ref(arrays, attrs, n_out):
    x, w = arrays[0], arrays[1]
    if attrs.get("precision") == "bf16":
        # the contract: x and w rounded to bf16, exact products; the kernel's
        # fp32 sums differ from these float64 ones by its roundings
        x, w = bf16_round(x), bf16_round(w)
    bias = arrays[2] if len(arrays) >= 3 else None
    geo = (attrs["stride"], attrs["padding"], attrs["dilation"], attrs["padding_end"])
    if attrs["layout"] == "NCHW":
        y = conv2d_nchw(x, w, bias, *geo, group=conv_group(attrs))
    elif conv_group(attrs) > 1:
        y = to_nchwc(conv2d_nchw(from_nchwc(x), w, bias, *geo, group=conv_group(attrs)),
                     x.shape[4])
    else:
        y = to_nchwc(conv2d_nchw(from_nchwc(x), from_oihwio(w), bias, *geo), w.shape[5])
    if len(arrays) == 4:
        y = (y.astype(np.float64) + arrays[3]).astype(np.float32)
    if attrs["relu"]:
        y = np.maximum(y, np.float32(0))
    if attrs.get("relu_max") is not None:  # NaN kept, as clip's reference
        hi = np.float32(attrs["relu_max"])
        y = np.where(y > hi, hi, y)
    if attrs.get("act") is not None:  # the element-wise op's own reference
        y = ELTWISE_REFERENCES[attrs["act"]].fn(y).astype(np.float32)
    return [y]


def _flops(in_shapes, out_shapes, attrs):
    n, ic, h, wd, oc, kh, kw, oh, ow, _, _ = _geometry(in_shapes, attrs)
    # One per output element for the bias, the residual and the fused ReLU,
    # as the unfused add / relu ops count them.
    out = n * oc * oh * ow
    act = ACT_FLOPS[attrs["act"]] if attrs.get("act") is not None else 0
    epilogue = out * (min(len(in_shapes) - 2, 2) + bool(attrs["relu"])
                      + (attrs.get("relu_max") is not None) + act)
    return 2 * out * (ic // conv_group(attrs)) * kh * kw + epilogue


# The activations `act` names: the element-wise ops of the same name, each
# counted as that op counts its FLOPs per element.
ACTS = ("silu", "hard_swish")
ACT_FLOPS = {name: TABLE[name].flops for name in ACTS}

# Shared with conv_transpose2d (conv_transpose.py).
STRIDE = Attr("stride", "pair", (1, 1), minimum=1, doc="int or [sh, sw]")
DILATION = Attr("dilation", "pair", (1, 1), minimum=1,
                doc="int or [dh, dw]: kernel taps dh rows and dw columns apart")


register(OpSpec(
    "conv2d", ("x", "w", "bias", "residual"), 2, 4, _infer, _ref, _flops,
    attrs=[
        STRIDE,
        Attr("padding", "pair", (0, 0), minimum=0,
             doc="int or [ph, pw], zeros added on both sides (before only, when "
                 "padding_end is given)"),
        Attr("padding_end", "pair", None, minimum=0,
             doc="int or [bottom, right] zeros after the input, when they differ from "
                 "padding (asymmetric padding)"),
        DILATION,
        Attr("group", "int", 1, minimum=1,
             doc="channel groups: divides C and OC, weights [OC, C/group, KH, KW]; C "
                 "(depthwise, OC = C * multiplier) or any other count; NCHW only, no "
                 "template knobs"),
        Attr("layout", "str", "NCHW", choices=("NCHW", "NCHWc"),
             doc="NCHW: x [N,C,H,W], w [OC,IC,KH,KW]; NCHWc: x [N,C/ic_bn,H,W,ic_bn], "
                 "w [OC/oc_bn,IC/ic_bn,KH,KW,ic_bn,oc_bn], y [N,OC/oc_bn,OH,OW,oc_bn]"),
        Attr("ic_bn", "int", None, minimum=1, doc="input-channel block (divides IC)"),
        Attr("oc_bn", "int", None, minimum=1, doc="output-channel block (divides OC)"),
        Attr("reg_n", "int", None, minimum=1,
             doc="output columns per register block (up to 32; divides OW or is a power "
                 "of two)"),
        Attr("unroll_ker", "bool", None, doc="unroll the kernel-width loop"),
        Attr("reg_h", "int", None, minimum=1,
             doc="output rows per register block (1 or 2)"),
        Attr("winograd", "int", None, minimum=0,
             doc="0: the direct template; 2: Winograd F(2x2, 3x3) (3x3, stride 1 or 2, no "
                 "dilation; the other register knobs then unused)"),
        Attr("relu", "bool", False,
             doc="y = max(conv + bias, 0), applied while the output tile is in "
                 "registers (the fusion pass sets it for a conv2d followed by relu)"),
        Attr("relu_max", "float", None,
             doc="with relu, on a dense or depthwise conv2d: y = min(max(conv + bias, 0), "
                 "relu_max) (ReLU6: 6; the fusion pass sets it for such a conv2d followed by "
                 "clip(0, max))"),
        Attr("act", "str", None, choices=ACTS,
             doc="silu (x * sigmoid(x)) or hard_swish (x * clamp(x / 6 + 1/2, 0, 1)) after "
                 "the bias and the residual, as the element-wise op of that name computes "
                 "it; not with relu (the fusion pass sets it for a conv2d followed by that "
                 "op)"),
        Attr("precision", "str", "fp32", choices=("fp32", "bf16"),
             doc="bf16 (dense NCHW only): x and w rounded to bfloat16, products summed in "
                 "fp32 through the bf16 GEMM (AVX512_BF16 where the CPU has it, else "
                 "portable C; w must be a weight; the template knobs do not apply)"),
    ],
    doc="2-D convolution (+ bias[OC]) (+ residual, a tensor of the output's shape) "
        "(then ReLU when relu, or the activation act); cross-correlation as in every DL "
        "framework"))
