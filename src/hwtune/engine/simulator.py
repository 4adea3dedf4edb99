"""The C engine's simulator (hwtune.native.simulate) opened for a validated
model: the model is lowered into the C graph once, and each run() replays
one configuration in virtual time from given op times."""

from hwtune.engine.lower import lower_graph
from hwtune.graph.model import Graph
from hwtune.native.simulate import SimulatorHandle


class Simulator(SimulatorHandle):
    """A virtual engine for one model (plan and folding once); run() as
    often as needed, each with its own config and op times (by op name,
    or arrays in graph.ops order)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        super().__init__(lower_graph(graph), [op.name for op in graph.ops])
