"""Summary statistics of a validated graph: what `hwtune model info` shows.

Definitions (they drive scheduling decisions, so they are spelled out):
  depth          ops on the longest dependency chain;
  width          most ops sharing one depth level (ASAP levels), an easy
                 lower bound on how many ops can run at once;
  critical FLOPs FLOPs on the heaviest dependency chain; total / critical is
                 the average parallelism an ideal scheduler could exploit.
"""

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Dict

from hwtune.graph import ops as oplib
from hwtune.graph.model import Graph
from hwtune.graph.validate import BYTES_PER_ELEMENT


@dataclass
class GraphInfo:
    name: str
    ops: int
    op_counts: Dict[str, int]
    flops: int
    input_bytes: int
    param_bytes: int
    activation_bytes: int
    depth: int
    width: int
    critical_flops: int
    parallelism: float

    def to_json(self):
        return asdict(self)


def op_flops(graph: Graph, op) -> int:
    spec = oplib.get(op.op)
    return int(spec.flops([graph.shapes[n] for n in op.inputs],
                          [graph.shapes[n] for n in op.outputs], op.resolved))


def graph_info(graph: Graph) -> GraphInfo:
    producer = {name: i for i, op in enumerate(graph.ops) for name in op.outputs}
    level = [0] * len(graph.ops)
    heavy = [0] * len(graph.ops)
    flops = [op_flops(graph, op) for op in graph.ops]
    for i in graph.order:
        preds = [producer[n] for n in graph.ops[i].inputs if n in producer]
        level[i] = 1 + max((level[p] for p in preds), default=0)
        heavy[i] = flops[i] + max((heavy[p] for p in preds), default=0)

    def nbytes(names):
        return sum(oplib.numel(graph.shapes[n]) for n in names) * BYTES_PER_ELEMENT

    total = sum(flops)
    critical = max(heavy, default=0)
    return GraphInfo(
        name=graph.name,
        ops=len(graph.ops),
        op_counts=dict(sorted(Counter(op.op for op in graph.ops).items())),
        flops=total,
        input_bytes=nbytes(t.name for t in graph.inputs),
        param_bytes=nbytes(t.name for t in graph.params),
        activation_bytes=nbytes(n for op in graph.ops for n in op.outputs),
        depth=max(level, default=0),
        width=max(Counter(level).values(), default=0),
        critical_flops=critical,
        parallelism=(total / critical) if critical else 1.0,
    )
