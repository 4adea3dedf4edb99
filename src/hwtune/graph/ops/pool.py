"""Pooling: windowed max/avg (pool2d) and global max/avg (global_pool2d),
in NCHW or NCHW[x]c (channels are independent, so blocking only moves data).
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape
from hwtune.graph.ops.conv import conv_pads
from hwtune.graph.ops.layout import from_nchwc, to_nchwc

_LAYOUT = Attr("layout", "str", "NCHW", choices=("NCHW", "NCHWc"),
               doc="NCHW [N,C,H,W] or NCHWc [N,C/x,H,W,x]")


def _spatial(shape, layout):
    rank = 4 if layout == "NCHW" else 5
    if len(shape) != rank:
        want = "[N, C, H, W]" if rank == 4 else "[N, C/x, H, W, x]"
        raise OpError(f"{layout} input must be {want}, got {show_shape(shape)}", "inputs[0]")
    return shape[2], shape[3]


def _out_len(size, k, s, p, ceil_mode, p_end=None):
    """Windows along one axis with p zeros before and p_end (default p) after."""
    span = size + p + (p if p_end is None else p_end) - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # A ceil-mode window must start inside the input or its left padding
    # (PyTorch's rule), otherwise it would pool padding only.
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _stride(attrs):
    return attrs["stride"] if attrs["stride"] is not None else attrs["kernel"]


def _infer(in_shapes, attrs, n_out):
    h, w = _spatial(in_shapes[0], attrs["layout"])
    (kh, kw), (sh, sw) = attrs["kernel"], _stride(attrs)
    pt, pl, pb, pr = conv_pads(attrs)
    for key, (ph, pw) in (("padding", (pt, pl)), ("padding_end", (pb, pr))):
        if 2 * ph > kh or 2 * pw > kw:
            raise OpError(f"{key} {ph},{pw} must be at most half the window {kh}x{kw}",
                          f"attrs.{key}")
    if kh > h + pt + pb or kw > w + pl + pr:
        raise OpError(f"window {kh}x{kw} is larger than the padded input "
                      f"{h + pt + pb}x{w + pl + pr}", "attrs.kernel")
    oh = _out_len(h, kh, sh, pt, attrs["ceil_mode"], pb)
    ow = _out_len(w, kw, sw, pl, attrs["ceil_mode"], pr)
    shape = list(in_shapes[0])
    shape[2], shape[3] = oh, ow
    return [tuple(shape)]


def pool2d_nchw(x, mode, kernel, stride, padding, ceil_mode, count_include_pad,
                padding_end=None):
    """padding: [top, left]; padding_end: [bottom, right] (None: the same)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    eh, ew = padding_end if padding_end is not None else (ph, pw)
    n, c, h, w = x.shape
    oh = _out_len(h, kh, sh, ph, ceil_mode, eh)
    ow = _out_len(w, kw, sw, pw, ceil_mode, ew)
    # Room for the last (ceil-mode) window past the right padding.
    hp, wp = max(h + ph + eh, (oh - 1) * sh + kh), max(w + pw + ew, (ow - 1) * sw + kw)
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((n, c, hp, wp), fill, np.float64)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    inside = np.zeros((hp, wp))  # 1 where the divisor counts the position
    if count_include_pad:
        inside[:h + ph + eh, :w + pw + ew] = 1
    else:
        inside[ph:ph + h, pw:pw + w] = 1
    acc = np.full((n, c, oh, ow), fill, np.float64)
    count = np.zeros((oh, ow))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i, i + sh * (oh - 1) + 1, sh)
            cols = slice(j, j + sw * (ow - 1) + 1, sw)
            if mode == "max":
                acc = np.maximum(acc, xp[:, :, rows, cols])
            else:
                acc += xp[:, :, rows, cols]
                count += inside[rows, cols]
    if mode == "avg":
        acc = acc / count
    return acc.astype(np.float32)


def _ref(arrays, attrs, n_out):
    x = arrays[0]
    args = (attrs["mode"], attrs["kernel"], _stride(attrs), attrs["padding"],
            attrs["ceil_mode"], attrs["count_include_pad"], attrs["padding_end"])
    if attrs["layout"] == "NCHW":
        return [pool2d_nchw(x, *args)]
    return [to_nchwc(pool2d_nchw(from_nchwc(x), *args), x.shape[4])]


register(OpSpec(
    "pool2d", ("x",), 1, 1, _infer, _ref,
    lambda ins, outs, attrs: numel(outs[0]) * attrs["kernel"][0] * attrs["kernel"][1],
    attrs=[
        Attr("mode", "str", choices=("max", "avg"), doc="max or avg"),
        Attr("kernel", "pair", minimum=1, doc="window, int or [kh, kw]"),
        Attr("stride", "pair", None, minimum=1, doc="default: the window size"),
        Attr("padding", "pair", (0, 0), minimum=0,
             doc="int or [ph, pw] (before only, when padding_end is given)"),
        Attr("padding_end", "pair", None, minimum=0,
             doc="int or [bottom, right] padding when it differs from padding"),
        Attr("ceil_mode", "bool", False, doc="round the output size up"),
        Attr("count_include_pad", "bool", False,
             doc="avg: divide by the full window including padding"),
        _LAYOUT,
    ],
    doc="windowed max or average pooling; padding never wins a max", layout="tolerant"))


def _global_infer(in_shapes, attrs, n_out):
    _spatial(in_shapes[0], attrs["layout"])
    shape = list(in_shapes[0])
    shape[2] = shape[3] = 1
    return [tuple(shape)]


def _global_ref(arrays, attrs, n_out):
    x = arrays[0].astype(np.float64)
    red = np.max if attrs["mode"] == "max" else np.mean
    return [red(x, axis=(2, 3), keepdims=True).astype(np.float32)]


register(OpSpec(
    "global_pool2d", ("x",), 1, 1, _global_infer, _global_ref,
    lambda ins, outs, attrs: numel(ins[0]),
    attrs=[Attr("mode", "str", choices=("max", "avg"), doc="max or avg"), _LAYOUT],
    doc="max or average over H and W; output keeps H = W = 1", layout="tolerant"))
