"""What every graph pass builds with: a validated graph, a new op placed
where another stands in the model file, and a graph around other ops.
Shared by the layout, plain, fusion and precision passes."""

from typing import List, Optional

from hwtune.graph.model import Graph, Op


def ensure_validated(graph: Graph) -> Graph:
    """The graph, validated in place if it was not yet (shapes and order)."""
    if graph.ops and not graph.order:
        from hwtune.graph.validate import validate_graph
        validate_graph(graph)
    return graph


def op_like(name, kind, inputs, outputs, attrs, like: Optional[Op] = None) -> Op:
    """A new op, placed in the model file where `like` is (loc, origin)."""
    return Op(name, kind, list(inputs), list(outputs), dict(attrs),
              like.loc if like else "", like.origin if like else None)


def with_ops(graph: Graph, ops: List[Op]) -> Graph:
    """graph's inputs, params, outputs and metadata around other ops (not
    validated)."""
    return Graph(name=graph.name, inputs=list(graph.inputs), params=list(graph.params),
                 ops=ops, outputs=list(graph.outputs), seed=graph.seed,
                 description=graph.description, vars=dict(graph.vars), source=graph.source)
