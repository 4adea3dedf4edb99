"""resize: nearest or bilinear resampling of H and W of an NCHW tensor
(ONNX Resize / Upsample; torch's F.interpolate, FPN and U-Net decoders).

Each output coordinate maps to an input coordinate by the ONNX
coordinate_transformation_mode, computed in double from the scale (the
given scale factor, or out / in):
  half_pixel           (x + 0.5) / scale - 0.5
  pytorch_half_pixel   the same, 0 when the output has length 1
  align_corners        x (in - 1) / (out - 1), 0 when the output has length 1
  asymmetric           x / scale
nearest picks the input index by nearest_mode (round_prefer_floor: halves
down, round_prefer_ceil: halves up, floor, ceil), clamped to the input;
linear clamps the coordinate to [0, in - 1] and blends the two neighbours
x0 = floor, x1 = min(x0 + 1, in - 1) with weight w = x - x0 (a float):
first the two source rows, t = r0 + wy (r1 - r0), then along the row,
y = t[x0] + wx (t[x1] - t[x0]), each in float32; the engine's op
(engine/ops/resize.c) computes the same tables and the same roundings.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape

MODES = ("nearest", "linear")
TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coords(n_in, n_out, scale, transform):
    """Input coordinate of every output position (float64)."""
    x = np.arange(n_out, dtype=np.float64)
    if transform == "align_corners":
        return np.zeros(n_out) if n_out == 1 else x * (n_in - 1) / (n_out - 1)
    if transform == "asymmetric":
        return x / scale
    if transform == "pytorch_half_pixel" and n_out == 1:
        return np.zeros(n_out)
    return (x + 0.5) / scale - 0.5


def nearest_index(n_in, n_out, scale, transform, nearest_mode):
    c = source_coords(n_in, n_out, scale, transform)
    f = np.floor(c)
    if nearest_mode == "floor":
        i = f
    elif nearest_mode == "ceil":
        i = np.ceil(c)
    else:
        half = c - f == 0.5
        i = np.where(half, f if nearest_mode == "round_prefer_floor" else f + 1,
                     np.floor(c + 0.5))
    return np.clip(i, 0, n_in - 1).astype(np.int64)


def linear_taps(n_in, n_out, scale, transform):
    """(x0, x1, w): neighbours and the float32 weight of x1."""
    c = np.clip(source_coords(n_in, n_out, scale, transform), 0, n_in - 1)
    x0 = np.floor(c)
    w = (c - x0).astype(np.float32)
    x0 = x0.astype(np.int64)
    return x0, np.minimum(x0 + 1, n_in - 1), w


def _scales(in_shape, attrs):
    h, w = in_shape[2], in_shape[3]
    oh, ow = attrs["size"]
    sh = attrs["scale_h"] if attrs["scale_h"] is not None else oh / h
    sw = attrs["scale_w"] if attrs["scale_w"] is not None else ow / w
    return (h, oh, sh), (w, ow, sw)


def _infer(in_shapes, attrs, n_out):
    x = in_shapes[0]
    if len(x) != 4:
        raise OpError(f"input must be [N, C, H, W], got {show_shape(x)}", "inputs[0]")
    for key in ("scale_h", "scale_w"):
        if attrs[key] is not None and not attrs[key] > 0:
            raise OpError(f"must be positive, got {attrs[key]}", f"attrs.{key}")
    oh, ow = attrs["size"]
    return [(x[0], x[1], oh, ow)]


def resize_nchw(x, mode, size, transform, nearest_mode, scale_h=None, scale_w=None):
    attrs = {"size": size, "scale_h": scale_h, "scale_w": scale_w}
    (h, oh, sh), (w, ow, sw) = _scales(x.shape, attrs)
    x = np.asarray(x, np.float32)
    if mode == "nearest":
        iy = nearest_index(h, oh, sh, transform, nearest_mode)
        ix = nearest_index(w, ow, sw, transform, nearest_mode)
        return np.ascontiguousarray(x[:, :, iy][:, :, :, ix])
    y0, y1, wy = linear_taps(h, oh, sh, transform)
    x0, x1, wx = linear_taps(w, ow, sw, transform)
    r0, r1 = x[:, :, y0, :], x[:, :, y1, :]
    with np.errstate(invalid="ignore", over="ignore"):
        t = r0 + wy[:, None] * (r1 - r0)
        return np.ascontiguousarray(t[..., x0] + wx * (t[..., x1] - t[..., x0]))


def _ref(arrays, attrs, n_out):
    return [resize_nchw(arrays[0], attrs["mode"], attrs["size"],
                        attrs["coordinate_transformation_mode"], attrs["nearest_mode"],
                        attrs["scale_h"], attrs["scale_w"])]


register(OpSpec(
    "resize", ("x",), 1, 1, _infer, _ref,
    lambda ins, outs, attrs: numel(outs[0]) * (6 if attrs["mode"] == "linear" else 0),
    attrs=[
        Attr("mode", "str", "nearest", choices=MODES, doc="nearest or linear (bilinear)"),
        Attr("size", "pair", minimum=1, doc="output [H, W]"),
        Attr("scale_h", "float", None,
             doc="scale factor of H the coordinates use (default: out / in)"),
        Attr("scale_w", "float", None,
             doc="scale factor of W the coordinates use (default: out / in)"),
        Attr("coordinate_transformation_mode", "str", "half_pixel", choices=TRANSFORMS,
             doc="how an output coordinate maps to the input (ONNX's names)"),
        Attr("nearest_mode", "str", "round_prefer_floor", choices=NEAREST,
             doc="nearest: how a coordinate rounds to an index"),
    ],
    doc="nearest or bilinear resampling of H and W (ONNX Resize)"))
