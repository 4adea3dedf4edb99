"""Pooling: windowed max/avg (pool2d) and global max/avg (global_pool2d),
in NCHW or NCHW[x]c (channels are independent, so blocking only moves data).
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape
from hwtune.graph.ops.layout import from_nchwc, to_nchwc

_LAYOUT = Attr("layout", "str", "NCHW", choices=("NCHW", "NCHWc"),
               doc="NCHW [N,C,H,W] or NCHWc [N,C/x,H,W,x]")


def _spatial(shape, layout):
    rank = 4 if layout == "NCHW" else 5
    if len(shape) != rank:
        want = "[N, C, H, W]" if rank == 4 else "[N, C/x, H, W, x]"
        raise OpError(f"{layout} input must be {want}, got {show_shape(shape)}", "inputs[0]")
    return shape[2], shape[3]


def _out_len(size, k, s, p, ceil_mode):
    span = size + 2 * p - k
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
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], _stride(attrs), attrs["padding"]
    if 2 * ph > kh or 2 * pw > kw:
        raise OpError(f"padding {ph},{pw} must be at most half the window {kh}x{kw}",
                      "attrs.padding")
    if kh > h + 2 * ph or kw > w + 2 * pw:
        raise OpError(f"window {kh}x{kw} is larger than the padded input "
                      f"{h + 2 * ph}x{w + 2 * pw}", "attrs.kernel")
    oh = _out_len(h, kh, sh, ph, attrs["ceil_mode"])
    ow = _out_len(w, kw, sw, pw, attrs["ceil_mode"])
    shape = list(in_shapes[0])
    shape[2], shape[3] = oh, ow
    return [tuple(shape)]


def pool2d_nchw(x, mode, kernel, stride, padding, ceil_mode, count_include_pad):
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    oh = _out_len(h, kh, sh, ph, ceil_mode)
    ow = _out_len(w, kw, sw, pw, ceil_mode)
    # Room for the last (ceil-mode) window past the right padding.
    hp, wp = max(h + 2 * ph, (oh - 1) * sh + kh), max(w + 2 * pw, (ow - 1) * sw + kw)
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((n, c, hp, wp), fill, np.float64)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    inside = np.zeros((hp, wp))  # 1 where the divisor counts the position
    if count_include_pad:
        inside[:h + 2 * ph, :w + 2 * pw] = 1
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
            attrs["ceil_mode"], attrs["count_include_pad"])
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
        Attr("padding", "pair", (0, 0), minimum=0, doc="int or [ph, pw]"),
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
