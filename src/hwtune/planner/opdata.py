"""Per-op facts of a graph the cost model needs, in graph.ops order: type,
FLOPs, the bytes it reads and writes, its workload key (how op_profiles
names it), and whether the engine folds it at prepare (it never runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Set

from hwtune.graph.validate import BYTES_PER_ELEMENT


@dataclass(frozen=True)
class OpData:
    name: str
    type: str
    flops: int
    bytes: int        # inputs (params included) + outputs
    workload: str
    folded: bool = False  # computed once at prepare from params: costs a run nothing


def folded_ops(graph) -> Set[str]:
    """Names of the ops the engine folds at prepare (exec/fold.c's rule): an
    op with inputs that are all params or outputs of folded ops -- the
    fusion pass's batch-norm folding of CONV weights, weight reshapes."""
    constant = {t.name for t in graph.params}
    out: Set[str] = set()
    for i in graph.order or range(len(graph.ops)):  # producers first
        op = graph.ops[i]
        if op.inputs and all(n in constant for n in op.inputs):
            out.add(op.name)
            constant.update(op.outputs)
    return out


def op_data(graph) -> List[OpData]:
    from hwtune.graph import ops as oplib
    from hwtune.graph.info import op_flops
    from hwtune.engine.runner import workload_keys
    keys = workload_keys(graph)
    folded = folded_ops(graph)
    out = []
    for op, wk in zip(graph.ops, keys):
        names = list(op.inputs) + list(op.outputs)
        nbytes = sum(oplib.numel(graph.shapes[n]) for n in names) * BYTES_PER_ELEMENT
        out.append(OpData(op.name, op.op, op_flops(graph, op), int(nbytes), wk,
                          op.name in folded))
    return out


# Op types whose scaling the scan's micro-benchmarks measure directly: the
# serial fraction fitted on the scan's GEMM serves matmul, its element-wise
# ops serve the graph's element-wise ops of the same name.
SCAN_GEMM_TYPES = ("matmul",)
SCAN_ELTWISE = ("mul", "add", "sigmoid", "tanh", "relu")
