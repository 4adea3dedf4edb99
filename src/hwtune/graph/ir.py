"""The in-memory graph: its tensors, ops and the graph itself, as
model.py parses them and validate.py checks them (a Graph's shapes and op
order are filled by validation)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

FORMAT_VERSION = 1
# In-memory key of a "file" tensor's init: its opened WeightsFile. Kept in
# the init dict so that every copy of a tensor's init (layout passes, one-op
# graphs of the tuners) still finds its values; never written to JSON.
WEIGHTS_KEY = "_weights"


@dataclass
class Tensor:
    """A graph input or parameter (float32, row-major)."""

    name: str
    shape: Tuple[int, ...]
    dtype: str = "float32"
    init: Dict[str, Any] = field(default_factory=dict)  # kind + its numbers
    loc: str = ""
    origin: Optional[str] = None

    def to_json(self):
        out = {"name": self.name, "shape": list(self.shape)}
        if self.dtype != "float32":
            out["dtype"] = self.dtype
        out.update({k: v for k, v in self.init.items() if k != WEIGHTS_KEY})
        return out


@dataclass
class Op:
    name: str
    op: str
    inputs: List[str]
    outputs: List[str]
    attrs: Dict[str, Any] = field(default_factory=dict)
    loc: str = ""
    origin: Optional[str] = None
    # Attributes with defaults filled and kinds normalised (set by validate).
    resolved: Optional[Dict[str, Any]] = field(default=None, repr=False)

    def to_json(self):
        out = {"name": self.name, "op": self.op, "inputs": list(self.inputs)}
        if self.outputs != [self.name]:
            out["outputs"] = list(self.outputs)
        if self.attrs:
            out["attrs"] = dict(self.attrs)
        return out


@dataclass
class Graph:
    name: str
    inputs: List[Tensor]
    params: List[Tensor]
    ops: List[Op]
    outputs: List[str]
    seed: int = 0
    description: str = ""
    vars: Dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None
    # Filled by validate(): tensor name -> shape, and a topological op order.
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    order: List[int] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        """The ordinary (expanded) model.json document."""
        doc = {"format_version": FORMAT_VERSION, "name": self.name}
        if self.description:
            doc["description"] = self.description
        doc["seed"] = self.seed
        weights = self.weights
        if weights is not None:
            doc["weights"] = weights.to_json()
        doc["inputs"] = [t.to_json() for t in self.inputs]
        doc["params"] = [t.to_json() for t in self.params]
        doc["ops"] = [o.to_json() for o in self.ops]
        doc["outputs"] = list(self.outputs)
        return doc

    @property
    def weights(self):
        """The WeightsFile the "file" tensors read from, or None."""
        for t in self.inputs + self.params:
            if WEIGHTS_KEY in t.init:
                return t.init[WEIGHTS_KEY]
        return None
