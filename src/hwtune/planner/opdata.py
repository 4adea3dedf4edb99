"""Per-op facts of a graph the cost model needs, in graph.ops order: type,
FLOPs, the bytes it reads and writes, and its workload key (how
op_profiles names it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from hwtune.graph.validate import BYTES_PER_ELEMENT


@dataclass(frozen=True)
class OpData:
    name: str
    type: str
    flops: int
    bytes: int        # inputs (params included) + outputs
    workload: str


def op_data(graph) -> List[OpData]:
    from hwtune.graph import ops as oplib
    from hwtune.graph.info import op_flops
    from hwtune.engine.runner import workload_keys
    keys = workload_keys(graph)
    out = []
    for op, wk in zip(graph.ops, keys):
        names = list(op.inputs) + list(op.outputs)
        nbytes = sum(oplib.numel(graph.shapes[n]) for n in names) * BYTES_PER_ELEMENT
        out.append(OpData(op.name, op.op, op_flops(graph, op), int(nbytes), wk))
    return out


# Op types whose scaling the scan's micro-benchmarks measure directly: the
# serial fraction fitted on the scan's GEMM serves matmul, its element-wise
# ops serve the graph's element-wise ops of the same name.
SCAN_GEMM_TYPES = ("matmul",)
SCAN_ELTWISE = ("mul", "add", "sigmoid", "tanh", "relu")
