"""conv2d in NCHW or the blocked NCHW[x]c layout, with the CONV template's
tunable knobs (ic_bn, oc_bn, reg_n, unroll_ker, reg_h) as optional attributes.

The knobs and their legal values are declared once, by the C template next
to the code they shape (hwt_conv_knobs in kernels/conv/conv.c);
`conv2d_knobs` reads that declaration through the binding, so validation,
the engine and the tuner agree.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, register, show_shape
from hwtune.graph.ops.layout import from_nchwc, from_oihwio, to_nchwc

def _geometry(in_shapes, attrs):
    """(N, IC, H, W, OC, KH, KW, OH, OW, ic_bn, oc_bn) or OpError."""
    x, w = in_shapes[0], in_shapes[1]
    if attrs["layout"] == "NCHW":
        if len(x) != 4:
            raise OpError(f"NCHW conv2d input must be [N, C, H, W], got {show_shape(x)}",
                          "inputs[0]")
        if len(w) != 4:
            raise OpError(f"NCHW conv2d weights must be [OC, IC, KH, KW], got "
                          f"{show_shape(w)}", "inputs[1]")
        n, ic, h, wd = x
        oc, wic, kh, kw = w
        ic_bn, oc_bn = attrs["ic_bn"], attrs["oc_bn"]
    else:
        if len(x) != 5:
            raise OpError(f"NCHWc conv2d input must be [N, C/ic_bn, H, W, ic_bn], "
                          f"got {show_shape(x)}", "inputs[0]")
        if len(w) != 6:
            raise OpError(f"NCHWc conv2d weights must be [OC/oc_bn, IC/ic_bn, KH, KW, "
                          f"ic_bn, oc_bn], got {show_shape(w)}", "inputs[1]")
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
    (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (wd + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise OpError(f"kernel {kh}x{kw} does not fit input {h}x{wd} with padding "
                      f"{ph},{pw}", "inputs[1]")
    if ph >= kh or pw >= kw:
        raise OpError(f"padding {ph},{pw} must be smaller than the kernel {kh}x{kw}",
                      "attrs.padding")
    if sh > h + 2 * ph or sw > wd + 2 * pw:
        # Same output as a stride of the padded extent (one window), but the
        # template stages stride-wide rows: a stride of 2**30 asked for 77 GB.
        raise OpError(f"stride {sh},{sw} is larger than the padded input {h + 2 * ph}x"
                      f"{wd + 2 * pw}: any stride beyond it gives the same output; use at most "
                      "that", "attrs.stride")
    return n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn


def conv2d_knobs(in_shapes, attrs):
    """Legal values of each tunable knob for this conv (the search space)."""
    n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn = _geometry(in_shapes, attrs)
    from hwtune.native import conv as native_conv  # loads the C library on first use
    legal = native_conv.knobs((n, ic, h, wd), (oc, ic, kh, kw), stride=attrs["stride"],
                              pad=attrs["padding"])
    blocked = attrs["layout"] == "NCHWc"
    return {
        "ic_bn": [ic_bn] if blocked else legal["ic_bn"],
        "oc_bn": [oc_bn] if blocked else legal["oc_bn"],
        "reg_n": legal["reg_n"],
        "unroll_ker": [bool(v) for v in legal["unroll_ker"]],
        "reg_h": legal["reg_h"],
    }


# The CONV kernels index with 32-bit ints: an output past this is refused
# here, before the C template is asked for its knobs.
_MAX_ELEMENTS = 2 ** 31 - 1


def _infer(in_shapes, attrs, n_out):
    n, ic, h, wd, oc, kh, kw, oh, ow, ic_bn, oc_bn = _geometry(in_shapes, attrs)
    if n * oc * oh * ow > _MAX_ELEMENTS:
        raise OpError(f"the output [{n}, {oc}, {oh}, {ow}] has more than {_MAX_ELEMENTS} "
                      "elements", "inputs[1]")
    if len(in_shapes) == 3 and tuple(in_shapes[2]) != (oc,):
        raise OpError(f"bias must have shape [{oc}], got {show_shape(in_shapes[2])}",
                      "inputs[2]")
    legal = conv2d_knobs(in_shapes, attrs)
    for key in ("ic_bn", "oc_bn", "reg_n", "reg_h"):
        if attrs[key] is not None and attrs[key] not in legal[key]:
            raise OpError(f"{attrs[key]} is not legal here (legal: "
                          f"{', '.join(map(str, legal[key]))})", f"attrs.{key}")
    if attrs["layout"] == "NCHWc":
        return [(n, oc // oc_bn, oh, ow, oc_bn)]
    return [(n, oc, oh, ow)]


def conv2d_nchw(x, w, bias, stride, padding):
    """Direct convolution as one float64 matrix product over gathered
    patches (im2col): cheap to read, and BLAS keeps the reference fast."""
    (sh, sw), (ph, pw) = stride, padding
    n, ic, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    xp = np.zeros((n, ic, h + 2 * ph, wd + 2 * pw), np.float64)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    cols = np.empty((n, ic, kh, kw, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    out = w.reshape(oc, -1).astype(np.float64) @ cols.reshape(n, ic * kh * kw, oh * ow)
    out = out.reshape(n, oc, oh, ow)
    if bias is not None:
        out += bias.reshape(1, oc, 1, 1)
    return out.astype(np.float32)


def _ref(arrays, attrs, n_out):
    x, w = arrays[0], arrays[1]
    bias = arrays[2] if len(arrays) == 3 else None
    if attrs["layout"] == "NCHW":
        return [conv2d_nchw(x, w, bias, attrs["stride"], attrs["padding"])]
    oc_bn = w.shape[5]
    y = conv2d_nchw(from_nchwc(x), from_oihwio(w), bias, attrs["stride"], attrs["padding"])
    return [to_nchwc(y, oc_bn)]


def _flops(in_shapes, out_shapes, attrs):
    n, ic, h, wd, oc, kh, kw, oh, ow, _, _ = _geometry(in_shapes, attrs)
    bias = n * oc * oh * ow if len(in_shapes) == 3 else 0
    return 2 * n * oc * oh * ow * ic * kh * kw + bias


register(OpSpec(
    "conv2d", ("x", "w", "bias"), 2, 3, _infer, _ref, _flops,
    attrs=[
        Attr("stride", "pair", (1, 1), minimum=1, doc="int or [sh, sw]"),
        Attr("padding", "pair", (0, 0), minimum=0,
             doc="int or [ph, pw], zeros added on both sides"),
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
    ],
    doc="2-D convolution (+ bias[OC]); cross-correlation as in every DL framework"))
