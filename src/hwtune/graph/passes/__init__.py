"""Graph rewrites: each pass takes a validated Graph and returns a new
validated Graph computing the same outputs (the input is never modified)."""

from hwtune.graph.passes.layout import apply_op_params

__all__ = ["apply_op_params"]
