"""The graph a config actually runs: the model with the config's CONV
layouts and template knobs (op_params) applied by the layout pass.

A stored config whose op_params no longer fit the model or the kernels (a
newer hwtune changed a knob's legal values, say) is stale: StaleConfig says
why, and callers fall back to the untuned graph with a notice instead of
failing the run."""

from __future__ import annotations

from hwtune.errors import UsageError


class StaleConfig(UsageError):
    """A stored config's op_params cannot be applied to this graph."""


def effective_graph(graph, cfg):
    if not cfg.op_params:
        return graph
    from hwtune.graph.passes.layout import apply_op_params
    try:
        return apply_op_params(graph, cfg.op_params)
    except UsageError as exc:
        raise StaleConfig(f"the config's CONV parameters do not apply to {graph.name}: {exc}"
                          ) from None
