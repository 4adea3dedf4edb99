"""Global layout search (NeoCPU section 3.3.2, Algorithm 2): choose one
scheme per CONV so that CONV times plus layout-transform times are minimal.

Each CONV has candidates (params, seconds) from its local search; ic_bn and
oc_bn fix the block it reads and writes (NCHW candidates: block 0). Between
CONVs, activations flow through the ops that keep a layout and joins that
force one; `hwtune.graph.passes.layout_rules` decides both, the same table the
rewrite pass uses, so the cost below is exactly the transforms the pass
inserts for the chosen params.

The DP, exactly: walk the ops in the graph's topological order; a state is
the layout of every *live* activation (produced, still to be read): its
block and the set of other blocks a copy was already made in (a copy is
shared by every consumer that needs that block, so it is paid once). A CONV
branches on its candidates (paying its time and, if its input is not yet
held in ic_bn, one transform); other ops are deterministic given the state.
States reaching the same live layouts are merged, keeping the cheapest. The
future cost depends only on the live layouts, so the result is the optimum
over all candidate combinations: for a chain the state is one tensor and
this is the paper's list DP; a ResNet shortcut keeps two tensors live; an
inception block keeps the block input and the open branches live, and the
concat (a join) collapses them back to one. Graphs whose live sets grow
large (the paper's SSD case) are cut to the `max_states` cheapest states,
which makes the result approximate: the plan then says exact=False.

Transforms of params (weights, or a param operand of a join) are not
counted: the engine folds ops on params once at prepare.

Layout-tolerant ops (pooling, batch_norm) run in whatever block their input
arrives in, at a cost that depends on it (a 2x2 average pool on 14-wide NCHW
rows is a different loop from the same pool over 16-channel vectors), so an
optional op_cost(op, input shapes, block) prices each at the block the
state gives it, and a CONV choice that makes the pool after it slower pays
for it. A fused residual (conv2d's fourth input) is read in the CONV's
output block, as the rewrite pass does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from hwtune.errors import HwtuneError, UsageError
from hwtune.graph.model import Graph
from hwtune.graph.passes.layout import (apply_op_params, check_op_params, ensure_validated,
                                        inserted_transforms)
from hwtune.graph.passes.layout_rules import conv_blocks, is_tolerant, op_layout

Shape = Tuple[int, ...]
TransformCost = Callable[[Shape, int, int], float]
# op_cost(op, logical NCHW shapes of its inputs, block it runs in) -> seconds
OpCost = Callable[[object, Sequence[Shape], int], float]
TUNER = "layout-transform"
OP_TUNER = "layout-op"

# With the conv tuner's 4 layout candidates per CONV the bundled models
# peak at 36 (resnet18), 81 (inception_small), 144 (inception_large) and
# 224 (pathnet_large) live-layout states, planned in 0.02-0.13 s (random
# 4-candidate sets, measured on the 2-core dev machine); 50,000 leaves room
# for far wider graphs before the cut makes a plan approximate.
MAX_STATES = 50_000


@dataclass
class LayoutPlan:
    """op_params: conv op name -> params for `apply_op_params`; est_seconds:
    the CONV times plus transform times the search minimised."""
    op_params: Dict[str, dict]
    est_seconds: float
    conv_seconds: float = 0.0
    transform_seconds: float = 0.0
    # (tensor, logical NCHW shape, src block, dst block) of every activation
    # transform the chosen params need; block 0 = NCHW.
    transforms: List[Tuple[str, Shape, int, int]] = field(default_factory=list)
    op_seconds: float = 0.0  # the layout-tolerant ops' time at their chosen blocks
    exact: bool = True
    max_live_states: int = 0
    conv_times: Dict[str, float] = field(default_factory=dict)  # chosen candidate's seconds


def _options(graph: Graph, conv_candidates) -> Dict[str, List[Tuple[int, int, float, dict]]]:
    """conv -> [(ic block, oc block, seconds, params)]: per block pair only
    the fastest candidate (the others can never be part of an optimum)."""
    if not isinstance(conv_candidates, dict):
        raise UsageError("conv_candidates must map conv op names to [(params, seconds)]")
    out = {}
    for name, cands in conv_candidates.items():
        if not cands:
            raise UsageError(f'conv_candidates["{name}"]: no candidates')
        best: Dict[Tuple[int, int], Tuple[float, dict]] = {}
        for j, cand in enumerate(cands):
            try:
                params, secs = cand
            except (TypeError, ValueError):
                raise UsageError(f'conv_candidates["{name}"][{j}]: must be a (params, seconds) '
                                 f"pair") from None
            if (isinstance(secs, bool) or not isinstance(secs, (int, float))
                    or not secs >= 0 or math.isinf(secs)):
                raise UsageError(f'conv_candidates["{name}"][{j}]: seconds must be a finite '
                                 f"number >= 0, got {secs!r}")
            params = check_op_params(graph, {name: params})[name]
            blocks = conv_blocks(params)
            if blocks not in best or secs < best[blocks][0]:
                best[blocks] = (float(secs), params)
        out[name] = [(ib, ob, s, p) for (ib, ob), (s, p) in best.items()]
    return out


class _Walk:
    """One op applied to one state (live: tensor -> (block, copies))."""

    def __init__(self, graph: Graph, tc: TransformCost):
        self.g = graph
        self.tc = tc
        self.outputs = set(graph.outputs)
        self.last: Dict[str, int] = {}
        for step, i in enumerate(graph.order):
            for t in graph.ops[i].inputs:
                self.last[t] = step

    def need(self, live, t: str, block: int) -> float:
        if t not in live:
            return 0.0  # a param: its transform is folded at prepare
        have, copies = live[t]
        if have == block or block in copies:
            return 0.0
        live[t] = (have, copies | {block})
        return self.tc(self.g.shapes[t], have, block)

    def produce(self, live, op, block: int, step: int) -> float:
        cost = 0.0
        for t in op.outputs:
            copies = frozenset()
            if block and t in self.outputs:  # graph outputs leave in NCHW
                cost += self.tc(self.g.shapes[t], block, 0)
                copies = frozenset({0})
            if self.last.get(t, -1) > step:
                live[t] = (block, copies)
        for t in set(op.inputs):
            if self.last.get(t) == step:
                live.pop(t, None)
        return cost


def _op_coster(graph: Graph, op_cost: Optional[OpCost]):
    """(op name, block) -> seconds of graph's layout-tolerant op of that
    name, memoised; 0 for other ops or without op_cost. By name, so a
    rewritten graph's op (inputs renamed by the pass) finds its original."""
    memo: Dict[Tuple[str, int], float] = {}
    by_name = {op.name: op for op in graph.ops}
    # Ops on params only (the fusion pass's batch norm of CONV weights) are
    # folded once at prepare: they cost nothing per run.
    const = {t.name for t in graph.params}
    for i in graph.order:
        op = graph.ops[i]
        if op.inputs and all(t in const for t in op.inputs):
            const.update(op.outputs)

    def oc(name: str, block: int) -> float:
        op = by_name.get(name)
        if (op_cost is None or op is None or not is_tolerant(op.op) or op.inputs[0] in const
                or len(graph.shapes[op.inputs[0]]) != 4):
            return 0.0
        key = (name, block)
        if key not in memo:
            memo[key] = float(op_cost(op, [tuple(graph.shapes[t]) for t in op.inputs], block))
        return memo[key]

    return oc


def choose_layouts(graph: Graph, conv_candidates: Dict[str, Sequence[Tuple[dict, float]]],
                   transform_cost: TransformCost, *, op_cost: Optional[OpCost] = None,
                   max_states: int = MAX_STATES) -> LayoutPlan:
    """Algorithm 2 over the whole graph (see the module doc for the exact
    DP). transform_cost(logical NCHW shape, src block, dst block) -> seconds,
    block 0 = NCHW; op_cost prices layout-tolerant ops per block (None:
    they cost nothing, as in the paper). CONVs without candidates stay as
    the graph has them and their time is not counted."""
    from hwtune.graph.passes.plain import to_plain
    graph = to_plain(ensure_validated(graph))
    options = _options(graph, conv_candidates)
    memo: Dict[Tuple[Shape, int, int], float] = {}
    oc = _op_coster(graph, op_cost)

    def tc(shape, src, dst):
        key = (tuple(shape), src, dst)
        if key not in memo:
            memo[key] = float(transform_cost(tuple(shape), src, dst))
        return memo[key]

    walk = _Walk(graph, tc)
    start = {t.name: (0, frozenset()) for t in graph.inputs if t.name in walk.last}
    # state key (sorted live items) -> (cost, choices: ((conv, option index), ...))
    states = {tuple(sorted(start.items())): (0.0, ())}
    exact, peak = True, 1
    for step, i in enumerate(graph.order):
        op = graph.ops[i]
        nxt: Dict[tuple, Tuple[float, tuple]] = {}

        def keep(live, cost, choices):
            key = tuple(sorted(live.items()))
            if key not in nxt or cost < nxt[key][0]:
                nxt[key] = (cost, choices)

        for key, (cost, choices) in states.items():
            if op.name in options:
                for k, (ib, ob, secs, _) in enumerate(options[op.name]):
                    live = dict(key)
                    c = cost + secs + walk.need(live, op.inputs[0], ib)
                    if len(op.inputs) == 4:  # a fused residual, read in the output's block
                        c += walk.need(live, op.inputs[3], ob)
                    c += walk.produce(live, op, ob, step)
                    keep(live, c, choices + ((op.name, k),))
            else:
                live = dict(key)
                blocks = [live[t][0] if t in live else 0 for t in op.inputs]
                rule = op_layout(op.op, op.resolved, blocks,
                                 [graph.shapes[t] for t in op.inputs])
                c = cost + oc(op.name, rule.out)
                for t, b in zip(op.inputs, rule.need):
                    if b is not None:
                        c += walk.need(live, t, b)
                c += walk.produce(live, op, rule.out, step)
                keep(live, c, choices)
        if len(nxt) > max_states:
            exact = False
            nxt = dict(sorted(nxt.items(), key=lambda kv: kv[1][0])[:max_states])
        peak = max(peak, len(nxt))
        states = nxt
    cost, choices = min(states.values(), key=lambda v: v[0])
    op_params = {name: dict(options[name][k][3]) for name, k in choices}
    conv_s = sum(options[name][k][2] for name, k in choices)
    rewritten = apply_op_params(graph, op_params)
    op_s = tolerant_seconds(rewritten, oc)
    plan = LayoutPlan(op_params, cost, conv_s, cost - conv_s - op_s, op_seconds=op_s,
                      exact=exact, max_live_states=peak,
                      conv_times={name: options[name][k][2] for name, k in choices})
    plan.transforms = transform_list(graph, rewritten)
    return plan


def tolerant_seconds(rewritten: Graph, oc) -> float:
    """The layout-tolerant ops' time in a rewritten graph, each at the block
    its (rewritten) input is stored in."""
    total = 0.0
    for op in rewritten.ops:
        if is_tolerant(op.op) and op.inputs:
            shape = rewritten.shapes[op.inputs[0]]
            total += oc(op.name, int(shape[4]) if len(shape) == 5 else 0)
    return total


def transform_list(original: Graph, rewritten: Graph) -> List[Tuple[str, Shape, int, int]]:
    """(tensor, logical shape, src block, dst block) of each activation
    transform the pass inserted (the cost model's terms, for reports and
    tests)."""
    from hwtune.graph.ops.layout import parse_layout
    out = []
    for op in inserted_transforms(rewritten):
        tensor = op.name.rsplit("@", 1)[0]
        shape = original.shapes[tensor]
        out.append((tensor, tuple(shape), parse_layout(op.attrs["src"], "")[1],
                    parse_layout(op.attrs["dst"], "")[1]))
    return out


def plan_cost(graph: Graph, op_params: Dict[str, dict],
              conv_seconds: Dict[str, float], transform_cost: TransformCost, *,
              op_cost: Optional[OpCost] = None) -> float:
    """The cost of given params measured on the rewritten graph itself:
    CONV seconds plus each inserted transform once, plus each
    layout-tolerant op at the block it runs in. Independent of the DP (it
    counts what apply_op_params built), so tests compare the two."""
    rewritten = apply_op_params(graph, op_params)
    total = sum(conv_seconds[name] for name in op_params)
    total += tolerant_seconds(rewritten, _op_coster(graph, op_cost))
    for _, shape, src, dst in transform_list(graph, rewritten):
        total += float(transform_cost(shape, src, dst))
    return total


# ---- measured transform costs ------------------------------------------------

def transform_subject(shape: Shape, src: int, dst: int) -> str:
    """The results.db subject of one transform workload (block 0 = NCHW)."""
    from hwtune.graph.passes.layout_rules import layout_name
    return f"{'x'.join(map(str, shape))}:{layout_name(src)}->{layout_name(dst)}"


def _transform_graph(shape: Shape, src: int, dst: int) -> Graph:
    from hwtune.graph.model import load_model
    from hwtune.graph.passes.layout_rules import blocked_shape, layout_name
    return load_model({
        "name": "layout-transform", "inputs": [{"name": "x", "shape": list(blocked_shape(shape, src))}],
        "ops": [{"name": "y", "op": "layout_transform", "inputs": ["x"],
                 "attrs": {"src": layout_name(src), "dst": layout_name(dst)}}],
        "outputs": ["y"]})


def time_transform(shape: Shape, src: int, dst: int, *, threads: int, isa: int,
                   reps: int = 15, warmup: int = 3) -> List[float]:
    """Seconds of each of `reps` runs of the C engine's layout_transform
    op on this shape with `threads` threads (its own profiled op time: no
    Python or scheduling overhead in it)."""
    from hwtune.engine.instance import NativeEngine
    from hwtune.measure import FixedSampling, interleave
    from hwtune.measure.engine import OpEventSide
    with NativeEngine(_transform_graph(shape, src, dst), executors=1, threads=threads,
                      scheduler="sequential", isa=isa) as eng:
        return interleave([OpEventSide(eng)], FixedSampling(reps), warmup=warmup,
                          raise_errors=True)[0].samples


def _stored_or_measured(db, run_id: Optional[int], host_key: str, where: dict,
                        measure: Callable[[], List[float]]) -> float:
    """The stored trial `where` describes (its median; infinity for an
    'error' trial), else measure() now and store it: 'ok' with the samples'
    median, or 'error' with the reason when the engine refuses."""
    from hwtune.measure import stats
    row = db.trial(host_key, **where)
    if row is not None and row["status"] in ("ok", "error"):
        return row["median_s"] if row["status"] == "ok" else math.inf
    try:
        samples = measure()
    except HwtuneError as exc:
        db.add_trial(run_id, host_key, search="measure", status="error",
                     note=str(exc)[:500], **where)
        return math.inf
    med = stats.median(samples)
    db.add_trial(run_id, host_key, search="measure", status="ok", median_s=med,
                 mad_s=stats.mad(samples), samples=samples, **where)
    return med


def measured_transform_cost(db, run_id: Optional[int], host_key: str, *, threads: int,
                            isa: str, reps: int = 15) -> TransformCost:
    """A transform_cost for choose_layouts that times the transform on the
    actual shape (median of reps) the first time a (shape, src, dst) is
    asked for on this host, ISA and thread count, stores it in results.db as
    a `layout-transform` trial, and reuses the stored trial afterwards (also
    across models and runs). A transform the engine refuses is stored as an
    'error' trial and costs infinity, so the search avoids it."""
    from hwtune.native.isa import resolve_isa

    isa_i = resolve_isa(isa)
    cache: Dict[Tuple[Shape, int, int], float] = {}

    def cost(shape, src_bn, dst_bn) -> float:
        shape, src_bn, dst_bn = tuple(int(d) for d in shape), int(src_bn), int(dst_bn)
        if src_bn == dst_bn:
            return 0.0
        key = (shape, src_bn, dst_bn)
        if key in cache:
            return cache[key]
        subject = transform_subject(shape, src_bn, dst_bn)
        params = {"shape": list(shape), "src_bn": src_bn, "dst_bn": dst_bn}
        where = dict(tuner=TUNER, subject=subject, isa=isa, threads=threads, params=params)
        cache[key] = _stored_or_measured(
            db, run_id, host_key, where,
            lambda: time_transform(shape, src_bn, dst_bn, threads=threads, isa=isa_i,
                                   reps=reps))
        return cache[key]

    return cost


# ---- measured costs of layout-tolerant ops -----------------------------------

def op_subject(op, shapes: Sequence[Shape], block: int) -> str:
    """The results.db subject of one layout-tolerant op workload: its type,
    input shapes, attributes (the model's, before the layout pass sets
    `layout`) and block."""
    import json
    from hwtune.graph.passes.layout_rules import layout_name
    attrs = {k: v for k, v in sorted(op.attrs.items()) if k != "layout"}
    dims = ";".join("x".join(map(str, s)) for s in shapes)
    return f"{op.op}|{dims}|{json.dumps(attrs, sort_keys=True)}:{layout_name(block)}"


def _op_graph(op, shapes: Sequence[Shape], block: int) -> Graph:
    """op alone: its first input a graph input held in `block`, the others
    params of their shapes, the layout pass's attribute for the block."""
    from hwtune.graph.model import load_model
    from hwtune.graph.passes.layout_rules import blocked_shape
    rule = op_layout(op.op, op.resolved, [block] + [0] * (len(shapes) - 1), shapes)
    params = [{"name": f"p{i}", "shape": list(s)} for i, s in enumerate(shapes[1:], 1)]
    outs = [f"y{i}" for i in range(len(op.outputs))]
    return load_model({
        "name": "layout-op", "inputs": [{"name": "x", "shape": list(blocked_shape(shapes[0], block))}],
        "params": params,
        "ops": [{"name": "op", "op": op.op, "inputs": ["x"] + [p["name"] for p in params],
                 "outputs": outs, "attrs": {**op.attrs, **rule.attrs}}],
        "outputs": outs})


def time_op(op, shapes: Sequence[Shape], block: int, *, threads: int, isa: int,
            reps: int = 15, warmup: int = 3) -> List[float]:
    """Seconds of each of `reps` runs of op alone in `block` on the C
    engine with `threads` threads (its profiled op time, as time_transform)."""
    from hwtune.engine.instance import NativeEngine
    from hwtune.measure import FixedSampling, interleave
    from hwtune.measure.engine import OpEventSide
    with NativeEngine(_op_graph(op, shapes, block), executors=1, threads=threads,
                      scheduler="sequential", isa=isa) as eng:
        return interleave([OpEventSide(eng)], FixedSampling(reps), warmup=warmup,
                          raise_errors=True)[0].samples


def measured_op_cost(db, run_id: Optional[int], host_key: str, *, threads: int, isa: str,
                     reps: int = 15) -> OpCost:
    """An op_cost for choose_layouts that times a layout-tolerant op in a
    block the first time (op workload, block) is asked for on this host,
    ISA and thread count, stores it as a `layout-op` trial, and reuses the
    stored trial afterwards. An op the engine refuses in that block is
    stored as an 'error' trial and costs infinity."""
    from hwtune.native.isa import resolve_isa

    isa_i = resolve_isa(isa)
    cache: Dict[str, float] = {}

    def cost(op, shapes, block) -> float:
        shapes, block = [tuple(int(d) for d in s) for s in shapes], int(block)
        subject = op_subject(op, shapes, block)
        if subject in cache:
            return cache[subject]
        params = {"op": op.op, "shapes": [list(s) for s in shapes], "block": block}
        where = dict(tuner=OP_TUNER, subject=subject, isa=isa, threads=threads, params=params)
        cache[subject] = _stored_or_measured(
            db, run_id, host_key, where,
            lambda: time_op(op, shapes, block, threads=threads, isa=isa_i, reps=reps))
        return cache[subject]

    return cost
