"""Lower a validated hwtune.graph model into the C graph IR and plan it.

Ids follow the model: tensors are inputs, then params, then each op's
outputs in op order; op i of the model is op i of the C graph. Attributes
keep their names; the C graph stores integers and floats only, so
  int, bool (0/1), pair ([h, w]), ints  -> ints,
  float                                 -> floats,
  str, layout ("NCHW16c")               -> ints: the characters' code points,
and attributes left unset (null defaults) are omitted. qconv2d links whose
activations travel as bytes get engine-only attributes (hwtune.engine.qlayout). Each op's work (its
FLOPs from the op registry, and the bytes of its inputs and outputs) seeds
the planner's cost estimate; measured costs replace it through `costs`.
"""

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional

from hwtune.engine.qlayout import hwc_links
from hwtune.errors import EngineGraphError
from hwtune.native.graph import MAX_DIMS, NativeGraph
from hwtune.native.plan import Plan
from hwtune.graph import ops as oplib
from hwtune.graph.info import op_flops
from hwtune.graph.model import Graph
from hwtune.graph.validate import BYTES_PER_ELEMENT


@dataclass
class PlanSummary:
    """What a plan says about a model, in model names."""

    model: str
    reuse: str
    ops: int
    order: List[str]              # op names in plan order
    levels: Dict[str, float]      # op name -> longest remaining path (seconds)
    critical_path_s: float        # the largest level: a lower bound on run time
    arena_bytes: int
    arena_bytes_no_reuse: int
    peak_live_bytes: int          # sequential floor for any arena
    reach_exact: bool

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def _encode_attr(ng: NativeGraph, op_id: int, key: str, value) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        ng.set_ints(op_id, key, [int(value)])
    elif isinstance(value, int):
        ng.set_ints(op_id, key, [value])
    elif isinstance(value, float):
        ng.set_floats(op_id, key, [value])
    elif isinstance(value, str):
        ng.set_ints(op_id, key, [ord(c) for c in value])
    elif isinstance(value, (tuple, list)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        ng.set_ints(op_id, key, list(value))
    elif isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
        ng.set_floats(op_id, key, [float(v) for v in value])
    else:
        raise EngineGraphError(f'op {op_id}: attribute "{key}" = {value!r} has no C encoding')


def _require_validated(graph: Graph) -> None:
    if not isinstance(graph, Graph):
        raise EngineGraphError(f"expected a hwtune.graph Graph, got {type(graph).__name__}")
    if graph.ops and (not graph.shapes or not graph.order
                      or any(op.resolved is None for op in graph.ops)):
        raise EngineGraphError(f'model "{graph.name}" is not validated: load it with '
                               "load_model(..., validate=True)")


def lower_graph(graph: Graph, costs: Optional[Mapping[str, float]] = None) -> NativeGraph:
    """Build the C graph of a validated model.

    costs: op name -> seconds (profiled or estimated) overriding the
    FLOP/byte estimate of those ops.
    """
    _require_validated(graph)
    costs = dict(costs or {})
    unknown = sorted(set(costs) - {op.name for op in graph.ops})
    if unknown:
        raise EngineGraphError(f'costs name unknown op "{unknown[0]}"'
                               + (f" (+{len(unknown) - 1} more)" if len(unknown) > 1 else ""))
    outputs = set(graph.outputs)
    hwc = hwc_links(graph)
    ng = NativeGraph()
    subject = None  # what was being lowered when the C graph refused it
    try:
        for kind, tensors in (("input", graph.inputs), ("param", graph.params)):
            for t in tensors:
                subject = ("tensor", t.name)
                _add_tensor(ng, graph, t.name, kind)
        for i, op in enumerate(graph.ops):
            for name in op.outputs:
                subject = ("tensor", name)
                _add_tensor(ng, graph, name, "output" if name in outputs else "activation")
        for i, op in enumerate(graph.ops):
            subject = ("op", i)
            oid = ng.add_op(op.name, op.op, [ng.tensor_ids[n] for n in op.inputs],
                            [ng.tensor_ids[n] for n in op.outputs])
            for key, value in sorted(op.resolved.items()):
                _encode_attr(ng, oid, key, value)
            for key, value in sorted(hwc.get(op.name, {}).items()):
                _encode_attr(ng, oid, key, value)
            nbytes = sum(oplib.numel(graph.shapes[n]) for n in op.inputs + op.outputs)
            ng.set_work(oid, op_flops(graph, op), nbytes * BYTES_PER_ELEMENT)
            if op.name in costs:
                ng.set_cost(oid, costs[op.name])
        subject = None
        ng.validate()
    except EngineGraphError as exc:
        ng.close()
        exc.subject = subject  # located by hwtune.graph.validate
        raise
    except BaseException:
        ng.close()
        raise
    return ng


def _add_tensor(ng: NativeGraph, graph: Graph, name: str, kind: str) -> None:
    shape = graph.shapes[name]
    if len(shape) > MAX_DIMS:
        raise EngineGraphError(f'tensor "{name}" has {len(shape)} dimensions; the engine '
                               f"takes at most {MAX_DIMS}")
    ng.add_tensor(name, shape, kind)


def plan_model(graph: Graph, reuse: str = "parallel_safe",
               costs: Optional[Mapping[str, float]] = None, **options) -> PlanSummary:
    """Lower and plan a validated model; options go to Plan (reach_max_ops,
    flops_per_s, bytes_per_s, default_cost)."""
    with lower_graph(graph, costs) as ng, Plan(ng, reuse=reuse, **options) as plan:
        names = [op.name for op in graph.ops]
        return PlanSummary(
            model=graph.name,
            reuse=reuse,
            ops=plan.n_ops,
            order=[names[i] for i in plan.order],
            levels={names[i]: plan.level[i] for i in range(plan.n_ops)},
            critical_path_s=max(plan.level, default=0.0),
            arena_bytes=plan.arena_bytes,
            arena_bytes_no_reuse=plan.arena_bytes_no_reuse,
            peak_live_bytes=plan.peak_live_bytes,
            reach_exact=plan.reach_exact,
        )
