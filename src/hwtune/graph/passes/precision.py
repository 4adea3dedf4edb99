"""The model-wide precision switch (issue #43): `hwtune run --precision bf16`
sets matmul's `precision` attribute on every matmul whose b is a weight
(param); the bf16 kernel needs its b packed once. Other ops, and matmuls on
two activations, stay fp32. Op names never change."""

from typing import Tuple

from hwtune.graph.model import Graph
from hwtune.graph.passes.layout import ensure_validated, op_like, with_ops

PRECISIONS = ("fp32", "bf16")


def with_precision(graph: Graph, precision: str) -> Tuple[Graph, int]:
    """(graph with `precision` on every weight matmul, how many were set);
    the graph itself, untouched, for fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return graph, 0
    params = {t.name for t in graph.params}
    ops, n = [], 0
    for op in graph.ops:
        if op.op == "matmul" and len(op.inputs) >= 2 and op.inputs[1] in params:
            ops.append(op_like(op.name, op.op, op.inputs, op.outputs,
                               dict(op.attrs, precision=precision), op))
            n += 1
        else:
            ops.append(op)
    if not n:
        return graph, 0
    return ensure_validated(with_ops(graph, ops)), n
