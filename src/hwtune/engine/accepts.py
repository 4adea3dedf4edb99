"""Whether the C engine takes a validated model: the query `hwtune` asks
after validation (hwtune.sources.load_any), so `model validate` cannot pass
a model that `run` then refuses, whatever the two sets of rules say.

The question is asked by lowering the model exactly as `run` lowers it:
the C graph's own checks are the answer. Validation (hwtune.graph) does
not ask it: it stands below the engine and knows nothing of C."""

from typing import Optional

from hwtune.errors import EngineGraphError, NativeError
from hwtune.graph.errors import GraphError, Problem
from hwtune.graph.model import Graph
from hwtune.graph.validate import located


def engine_refusal(graph: Graph) -> Optional[Problem]:
    """What the C engine's graph refuses in a validated graph, as a located
    problem; None when it takes it, or when there is no C library to ask
    (`run` reports that itself)."""
    try:
        from hwtune.engine import lower  # deferred: it loads the C library
    except ImportError:  # a build without the C library: nothing to ask
        return None
    try:
        lower.lower_graph(graph).close()
    except NativeError:
        return None  # no library, or out of memory: `run` reports it itself
    except EngineGraphError as exc:
        kind, key = getattr(exc, "subject", None) or (None, None)
        loc, origin = "model", None
        if kind == "op":
            loc, origin = graph.ops[key].loc, graph.ops[key].origin
        elif kind == "tensor":
            for t in graph.inputs + graph.params:
                if t.name == key:
                    loc, origin = f"{t.loc}.name", t.origin
            for op in graph.ops:
                if key in op.outputs:
                    loc, origin = f"{op.loc}.outputs[{op.outputs.index(key)}]", op.origin
        return Problem(located(loc, origin), f"the engine refuses it: {exc}")
    return None


def require_accepted(graph: Graph) -> Graph:
    """The graph, or GraphError with the engine's refusal located in the
    model file (the graph is left unvalidated, as validation leaves a graph
    it refuses)."""
    problem = engine_refusal(graph)
    if problem is not None:
        graph.shapes, graph.order = {}, []
        raise GraphError([problem], graph.source)
    return graph
