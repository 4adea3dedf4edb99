"""conv3d: 3-D convolution on NCDHW tensors (torchvision's video
classifiers r3d_18, mc3_18, r2plus1d_18: Conv3d with [kt, kh, kw] kernels
such as 3x7x7, 3x3x3, 1x3x3 and 3x1x1).

x [N, C, D, H, W], w [OC, C, KD, KH, KW], bias [OC] (optional), residual
(optional, the output's shape: added after the bias, before the ReLU, as
the fusion pass (graph/passes/fuse.py) sets for r3d_18's conv -> add ->
relu); stride,
padding (front, top, left; `padding_end` the back, bottom, right when they
differ) and dilation per axis; y [N, OC, OD, OH, OW]. Dense only (group 1).
Cross-correlation as in every DL framework:

  y[n, k, t, i, j] = bias[k] + sum_{c, a, b, e} w[k, c, a, b, e] *
      xpad[n, c, t*sd + a*dd, i*sh + b*dh, j*sw + e*dw]

The engine (engine/ops/conv3d.c) runs each output frame as one 2-D
convolution of the KD input frames it reads stacked along the channels.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, check_bias, expect_rank, register, show_shape

# The engine's 2-D CONV kernels index with 32-bit ints.
_MAX_ELEMENTS = 2 ** 31 - 1


def conv3d_pads(attrs):
    """((front, top, left), (back, bottom, right)) zeros of a conv3d."""
    begin = tuple(attrs["padding"])
    end = tuple(attrs["padding_end"]) if attrs.get("padding_end") is not None else begin
    return begin, end


def _triple(attrs, key):
    v = attrs.get(key)
    if v is not None and len(v) != 3:
        raise OpError(f"must have 3 values (depth, height, width), got {list(v)}",
                      f"attrs.{key}")
    return v


def _geometry(in_shapes, attrs):
    """(N, C, (D, H, W), OC, (KD, KH, KW), (OD, OH, OW)) or OpError."""
    x, w = in_shapes[0], in_shapes[1]
    expect_rank(x, 5, "conv3d input must be [N, C, D, H, W]", "inputs[0]")
    expect_rank(w, 5, "conv3d weights must be [OC, C, KD, KH, KW]", "inputs[1]")
    for key in ("stride", "padding", "padding_end", "dilation"):
        _triple(attrs, key)
    n, c = x[0], x[1]
    oc, wc = w[0], w[1]
    if wc != c:
        raise OpError(f"weights {show_shape(w)} expect {wc} input channels, input has {c}",
                      "inputs[1]")
    begin, end = conv3d_pads(attrs)
    size, out = tuple(x[2:]), []
    for ax, name in enumerate(("depth", "height", "width")):
        k, s, d = w[2 + ax], attrs["stride"][ax], attrs["dilation"][ax]
        extent = (k - 1) * d + 1
        padded = size[ax] + begin[ax] + end[ax]
        if padded < extent:
            raise OpError(f"kernel {show_shape(w[2:])} does not fit input "
                          f"{show_shape(size)} along the {name}", "inputs[1]")
        if begin[ax] >= extent or end[ax] >= extent:
            raise OpError(f"padding {begin[ax]},{end[ax]} along the {name} must be smaller "
                          f"than the kernel's extent {extent}", "attrs.padding")
        if s > padded:
            raise OpError(f"stride {s} along the {name} is larger than the padded input "
                          f"{padded}: use at most that", "attrs.stride")
        out.append((padded - extent) // s + 1)
    return n, c, size, oc, tuple(w[2:]), tuple(out)


def _infer(in_shapes, attrs, n_out):
    n, c, (d, h, wd), oc, (kd, kh, kw), (od, oh, ow) = _geometry(in_shapes, attrs)
    check_bias(in_shapes, 2, oc)
    y = (n, oc, od, oh, ow)
    if len(in_shapes) == 4 and tuple(in_shapes[3]) != y:
        raise OpError(f"the residual must have the output's shape {show_shape(y)}, got "
                      f"{show_shape(in_shapes[3])}", "inputs[3]")
    # The engine's staged input: the KD frames one output frame reads.
    if n * oc * od * oh * ow > _MAX_ELEMENTS or c * kd * h * wd > _MAX_ELEMENTS:
        raise OpError(f"the output {show_shape(y)} or one frame's staged input is larger "
                      f"than {_MAX_ELEMENTS} elements", "inputs[0]")
    return [y]


def conv3d_ncdhw(x, w, bias, stride, padding, dilation=(1, 1, 1), padding_end=None):
    """The contract: direct 3-D cross-correlation summed in float64 as one
    matrix product over gathered patches (im2col), bias added, fp32 out."""
    padding_end = padding if padding_end is None else padding_end
    n, c = x.shape[:2]
    oc, _, *k = w.shape
    xp = np.pad(x.astype(np.float64),
                [(0, 0), (0, 0)] + [(padding[a], padding_end[a]) for a in range(3)])
    out = [(xp.shape[2 + a] - (k[a] - 1) * dilation[a] - 1) // stride[a] + 1 for a in range(3)]
    cols = np.empty((n, c, *k, *out), np.float64)
    for a in range(k[0]):
        for b in range(k[1]):
            for e in range(k[2]):
                s = [slice(i * dilation[ax], i * dilation[ax] + stride[ax] * (out[ax] - 1) + 1,
                           stride[ax]) for ax, i in enumerate((a, b, e))]
                cols[:, :, a, b, e] = xp[:, :, s[0], s[1], s[2]]
    y = w.reshape(oc, -1).astype(np.float64) @ cols.reshape(n, c * int(np.prod(k)), -1)
    if bias is not None:
        y += np.asarray(bias, np.float64).reshape(1, oc, 1)
    return y.reshape(n, oc, *out).astype(np.float32)


def _ref(arrays, attrs, n_out):
    x, w = arrays[0], arrays[1]
    bias = arrays[2] if len(arrays) >= 3 else None
    begin, end = conv3d_pads(attrs)
    y = conv3d_ncdhw(x, w, bias, attrs["stride"], begin, attrs["dilation"], end)
    if len(arrays) == 4:
        y = (y.astype(np.float64) + arrays[3]).astype(np.float32)
    if attrs["relu"]:
        y = np.maximum(y, np.float32(0))
    return [y]


def _flops(in_shapes, out_shapes, attrs):
    n, c, _, oc, (kd, kh, kw), (od, oh, ow) = _geometry(in_shapes, attrs)
    out = n * oc * od * oh * ow
    return 2 * out * c * kd * kh * kw + out * (min(len(in_shapes) - 2, 2) + bool(attrs["relu"]))


register(OpSpec(
    "conv3d", ("x", "w", "bias", "residual"), 2, 4, _infer, _ref, _flops,
    attrs=[
        Attr("stride", "ints", (1, 1, 1), minimum=1, doc="[sd, sh, sw]"),
        Attr("padding", "ints", (0, 0, 0), minimum=0,
             doc="[front, top, left] zeros (both sides unless padding_end is given)"),
        Attr("padding_end", "ints", None, minimum=0,
             doc="[back, bottom, right] zeros, when they differ from padding"),
        Attr("dilation", "ints", (1, 1, 1), minimum=1,
             doc="[dd, dh, dw]: kernel taps dd frames, dh rows and dw columns apart"),
        Attr("relu", "bool", False, doc="y = max(conv + bias (+ residual), 0)"),
    ],
    doc="3-D convolution on NCDHW (+ bias[OC]) (+ residual, a tensor of the output's "
        "shape) (then ReLU when relu), group 1; "
        "cross-correlation as in every DL framework"))
