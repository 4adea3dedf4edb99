"""A C engine opened for a validated model: the model is lowered into the
C graph (hwtune.engine.lower) and every param bound to the values
run_reference uses, so outputs are comparable; the binding itself
(hwtune.native.engine) knows only the C graph and the values it is given.

Inside a hwtune.native.engine.shared_lowering() scope, engines opened for
the same Graph object share one lowered C graph and one set of seeded
inputs."""

from typing import Mapping, Optional, Sequence

from hwtune.engine.lower import lower_graph
from hwtune.graph.model import Graph
from hwtune.graph.reference import init_inputs, init_params
from hwtune.native.engine import EngineHandle, shared


class NativeEngine(EngineHandle):
    """A prepared engine for one model and one configuration. scheduler is
    a name of the scheduler table (hwtune.native.sched; None: the default)."""

    def __init__(self, graph: Graph, executors: int = 1, threads: int = 1,
                 scheduler: Optional[str] = None, pin: bool = True, isa: int = -1,
                 op_threads: Optional[Mapping[str, int]] = None,
                 op_cost: Optional[Mapping[str, float]] = None,
                 op_priority: Optional[Mapping[str, float]] = None,
                 op_candidates: Optional[Mapping[str, Sequence[Sequence[float]]]] = None):
        self.graph = graph
        got = shared(graph, lambda: (lower_graph(graph), init_inputs(graph)))
        ng = got[0] if got is not None else lower_graph(graph)
        super().__init__(ng, [op.name for op in graph.ops], graph.shapes, graph.outputs,
                         lambda: init_params(graph),
                         (lambda: got[1]) if got is not None else (lambda: init_inputs(graph)),
                         own_graph=got is None, executors=executors, threads=threads,
                         scheduler=scheduler, pin=pin, isa=isa, op_threads=op_threads,
                         op_cost=op_cost, op_priority=op_priority, op_candidates=op_candidates)
