"""The graph execution engine's Python side: lowering a validated
hwtune.graph model into the C graph IR and its plan (the bindings live in
hwtune.native: graph, plan, engine), engine configurations and `hwtune run`."""

from hwtune.engine.lower import PlanSummary, lower_graph, plan_model

__all__ = ["PlanSummary", "lower_graph", "plan_model"]
