"""The lowered graph as a JSON document, for the stand-alone C runner.

Shape inference and attribute resolution live in Python, so `hwtune run`
stores this document in results.db (graphs.lowered_json) and
engine/standalone/ rebuilds the C graph from it with the same builder calls
lower_graph() makes: tensors in id order (inputs, params, then each op's
outputs), ops in model order, attributes encoded by lower.py's own encoder
(strings as character codes, unset attributes omitted). Inputs and params
carry their model "init" spec (zeros / ones / constant / uniform / normal
with scale, low, high) so the runner draws values of the same kind (not
the same values: it has its own generator); explicit "data" is left out.
Tensors with "init": "file" take their values from the model's weights file,
named by absolute path and sha256 in the document's "weights" (the runner
reads the same numbers as the Python engine).
"""

from typing import Any, Dict, List

from hwtune.engine.lower import _add_tensor, _encode_attr, _require_validated
from hwtune.engine.qlayout import hwc_links
from hwtune.graph.model import Graph


class _Recorder:
    """Stands in for NativeGraph so that lower.py's builder helpers write
    into a document: one encoder, so the C runner cannot drift from it."""

    def __init__(self):
        self.tensors: List[Dict[str, Any]] = []
        self.tensor_ids: Dict[str, int] = {}
        self.ops: List[Dict[str, Any]] = []

    def add_tensor(self, name: str, shape, kind: str) -> int:
        self.tensor_ids[name] = len(self.tensors)
        self.tensors.append({"name": name, "kind": kind, "shape": [int(d) for d in shape]})
        return self.tensor_ids[name]

    def set_ints(self, op: int, key: str, values) -> None:
        self.ops[op]["floats"].pop(key, None)
        self.ops[op]["ints"][key] = [int(v) for v in values]

    def set_floats(self, op: int, key: str, values) -> None:
        self.ops[op]["ints"].pop(key, None)
        self.ops[op]["floats"][key] = [float(v) for v in values]


_INIT_KEYS = ("init", "value", "scale", "low", "high")


def _init_spec(tensor) -> Dict[str, Any]:
    spec = getattr(tensor, "init", None) or {}
    return {k: spec[k] for k in _INIT_KEYS if k in spec}


def lowered_doc(graph: Graph) -> Dict[str, Any]:
    """{"tensors": [{name, kind, shape}], "ops": [{name, type, inputs,
    outputs, ints, floats}]} of a validated model; ids are list indices."""
    _require_validated(graph)
    rec = _Recorder()
    outputs = set(graph.outputs)
    hwc = hwc_links(graph)  # the engine-only attributes lower_graph() adds
    for kind, tensors in (("input", graph.inputs), ("param", graph.params)):
        for t in tensors:
            _add_tensor(rec, graph, t.name, kind)
            init = _init_spec(t)
            if init:
                rec.tensors[-1]["init"] = init
    for op in graph.ops:
        for name in op.outputs:
            _add_tensor(rec, graph, name, "output" if name in outputs else "activation")
    for op in graph.ops:
        rec.ops.append({"name": op.name, "type": op.op,
                        "inputs": [rec.tensor_ids[n] for n in op.inputs],
                        "outputs": [rec.tensor_ids[n] for n in op.outputs],
                        "ints": {}, "floats": {}})
        for key, value in sorted(op.resolved.items()):
            _encode_attr(rec, len(rec.ops) - 1, key, value)
        for key, value in sorted(hwc.get(op.name, {}).items()):
            _encode_attr(rec, len(rec.ops) - 1, key, value)
    doc = {"tensors": rec.tensors, "ops": rec.ops}
    weights = graph.weights
    if weights is not None:
        doc["weights"] = {"path": weights.path, "sha256": weights.sha256}
    return doc
