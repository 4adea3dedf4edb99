"""Content keys for results.db rows that must be shared across files and
models: the graph hash and the op workload key."""

import hashlib
import json
import math
from typing import Any, Iterable, Mapping, Sequence


# JSON has no infinity. An infinite float (clip's default bounds, which the
# lowered graph spells out) is written as a number too large for a double:
# Python's json.loads and C's strtod (hwtune-run's reader) both read 1e999
# back as infinity. NaN has no such spelling and is still refused.
_INF = "\x00hwtune-inf\x00"


def _finite_or_marked(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return _INF if v > 0 else "-" + _INF
    if isinstance(v, dict):
        return {k: _finite_or_marked(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_or_marked(x) for x in v]
    return v


def canonical_json(doc: Any) -> str:
    """One spelling per value: sorted keys, no spaces, ASCII, no NaN,
    infinities as +-1e999 (a document without one is spelled as before)."""
    text = json.dumps(_finite_or_marked(doc), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)
    marked = json.dumps(_INF)
    return text.replace(json.dumps("-" + _INF), "-1e999").replace(marked, "1e999")


def graph_hash(expanded_doc: Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical expanded model.json (Graph.to_json())."""
    return hashlib.sha256(canonical_json(expanded_doc).encode("ascii")).hexdigest()


def workload_key(op_type: str, input_shapes: Iterable[Sequence[int]],
                 attrs: Mapping[str, Any]) -> str:
    """"gemm|[64,512];[512,512]|{"trans_b":false}": what an op costs
    depends on these alone, not on its name or the model around it."""
    shapes = ";".join(canonical_json([int(d) for d in s]) for s in input_shapes)
    return f"{op_type}|{shapes}|{canonical_json(dict(attrs or {}))}"


def hash_file(h, path) -> None:
    """Feed a file's bytes to the hashlib object h, a MiB at a time (a
    content key for files of any size); OSError when unreadable."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
