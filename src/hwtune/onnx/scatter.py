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
