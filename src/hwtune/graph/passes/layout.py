"""The layout rewrite pass (NeoCPU section 3.2): run chosen CONVs in
NCHW[x]c and keep activations blocked through the ops that allow it, with a
layout_transform only where a consumer needs another layout.

Walks the graph once in topological order, tracking for every original
tensor the block it is held in (its "primary" copy) and the extra copies
made for consumers that need another block; a copy is made once per
(tensor, block) and shared by all its consumers. Weights of blocked CONVs go
through a layout_transform of the original param (the engine folds ops on
params at prepare, so it costs nothing per run). Joins (add/sum/..., channel
concat) run in the block most of their input elements already have, ties to
the first input (`layout_rules.join_block`); the other inputs are copied
into it. Graph outputs keep their names and NCHW shapes.

Names: a copy of tensor t in NCHW16c is tensor and op `t@nchw16c` (`t@nchw`
back to plain); weights `w@oihw8i16o`. Original op names never change, so
per-op settings (op_threads, op costs) still apply.
"""

from typing import Dict, List, Optional, Tuple

from hwtune.errors import UsageError
from hwtune.graph.errors import GraphError
from hwtune.graph.model import Graph, Op
from hwtune.graph.ops.conv import conv2d_knobs
from hwtune.graph.ops.train import grad_data_im2col_knobs, grad_data_knobs, grad_weight_knobs
from hwtune.graph.passes.layout_rules import (conv_blocks, layout_name, op_layout,
                                              weight_layout_name)
# The template knobs, as the C template declares them (hwt_conv_params).
from hwtune.graph.passes.rewrite import ensure_validated, op_like, with_ops
from hwtune.native.conv import KNOBS

_PARAM_KEYS = ("layout",) + KNOBS


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_op_params(graph: Graph, op_params: Dict[str, dict]) -> Dict[str, dict]:
    """Validate op_params against the graph; returns normalised copies
    (layout filled in). Raises UsageError with a one-line message."""
    if not isinstance(op_params, dict):
        raise UsageError(f"op_params must map conv op names to parameter dicts, "
                         f"got {type(op_params).__name__}")
    by_name = {op.name: op for op in graph.ops}
    out = {}
    for name, params in op_params.items():
        where = f'op_params["{name}"]'
        op = by_name.get(name)
        if op is None:
            raise UsageError(f'{where}: no op named "{name}" in {graph.name}')
        if op.op not in ("conv2d", "conv2d_grad_data", "conv2d_grad_weight"):
            raise UsageError(f'{where}: "{name}" is a {op.op}, only conv2d ops (and their '
                             "gradients) take layout params")
        if not isinstance(params, dict):
            raise UsageError(f"{where}: must be a dict of {', '.join(_PARAM_KEYS)}")
        if op.op == "conv2d" and int(op.resolved.get("group") or 1) > 1:
            raise UsageError(f'{where}: "{name}" is a grouped conv2d (group='
                             f'{op.resolved["group"]}), which runs on NCHW tensors without '
                             "template knobs")
        shapes = [graph.shapes[t] for t in op.inputs]
        if op.op == "conv2d_grad_weight":
            out[name] = _check_own_knobs(where, params, grad_weight_knobs(shapes, op.resolved))
            continue
        if op.op == "conv2d_grad_data" and grad_data_knobs(shapes, op.resolved) is None:
            out[name] = _check_own_knobs(where, params,
                                         grad_data_im2col_knobs(shapes, op.resolved))
            continue
        unknown = sorted(set(params) - set(_PARAM_KEYS))
        if unknown:
            raise UsageError(f'{where}: unknown key "{unknown[0]}" (known: '
                             f"{', '.join(_PARAM_KEYS)})")
        p = dict(params)
        if op.op == "conv2d_grad_data":
            # It runs as a forward CONV on NCHW tensors: its knobs only.
            p.setdefault("layout", "NCHW")
            legal = grad_data_knobs(shapes, op.resolved)
            if p["layout"] != "NCHW":
                raise UsageError(f'{where}: a conv2d_grad_data runs on NCHW tensors, got '
                                 f'layout {p["layout"]!r}')
        p.setdefault("layout", "NCHWc")
        if p["layout"] not in ("NCHW", "NCHWc"):
            raise UsageError(f'{where}: layout must be "NCHW" or "NCHWc", got {p["layout"]!r}')
        if p["layout"] == "NCHWc" and not ("ic_bn" in p and "oc_bn" in p):
            raise UsageError(f"{where}: an NCHWc conv needs ic_bn and oc_bn")
        if op.op == "conv2d":
            legal = conv2d_knobs(shapes, op.resolved)
        for key in KNOBS:
            if key not in p or p[key] is None:
                continue
            v = p[key]
            if key == "unroll_ker" and v in (0, 1) and _is_int(v):
                v = p[key] = bool(v)  # the C knob table lists it as 0/1
            ok_type = isinstance(v, bool) if key == "unroll_ker" else _is_int(v)
            if not ok_type or v not in legal[key]:
                shown = ", ".join(map(str, legal[key][:16])) + (
                    ", ..." if len(legal[key]) > 16 else "")
                raise UsageError(f"{where}: {key}={v!r} is not legal for this conv "
                                 f"(legal: {shown})")
        out[name] = p
    return out


def _check_own_knobs(where: str, params: dict, legal: dict) -> dict:
    """A CONV gradient's own knobs (declared by the C op: a weight gradient,
    an im2col data gradient): every given value legal."""
    for key, v in params.items():
        if key not in legal:
            raise UsageError(f'{where}: unknown key "{key}" (known: {", ".join(legal)})')
        if not _is_int(v) or v not in legal[key]:
            raise UsageError(f"{where}: {key}={v!r} is not legal for this gradient "
                             f"(legal: {', '.join(map(str, legal[key]))})")
    return dict(params)


class _Rewriter:
    def __init__(self, graph: Graph):
        self.g = graph
        self.ops: List[Op] = []
        self.held: Dict[str, Tuple[str, int]] = {}        # tensor -> (stored name, block)
        self.copies: Dict[Tuple[str, int], str] = {}      # (tensor, block) -> stored name
        self.weights: Dict[Tuple[str, int, int], str] = {}

    def emit(self, name, kind, inputs, outputs, attrs, like: Optional[Op] = None):
        self.ops.append(op_like(name, kind, inputs, outputs, attrs, like))

    def fetch(self, tensor: str, block: int) -> str:
        """The stored name of `tensor` in `block`, transforming once if needed."""
        stored, have = self.held.get(tensor, (tensor, 0))
        if have == block:
            return stored
        key = (tensor, block)
        if key not in self.copies:
            name = f"{tensor}@{layout_name(block).lower()}"
            self.emit(name, "layout_transform", [stored], [name],
                      {"src": layout_name(have), "dst": layout_name(block)})
            self.copies[key] = name
        return self.copies[key]

    def weight(self, w: str, ib: int, ob: int) -> str:
        key = (w, ib, ob)
        if key not in self.weights:
            dst = weight_layout_name(ib, ob)
            name = f"{w}@{dst.lower()}"
            self.emit(name, "layout_transform", [w], [name], {"src": "OIHW", "dst": dst})
            self.weights[key] = name
        return self.weights[key]

    def conv(self, op: Op, p: dict):
        ib, ob = conv_blocks(p)
        attrs = dict(op.attrs)
        attrs.update({k: p[k] for k in KNOBS if p.get(k) is not None})
        inputs = [self.fetch(op.inputs[0], ib)] + list(op.inputs[1:])
        if ib:
            attrs["layout"] = "NCHWc"
            inputs[1] = self.weight(op.inputs[1], ib, ob)
        if len(inputs) == 4:  # a fused residual is read in the output's layout
            inputs[3] = self.fetch(op.inputs[3], ob)
        return inputs, attrs, ob

    def other(self, op: Op):
        shapes = [self.g.shapes[t] for t in op.inputs]
        blocks = [self.held.get(t, (t, 0))[1] for t in op.inputs]
        rule = op_layout(op.op, op.resolved, blocks, shapes)
        inputs = [t if need is None else self.fetch(t, need)
                  for t, need in zip(op.inputs, rule.need)]
        return inputs, {**op.attrs, **rule.attrs}, rule.out

    def run(self, op_params: Dict[str, dict]) -> List[Op]:
        outputs = set(self.g.outputs)
        for i in self.g.order:
            op = self.g.ops[i]
            if op.name in op_params and op.op == "conv2d":
                inputs, attrs, block = self.conv(op, op_params[op.name])
            elif op.name in op_params:  # a CONV gradient: NCHW, knobs as attributes
                inputs, attrs, block = self.other(op)
                attrs.update({k: v for k, v in op_params[op.name].items()
                              if k != "layout" and v is not None})
            else:
                inputs, attrs, block = self.other(op)
            stored = [f"{t}@{layout_name(block).lower()}" if block and t in outputs else t
                      for t in op.outputs]
            self.emit(op.name, op.op, inputs, stored, attrs, like=op)
            for t, s in zip(op.outputs, stored):
                self.held[t] = (s, block)
                self.copies[(t, block)] = s
                if s != t:  # a graph output: its NCHW copy takes the original name
                    self.emit(f"{t}@nchw", "layout_transform", [s], [t],
                              {"src": layout_name(block), "dst": "NCHW"})
                    self.copies[(t, 0)] = t
        return self.ops


def apply_op_params(graph: Graph, op_params: Dict[str, dict]) -> Graph:
    """A new validated Graph computing the same outputs as `graph`, with the
    CONVs named in op_params run as those params say:
    {"layout": "NCHWc", "ic_bn": int, "oc_bn": int, "reg_n": int, "unroll_ker": bool}
    (layout defaults to NCHWc) or {"layout": "NCHW", ...knobs} (stays NCHW,
    knob attributes set). A graph with blocked ops is taken in its plain
    form (passes/plain.py). Unknown ops or illegal values raise UsageError."""
    from hwtune.graph.passes.plain import to_plain
    # A graph that is blocked already (a model written in NCHW[x]c) is
    # rewritten from its plain form: op_params say every CONV's layout.
    graph = to_plain(ensure_validated(graph))
    op_params = check_op_params(graph, op_params)
    ops = _Rewriter(graph).run(op_params)
    new = with_ops(graph, ops)
    from hwtune.graph.validate import validate_graph
    try:
        validate_graph(new)
    except GraphError as exc:
        # Every value was checked above; a failure here is a rule-table bug.
        raise UsageError(f"the layout pass built an invalid graph: {exc}") from None
    return new


def inserted_transforms(graph: Graph) -> List[Op]:
    """The activation layout_transform ops of a rewritten graph (weight
    transforms and transforms of params, folded at prepare, excluded)."""
    params = {t.name for t in graph.params}
    return [op for op in graph.ops if op.op == "layout_transform"
            and not op.attrs["src"].startswith("OIHW") and op.inputs[0] not in params]
