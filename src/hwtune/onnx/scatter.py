"""ScatterND on run-time data (issue #41: BART's shift_tokens_right,
`shifted[:, 1:] = input_ids[:, :-1]`, exports as ScatterND over the model's
own input). With constant indices, which the exporters emit (they come from
shapes and ranges folded at import), the result is a row selection: each
output row (the data's leading indices.shape[-1] axes flattened) is either
the data's own row or one row of the updates, known at import. So the node
becomes reshape + concat + take over rows, with the row map as a constant;
the last write wins, as in ONNX's reference loop.
"""

from __future__ import annotations

import numpy as np

from hwtune.onnx.axes import normalize_axis
from hwtune.onnx.errors import Unsupported
from hwtune.onnx.intvalues import EXACT


def scatter_nd(cx, attrs):
    if attrs.get("reduction", "none") != "none":
        raise Unsupported(f'ScatterND reduction "{attrs["reduction"]}" of run-time data')
    idx = np.asarray(cx.const(1, "indices")).astype(np.int64)
    dshape, ushape = tuple(cx.shape(0)), tuple(cx.shape(2))
    k = int(idx.shape[-1])
    if k > len(dshape) or ushape != tuple(idx.shape[:-1]) + dshape[k:]:
        raise Unsupported(f"indices {list(idx.shape)} and updates {list(ushape)} do not fit "
                          f"data {list(dshape)}")
    rows = int(np.prod(dshape[:k], dtype=np.int64))
    width = int(np.prod(dshape[k:], dtype=np.int64))
    n_upd = int(np.prod(idx.shape[:-1], dtype=np.int64))
    if rows + n_upd - 1 > EXACT:
        raise Unsupported(f"{rows + n_upd} rows: row indices are exact in float32 only up to "
                          f"2^24 = {EXACT}")
    lead = np.asarray(dshape[:k], np.int64)
    flat_idx = idx.reshape(n_upd, k)
    if ((flat_idx < -lead) | (flat_idx >= lead)).any():
        raise Unsupported(f"an index is out of range for data {list(dshape)}")
    row_of = np.ravel_multi_index(tuple((flat_idx % lead).T), tuple(dshape[:k])) if k else \
        np.zeros(n_upd, np.int64)
    rowmap = np.arange(rows, dtype=np.int64)
    for j, r in enumerate(row_of.tolist()):  # in order: the last write wins
        rowmap[r] = rows + j
    data = cx.emit("reshape", [cx.tensor(0)], {"shape": [rows, width]})
    upd = cx.emit("reshape", [cx.tensor(2)], {"shape": [n_upd, width]})
    both = cx.emit("concat", [data, upd], {"axis": 0})
    picked = cx.emit("take", [both, cx.param(f"{cx.out()}:rows", rowmap)], {"axis": 0})
    cx.emit("reshape", [picked], {"shape": list(dshape)}, out=cx.out())


def _element_map(dshape, idx, axis):
    """Flat position in the data of each update (ONNX's ScatterElements:
    along axis the index, elsewhere the update's own coordinate)."""
    dim = dshape[axis]
    if ((idx < -dim) | (idx >= dim)).any():
        raise Unsupported(f"an index is out of range for data {list(dshape)} on axis {axis}")
    coords = list(np.indices(idx.shape))
    coords[axis] = np.where(idx < 0, idx + dim, idx)
    return np.ravel_multi_index(tuple(c.reshape(-1) for c in coords), tuple(dshape))


def fold_scatter_elements(values, attrs, cx):
    if attrs.get("reduction", "none") != "none":
        raise Unsupported(f'ScatterElements reduction "{attrs["reduction"]}"')
    out = np.array(values[0], copy=True)
    idx = np.asarray(values[1]).astype(np.int64)
    axis = normalize_axis(attrs.get("axis", 0), out.ndim)
    flat = out.reshape(-1)
    for j, p in enumerate(_element_map(out.shape, idx, axis).tolist()):
        flat[p] = np.asarray(values[2]).reshape(-1)[j]
    return [out]


def scatter_elements(cx, attrs):
    """ScatterElements on run-time data at constant indices (BART's
    shift_tokens_right as torch's dynamo exporter writes it, select_scatter):
    the data and the updates flattened and concatenated, then a take of the
    element map (the last write wins), reshaped back."""
    if attrs.get("reduction", "none") != "none":
        raise Unsupported(f'ScatterElements reduction "{attrs["reduction"]}" of run-time data')
    idx = np.asarray(cx.const(1, "indices")).astype(np.int64)
    dshape, ushape = tuple(cx.shape(0)), tuple(cx.shape(2))
    if ushape != tuple(idx.shape) or len(dshape) != idx.ndim:
        raise Unsupported(f"indices {list(idx.shape)} and updates {list(ushape)} do not fit "
                          f"data {list(dshape)}")
    axis = normalize_axis(attrs.get("axis", 0), len(dshape))
    n, m = int(np.prod(dshape, dtype=np.int64)), int(idx.size)
    if n + m - 1 > EXACT:
        raise Unsupported(f"{n + m} elements: indices are exact in float32 only up to "
                          f"2^24 = {EXACT}")
    emap = np.arange(n, dtype=np.int64)
    for j, p in enumerate(_element_map(dshape, idx, axis).tolist()):
        emap[p] = n + j
    data = cx.emit("reshape", [cx.tensor(0)], {"shape": [n]})
    upd = cx.emit("reshape", [cx.tensor(2)], {"shape": [m]})
    both = cx.emit("concat", [data, upd], {"axis": 0})
    picked = cx.emit("take", [both, cx.param(f"{cx.out()}:elements", emap)], {"axis": 0})
    cx.emit("reshape", [picked], {"shape": list(dshape)}, out=cx.out())
