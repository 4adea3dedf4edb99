"""The model-wide precision switch (issue #43): `hwtune run --precision bf16`
sets the `precision` attribute on every matmul whose b is a weight (param)
and on every dense (group 1) NCHW conv2d whose w is a weight; the bf16
kernels need that operand packed once. Other ops (depthwise and grouped
convs, NCHWc convs a tuned layout made, matmuls on two activations) stay
fp32. Op names never change."""

from collections import Counter
from typing import Dict, Tuple

from hwtune.graph.model import Graph
from hwtune.graph.passes.layout import ensure_validated, op_like, with_ops

PRECISIONS = ("fp32", "bf16")


def _takes_precision(op, params) -> bool:
    if len(op.inputs) < 2 or op.inputs[1] not in params:
        return False
    if op.op == "matmul":
        return True
    return (op.op == "conv2d" and (op.attrs.get("group") or 1) == 1
            and op.attrs.get("layout", "NCHW") == "NCHW")


def with_precision(graph: Graph, precision: str) -> Tuple[Graph, int]:
    """(graph with `precision` on every weight matmul and dense NCHW
    conv2d, how many were set); the graph itself, untouched, for fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return graph, 0
    params = {t.name for t in graph.params}
    ops, n = [], 0
    for op in graph.ops:
        if _takes_precision(op, params):
            ops.append(op_like(op.name, op.op, op.inputs, op.outputs,
                               dict(op.attrs, precision=precision), op))
            n += 1
        else:
            ops.append(op)
    if not n:
        return graph, 0
    return ensure_validated(with_ops(graph, ops)), n


def precision_counts(graph: Graph, precision: str) -> Dict[str, int]:
    """{op type: how many ops run in `precision`} (for the CLI's note)."""
    return dict(Counter(op.op for op in graph.ops if op.attrs.get("precision") == precision))
