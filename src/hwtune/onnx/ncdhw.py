"""ONNX window ops on NCDHW tensors (torchvision's video classifiers:
r3d_18, mc3_18, r2plus1d_18, S3D): Conv as conv3d (grouped: one grouped
conv2d over stacked frames, see grouped_conv3d); MaxPool / AveragePool
as two pool2d ops, one over each frame's H x W and one over time (a box
window is a product of intervals, so its max is the max over time of the
per-frame maxima, and its average, with the divisor ONNX gives a window --
every position, or only those inside the input, each a product of per-axis
counts -- the average over time of the per-frame averages); global pooling
as global_pool2d over [N, C, D*H, W]."""

from __future__ import annotations

import numpy as np

from hwtune.onnx.errors import Unsupported


def conv3d(cx, attrs):
    """Conv on NCDHW (torchvision's video classifiers): conv3d, constant
    weights (the engine packs them once per frame plan); group > 1 (MViT-V2's
    depthwise pooling convs) as grouped_conv3d."""
    group = int(attrs.get("group", 1))
    if not cx.is_const(1):
        raise Unsupported("3-D convolution with run-time weights is not supported yet")
    w = cx.shape(1)
    c, oc = cx.shape(0)[1], w[0]
    if group < 1 or c % group or oc % group or w[1] * group != c:
        raise Unsupported(f"group={group} does not fit {c} input / {oc} output channels with "
                          f"weights {list(w)}")
    strides = [int(v) for v in attrs.get("strides", [1, 1, 1])]
    dilations = [int(v) for v in attrs.get("dilations", [1, 1, 1])]
    if len(strides) != 3 or len(dilations) != 3:
        raise Unsupported(f"strides {strides} / dilations {dilations} of a 3-D convolution "
                          "(three each expected)")
    pads = _pads_nd(attrs, cx.shape(0)[2:], w[2:], strides, dilations)
    # A stride past the padded extent takes one window, as a stride of the
    # extent does (r3d_18's 1x1x1 stride-2 shortcut on its last single
    # frame); conv3d asks for at most that.
    strides = [min(s, x + pads[i] + pads[i + 3])
               for i, (s, x) in enumerate(zip(strides, cx.shape(0)[2:]))]
    out = {"stride": strides, "padding": pads[:3]}
    if pads[3:] != pads[:3]:
        out["padding_end"] = pads[3:]
    if dilations != [1, 1, 1]:
        out["dilation"] = dilations
    if group != 1:
        grouped_conv3d(cx, group, strides, dilations, pads)
        return
    ins = [cx.tensor(0), cx.tensor(1)] + ([cx.tensor(2)] if cx.has(2) else [])
    cx.emit("conv3d", ins, out, out=cx.out())


def grouped_conv3d(cx, group, strides, dilations, pads):
    """A grouped Conv on NCDHW as one grouped conv2d over every output
    frame's taps stacked along the channels, channel-major:

      xs[n * OD + t, c * KD + a] = xpad[n, c, t*sd + a*dd]   (an H x W frame)
      y[n, :, t] = conv2d(xs[n * OD + t], w.reshape(OC, C/g * KD, KH, KW), group)

    Group g's channels c in [g C/g, (g+1) C/g) stay contiguous as c * KD + a,
    and w[k, c, a] is w2[k, c * KD + a] by a plain reshape, so the engine's
    grouped conv2d (any count) runs it: a pad of D (when the time padding is
    not 0), one gather of the OD x KD frames the taps read (KD copies of
    the input), transposes to and from [N * OD, C * KD, H, W], no new
    kernel. Slower than a kernel of its own would be; exact as conv2d is."""
    n, c, d, h, wd = cx.shape(0)
    oc, _, kd, kh, kw = cx.shape(1)
    x = cx.tensor(0)
    front, back = pads[0], pads[3]
    if front or back:
        x = cx.emit("pad", [x], {"pads": [0, 0, front, 0, 0, 0, 0, back, 0, 0]})
    dp = d + front + back
    od = (dp - (kd - 1) * dilations[0] - 1) // strides[0] + 1
    if od < 1:
        raise Unsupported(f"kernel depth {kd} (dilation {dilations[0]}) does not fit the "
                          f"{d} frames padded by {front}, {back}")
    frames = [t * strides[0] + a * dilations[0] for t in range(od) for a in range(kd)]
    if frames != list(range(dp)):
        x = cx.emit("gather", [x], {"axis": 2, "indices": frames})
    # [N, C, OD, KD*H*W] -> [N, OD, C, KD*H*W] (a reshape alone when a
    # size-1 axis is all that moves)
    x = cx.emit("reshape", [x], {"shape": [n, c, od, kd * h * wd]})
    if od != 1 and c != 1:
        x = cx.emit("transpose", [x], {"perm": [0, 2, 1, 3]})
    x = cx.emit("reshape", [x], {"shape": [n * od, c * kd, h, wd]})
    w2 = cx.param(f"{cx.node.input[1]}:2d",
                  np.asarray(cx.const(1), np.float32).reshape(oc, -1, kh, kw))
    attrs2 = {"stride": strides[1:], "padding": [pads[1], pads[2]], "group": group}
    if [pads[4], pads[5]] != [pads[1], pads[2]]:
        attrs2["padding_end"] = [pads[4], pads[5]]
    if dilations[1:] != [1, 1]:
        attrs2["dilation"] = dilations[1:]
    ins = [x, w2] + ([cx.tensor(2)] if cx.has(2) else [])
    y = cx.emit("conv2d", ins, attrs2)
    oh, ow = cx.shapes[y][2:]
    y = cx.emit("reshape", [y], {"shape": [n, od, oc, oh * ow]})
    if od != 1 and oc != 1:
        y = cx.emit("transpose", [y], {"perm": [0, 2, 1, 3]})
    cx.emit("reshape", [y], {"shape": [n, oc, od, oh, ow]}, out=cx.out())


def _pads_nd(attrs, spatial, kernel, strides, dilations):
    """ONNX pads [begin..., end...] of an N-D window op, auto_pad resolved
    against the dilated kernel's extent as ONNX says."""
    nd = len(spatial)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * nd))]
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    else:  # SAME_UPPER / SAME_LOWER: output = ceil(input / stride)
        pads = [0] * (2 * nd)
        for i in range(nd):
            total = max((-(-spatial[i] // strides[i]) - 1) * strides[i]
                        + (kernel[i] - 1) * dilations[i] + 1 - spatial[i], 0)
            small = total // 2
            pads[i], pads[i + nd] = ((small, total - small) if auto == "SAME_UPPER"
                                     else (total - small, small))
    if len(pads) != 2 * nd or any(p < 0 for p in pads):
        raise Unsupported(f"pads {pads} ({nd}-D ops take {2 * nd} non-negative pads)")
    return pads


def _triple(attrs, key, default):
    v = [int(d) for d in attrs.get(key, default)]
    if len(v) != 3:
        raise Unsupported(f"{key} {v} on a 5-D input (three values expected)")
    return v


def global_pool3d(cx, mode):
    n, c, d, h, w = cx.shape(0)
    flat = cx.emit("reshape", [cx.tensor(0)], {"shape": [n, c, d * h, w]})
    y = cx.emit("global_pool2d", [flat], {"mode": mode})
    cx.emit("reshape", [y], {"shape": [n, c, 1, 1, 1]}, out=cx.out())


def pool3d(cx, attrs, mode):
    if len(cx.node.output) > 1 and cx.node.output[1]:
        raise Unsupported("the Indices output of MaxPool is not supported")
    if any(int(v) != 1 for v in attrs.get("dilations", [1, 1, 1])):
        raise Unsupported(f"dilations {list(attrs['dilations'])} (dilated pooling) are not "
                          "supported yet")
    n, c, d, h, w = cx.shape(0)
    kernel = _triple(attrs, "kernel_shape", [])
    strides = _triple(attrs, "strides", [1, 1, 1])
    pads = _pads_nd(attrs, (d, h, w), kernel, strides, [1, 1, 1])
    common = {"mode": mode, "ceil_mode": bool(attrs.get("ceil_mode", 0))}
    if mode == "avg":
        common["count_include_pad"] = bool(attrs.get("count_include_pad", 0))

    def pool2d(src, kern, stride, begin, end, out=None):
        a = dict(common, kernel=kern, stride=stride, padding=begin)
        if end != begin:
            a["padding_end"] = end
        return cx.emit("pool2d", [src], a, out=out)

    y, oh, ow = cx.tensor(0), h, w
    if kernel[1:] != [1, 1] or strides[1:] != [1, 1] or any(pads[i] for i in (1, 2, 4, 5)):
        y = cx.emit("reshape", [y], {"shape": [n, c * d, h, w]})
        y = pool2d(y, kernel[1:], strides[1:], pads[1:3], pads[4:6])
        oh, ow = cx.shapes[y][2:]
    if kernel[0] == 1 and strides[0] == 1 and pads[0] == pads[3] == 0:
        cx.emit("reshape", [y], {"shape": [n, c, d, oh, ow]}, out=cx.out())
        return
    y = cx.emit("reshape", [y], {"shape": [n, c, d, oh * ow]})
    y = pool2d(y, [kernel[0], 1], [strides[0], 1], [pads[0], 0], [pads[3], 0])
    cx.emit("reshape", [y], {"shape": [n, c, cx.shapes[y][2], oh, ow]}, out=cx.out())
