"""Typed errors of the engine's graph IR and planner (one-line messages)."""

from hwtune.errors import UsageError


class EngineGraphError(UsageError):
    """The C graph refused a tensor, op or attribute, or failed validation
    (unknown tensor, tensor produced twice or never, duplicate name, cycle)."""


class PlanError(UsageError):
    """A plan could not be built: bad options, or a graph that does not
    validate."""
