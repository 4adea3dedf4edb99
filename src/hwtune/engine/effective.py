"""The graph a config actually runs: the model with its CONVs' batch norms
and ReLUs fused (graph/passes/fuse.py), then the config's per-op precision
(op_precision: int8 / bf16 ops, hwtune.graph.passes.op_precision), then the config's
CONV layouts and template knobs (op_params) applied by the layout pass to
the CONVs still in fp32.

A stored config whose op_params no longer fit the model or the kernels (a
newer hwtune changed a knob's legal values, say) is stale: StaleConfig says
why, and callers fall back to the untuned graph with a notice instead of
failing the run."""

from __future__ import annotations

from hwtune.errors import UsageError


class StaleConfig(UsageError):
    """A stored config's op_params cannot be applied to this graph."""


def _with_precision(fused, cfg):
    op_precision = getattr(cfg, "op_precision", None)
    if not op_precision:
        return fused
    from hwtune.graph.passes.op_precision import PrecisionError, apply_precision
    try:
        return apply_precision(fused, op_precision)
    except PrecisionError as exc:
        raise StaleConfig(f"the config's op_precision does not apply to {fused.name}: {exc}"
                          ) from None


def effective_graph(graph, cfg):
    from hwtune.graph.passes.fuse import fuse_conv
    if not cfg.op_params:
        return _with_precision(fuse_conv(graph), cfg)
    # op_params give every CONV's layout: a model written blocked is taken
    # in its plain form (graph/passes/plain.py), as the tuner took it.
    from hwtune.graph.passes.plain import to_plain
    fused = _with_precision(fuse_conv(to_plain(graph)), cfg)
    # A CONV that runs in int8 is a qconv2d now: no layout knobs (the
    # others keep theirs: conv2d, and a training step's conv2d_grad_data).
    quantized = {op.name for op in fused.ops if op.op == "qconv2d"}
    op_params = {k: v for k, v in cfg.op_params.items() if k not in quantized}
    from hwtune.graph.passes.layout import apply_op_params
    try:
        run = apply_op_params(fused, op_params)
    except UsageError as exc:
        raise StaleConfig(f"the config's CONV parameters do not apply to {graph.name}: {exc}"
                          ) from None
    # The layout pass keeps op names: the absorbed ops stay absorbed.
    setattr(run, "_fused_ops", getattr(fused, "_fused_ops", {}))
    return run
