"""The graph execution engine: the C graph IR, its planner, and the lowering
of a validated hwtune.graph model into them."""

from hwtune.engine.errors import EngineGraphError, PlanError
from hwtune.engine.lower import PlanSummary, lower_graph, plan_model
from hwtune.engine.native_graph import REUSE_POLICIES, NativeGraph, Plan

__all__ = ["EngineGraphError", "NativeGraph", "Plan", "PlanError", "PlanSummary",
           "REUSE_POLICIES", "lower_graph", "plan_model"]
