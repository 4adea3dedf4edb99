"""Resize of constants, evaluated at import (issue #41, held-out models:
DINOv2 resizes its position embeddings, a weight, bicubically to the
image's patch grid; the resize op runs nearest and linear only, and a cubic
Resize reached it as "mode cubic is not supported"). Cubic interpolation is
separable in ONNX: per resized axis, out = M @ in with M's rows the four
cubic weights (coefficient cubic_coeff_a) at the source coordinate, indices
clamped to the edge (exclude_outside=0). Other modes on constants stay with
the converter (the resize op)."""

from __future__ import annotations

import numpy as np

from hwtune.onnx.errors import Unsupported

_TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _source(x, n_in, n_out, scale, transform):
    if transform == "align_corners":
        return x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(x)
    if transform == "asymmetric":
        return x / scale
    if transform == "pytorch_half_pixel" and n_out == 1:
        return np.zeros_like(x)
    return (x + 0.5) / scale - 0.5


def cubic_matrix(n_in, n_out, scale, transform, a=-0.75):
    """[n_out, n_in] float64: the cubic interpolation of one axis."""
    src = _source(np.arange(n_out, dtype=np.float64), n_in, n_out, scale, transform)
    base = np.floor(src)
    t = src - base
    w = np.stack([((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                  ((a + 2) * t - (a + 3)) * t * t + 1,
                  ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                  ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a], axis=1)
    m = np.zeros((n_out, n_in))
    for k in range(4):
        idx = np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1)
        np.add.at(m, (np.arange(n_out), idx), w[:, k])
    return m


def folder(targets):
    """The fold of Resize; targets(cx, attrs, shape) -> (output dims, scale
    per dim or None) is the converter's own reading of scales and sizes."""
    def fold(values, attrs, cx):
        if cx.node.op_type != "Resize" or cx.opset < 11 or attrs.get("mode") != "cubic":
            raise Unsupported("only cubic Resize of constants folds")
        transform = attrs.get("coordinate_transformation_mode", "half_pixel")
        if transform not in _TRANSFORMS or attrs.get("exclude_outside", 0):
            raise Unsupported(f'cubic Resize with "{transform}", exclude_outside '
                              f'{attrs.get("exclude_outside", 0)}')
        x = np.asarray(values[0])
        out, scales = targets(cx, attrs, list(x.shape))
        if attrs.get("antialias", 0) and any(o < i for o, i in zip(out, x.shape)):
            raise Unsupported("cubic Resize antialias=1 when downsampling")
        y = x.astype(np.float64)
        for axis, (n_in, n_out, s) in enumerate(zip(x.shape, out, scales)):
            s = n_out / n_in if s is None else s
            if n_in == n_out and s == 1.0:
                continue
            m = cubic_matrix(n_in, n_out, s, transform, float(attrs.get("cubic_coeff_a", -0.75)))
            y = np.moveaxis(np.tensordot(m, np.moveaxis(y, axis, 0), axes=1), 0, axis)
        return [y.astype(x.dtype)]
    return fold
