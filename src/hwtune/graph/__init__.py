"""model.json: the computation-graph format, its validation, its numpy
reference semantics and the generators of the bundled paper workloads."""

from hwtune.graph.errors import GraphError, Problem
from hwtune.graph.model import Graph, Op, Tensor, load_model
from hwtune.graph.reference import run_reference
from hwtune.graph.validate import Limits, validate_graph

__all__ = ["Graph", "GraphError", "Limits", "Op", "Problem", "Tensor", "load_model",
           "run_reference", "validate_graph"]
