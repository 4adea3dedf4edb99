"""GatherND (issue #41: torch's default dynamo exporter writes the attention
mask of every Hugging Face model, `attention_mask[batch_idx, kv_idx]`, as a
GatherND of the run-time mask at indices built from shapes, which fold to a
constant at import).

With constant indices each output row (the data's trailing axes past
batch_dims + indices.shape[-1]) is one known row of the data: the node
becomes a reshape of the data to rows, a take of those rows, and a reshape
to the output's shape. Both constant: folded by the ONNX definition.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.errors import Unsupported
from hwtune.onnx.intvalues import EXACT


def _rows(dshape, idx, b):
    """Flat row (in data reshaped to [prod(dshape[:b + k]), rest]) of each
    output position, and the output shape."""
    k = int(idx.shape[-1])
    if b > len(dshape) or b > idx.ndim - 1 or b + k > len(dshape) or \
            tuple(idx.shape[:b]) != tuple(dshape[:b]):
        raise Unsupported(f"indices {list(idx.shape)} with batch_dims {b} do not fit data "
                          f"{list(dshape)}")
    lead = np.asarray(dshape[b:b + k], np.int64)
    if ((idx < -lead) | (idx >= lead)).any():
        raise Unsupported(f"an index is out of range for data {list(dshape)}")
    idx = np.where(idx < 0, idx + lead, idx)
    pos = np.indices(idx.shape[:-1]).reshape(idx.ndim - 1, -1)[:b]  # batch coordinates
    coords = tuple(pos) + tuple(idx.reshape(-1, k).T)
    flat = np.ravel_multi_index(coords, tuple(dshape[:b + k]))
    return flat, list(idx.shape[:-1]) + list(dshape[b + k:])


def fold_gather_nd(values, attrs, cx):
    data, idx = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64)
    b = int(attrs.get("batch_dims", 0))
    flat, out = _rows(data.shape, idx, b)
    k = int(idx.shape[-1])
    rows = data.reshape((-1,) + data.shape[b + k:])
    return [rows[flat].reshape(out)]


def gather_nd(cx, attrs):
    idx = np.asarray(cx.const(1, "indices")).astype(np.int64)
    dshape = tuple(cx.shape(0))
    b = int(attrs.get("batch_dims", 0))
    flat, out = _rows(dshape, idx, b)
    k = int(idx.shape[-1])
    n_rows = int(np.prod(dshape[:b + k], dtype=np.int64))
    if n_rows - 1 > EXACT:
        raise Unsupported(f"{n_rows} rows: row indices are exact in float32 only up to "
                          f"2^24 = {EXACT}")
    data = cx.emit("reshape", [cx.tensor(0)], {"shape": [n_rows] + list(dshape[b + k:]) or [1]})
    picked = cx.emit("take", [data, cx.param(f"{cx.out()}:rows", flat)], {"axis": 0})
    cx.emit("reshape", [picked], {"shape": out or [1]}, out=cx.out())
