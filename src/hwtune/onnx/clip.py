"""Clip with one bound (issue #41, held-out models: Swin V2's
`torch.clamp(logit_scale, max=log(100))` exports as Clip with no min).
The clip op's missing bound defaults to -inf / +inf, which the lowered
graph stored for the C runner cannot hold (canonical JSON has no Infinity:
`hwtune run` failed with "Out of range float values are not JSON
compliant"). A one-sided Clip is therefore minimum(x, max) or maximum(x,
min) against a one-element param (the same values, NaN included); Clip of
constants folds at import (Swin V2's scale is a weight)."""

from __future__ import annotations

import numpy as np


def _bounds(cx, attrs, values=None):
    if cx.opset < 11:
        return attrs.get("min"), attrs.get("max")
    if values is None:
        values = [None, cx.const(1, "min"), cx.const(2, "max")]
    values = list(values) + [None] * (3 - len(values))
    lo, hi = values[1], values[2]
    return (None if lo is None else float(np.asarray(lo).reshape(())),
            None if hi is None else float(np.asarray(hi).reshape(())))


def fold_clip(values, attrs, cx):
    lo, hi = _bounds(cx, attrs, values)
    x = np.asarray(values[0])
    out = x
    if lo is not None:
        out = np.maximum(out, np.asarray(lo, x.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi, x.dtype))
    return [np.asarray(out, x.dtype)]


def one_sided(two_sided):
    """The Clip rule with a one-sided form; two_sided (rules.clip) keeps
    every other form."""
    def convert(cx, attrs):
        lo, hi = _bounds(cx, attrs)
        if (lo is None) == (hi is None) or (lo == 0 and hi is None):
            return two_sided(cx, attrs)
        op, bound = ("minimum", hi) if lo is None else ("maximum", lo)
        limit = cx.param(f"{cx.out()}:{'max' if lo is None else 'min'}",
                         np.asarray([bound], np.float32))
        cx.emit(op, [cx.tensor(0), limit], out=cx.out())
    return convert
