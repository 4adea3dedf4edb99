"""Check a parsed graph: names, ops, attributes, cycles, shapes and sizes.

Every problem is collected with its location; ops downstream of a broken
op are skipped rather than reported again, so one typo gives one message.
"""

import difflib
from typing import Dict, List, Optional, Tuple

from hwtune.graph import ops as oplib
from hwtune.graph.errors import GraphError, Problem
from hwtune.graph.limits import Limits, how_to_raise, human_bytes  # noqa: F401 (re-exported)
from hwtune.graph.ir import Graph

BYTES_PER_ELEMENT = 4  # float32 is the only dtype
# The C kernels index a tensor's elements (and multiply its dimensions) in
# 32-bit ints in places: no tensor may have more, even with raised limits.
MAX_ELEMENTS = 2 ** 31 - 1
# "did you mean" only for a name this close to a known one (difflib's ratio:
# 2 x matching characters / total): typos such as "rellu" (0.89), "conv"
# (0.8) or "softmaxx" (0.93) pass; other frameworks' ops that hwtune lacks do
# not: "gelu" vs relu (0.75), "batch_matmul" vs matmul (0.67), "layer_norm"
# vs layout_transform (0.62). A name differing only in case ("Relu") is
# always suggested.
OP_SUGGEST_CUTOFF = 0.8


def located(loc: str, origin: Optional[str]) -> str:
    """A problem's location, with the source it came from when known."""
    return f"{loc} (from {origin})" if origin else loc


_at = located  # the short name the checks below write


def _suggest(name: str, known, cutoff: float = 0.6) -> str:
    """' (did you mean "x"?)', naming every known name as close as the
    closest ("conv": conv2d and conv3d), in order; '' for none."""
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=cutoff)
    if not close:
        return ""
    ratio = lambda k: difflib.SequenceMatcher(None, name, k).ratio()  # noqa: E731
    best = [k for k in close if ratio(k) == ratio(close[0])]
    return " (did you mean " + " or ".join(f'"{k}"' for k in sorted(best)) + "?)"


def unknown_op_message(name: str) -> str:
    """A typo gets a suggestion; any other name is an op hwtune does not
    have, and the message lists the ones it has."""
    hint = (f' (did you mean "{name.lower()}"?)' if name.lower() in oplib.REGISTRY
            else _suggest(name, oplib.REGISTRY, OP_SUGGEST_CUTOFF))
    if hint:
        return f'unknown op "{name}"{hint}'
    return f'unsupported op "{name}" (supported: {", ".join(sorted(oplib.REGISTRY))})'


def validate_graph(graph: Graph, limits: Optional[Limits] = None) -> Graph:
    """Validate in place: fills graph.shapes, graph.order and op.resolved.

    Raises GraphError listing every problem found.
    """
    limits = limits or Limits.from_env()
    problems: List[Problem] = []
    producer: Dict[str, Tuple[int, str]] = {}   # tensor -> (op index or -1, where)
    shapes: Dict[str, Tuple[int, ...]] = {}

    for key in ("inputs", "params"):
        for t in getattr(graph, key):
            if t.name in producer:
                problems.append(Problem(_at(f"{t.loc}.name", t.origin),
                                        f'duplicate tensor name "{t.name}" (first '
                                        f"defined at {producer[t.name][1]})"))
                continue
            producer[t.name] = (-1, t.loc)
            if any(not isinstance(d, int) or d < 1 for d in t.shape):
                problems.append(Problem(_at(f"{t.loc}.shape", t.origin),
                                        f"dimensions must be integers >= 1, got "
                                        f"{list(t.shape)}"))
                continue
            shapes[t.name] = t.shape

    op_names: Dict[str, str] = {}
    usable: List[bool] = []
    for i, op in enumerate(graph.ops):
        ok = True
        if op.name in op_names:
            problems.append(Problem(_at(f"{op.loc}.name", op.origin),
                                    f'duplicate op name "{op.name}" (first at '
                                    f"{op_names[op.name]})"))
            ok = False
        else:
            op_names[op.name] = op.loc
        for j, out in enumerate(op.outputs):
            if out in producer:
                problems.append(Problem(_at(f"{op.loc}.outputs[{j}]", op.origin),
                                        f'duplicate tensor name "{out}" (first '
                                        f"defined at {producer[out][1]})"))
                ok = False
            else:
                producer[out] = (i, f"{op.loc}.outputs[{j}]")
        ok = _check_signature(op, problems) and ok
        usable.append(ok)

    for i, op in enumerate(graph.ops):
        for j, name in enumerate(op.inputs):
            if name not in producer:
                problems.append(Problem(_at(f"{op.loc}.inputs[{j}]", op.origin),
                                        f'unknown tensor "{name}"'
                                        + _suggest(name, producer)))
                usable[i] = False
    if not graph.outputs:
        problems.append(Problem("outputs", "the model declares no outputs"))
    for j, name in enumerate(graph.outputs):
        if name not in producer:
            problems.append(Problem(f"outputs[{j}]", f'unknown tensor "{name}"'
                                    + _suggest(name, producer)))

    order, cyclic = _topological_order(graph, producer)
    if cyclic:
        problems.append(_cycle_problem(graph, cyclic, producer))

    # Tensors the model declares are sized before inference: inference asks
    # the C kernels about them (CONV knobs), which must never see a tensor
    # no run could allocate. Ops reading one are skipped, not run.
    too_big = _too_big(graph, shapes, limits)
    known = {k: v for k, v in shapes.items() if k not in too_big}
    _infer_shapes(graph, order, usable, known, problems)
    shapes = {**shapes, **known}
    _check_sizes(graph, shapes, limits, problems)

    if problems:
        raise GraphError(_in_file_order(problems, graph), graph.source)
    graph.shapes = shapes
    graph.order = order
    return graph


def _check_signature(op, problems) -> bool:
    """Op type, arity, output count and attributes (shape-independent)."""
    spec = oplib.get(op.op)
    if spec is None:
        problems.append(Problem(_at(f"{op.loc}.op", op.origin), unknown_op_message(op.op)))
        return False
    n = len(op.inputs)
    if n < spec.min_inputs or (spec.max_inputs is not None and n > spec.max_inputs):
        if spec.max_inputs is None:
            want = f"at least {spec.min_inputs}"
        elif spec.min_inputs == spec.max_inputs:
            want = str(spec.min_inputs)
        else:
            want = f"{spec.min_inputs} to {spec.max_inputs}"
        noun = "input" if want == "1" else "inputs"
        problems.append(Problem(_at(f"{op.loc}.inputs", op.origin),
                                f"{op.op} takes {want} {noun} "
                                f"({', '.join(spec.inputs)}), got {n}"))
        return False
    if spec.n_outputs is not None and len(op.outputs) != spec.n_outputs:
        problems.append(Problem(_at(f"{op.loc}.outputs", op.origin),
                                f"{op.op} produces {spec.n_outputs} output(s), "
                                f"got {len(op.outputs)} names"))
        return False
    try:
        op.resolved = spec.normalize_attrs(op.attrs)
    except oplib.OpError as exc:
        problems.append(Problem(_at(f"{op.loc}.{exc.where}", op.origin), str(exc)))
        return False
    return True


def _topological_order(graph, producer):
    """Kahn's algorithm, stable in file order; returns (order, ops in cycles)."""
    n = len(graph.ops)
    deps = [set() for _ in range(n)]
    users = [[] for _ in range(n)]
    for i, op in enumerate(graph.ops):
        for name in op.inputs:
            p = producer.get(name, (-1, ""))[0]
            if p >= 0 and p not in deps[i]:
                deps[i].add(p)
                users[p].append(i)
    waiting = [len(d) for d in deps]
    ready = [i for i in range(n) if waiting[i] == 0]
    order = []
    head = 0
    while head < len(ready):
        i = ready[head]
        head += 1
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    left = sorted(set(range(n)) - set(order))
    return order, left


def _cycle_problem(graph, left, producer):
    """Walk predecessors inside the unfinished set until a node repeats."""
    remaining = set(left)
    start = left[0]
    path, seen = [], {}
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        preds = [producer[name][0] for name in graph.ops[node].inputs
                 if name in producer and producer[name][0] in remaining]
        node = min(preds)  # every op still waiting has a waiting predecessor
    cycle = path[seen[node]:]
    cycle.reverse()  # predecessors walked backwards; print in data-flow order
    first = min(cycle)
    k = cycle.index(first)
    cycle = cycle[k:] + cycle[:k]
    names = " -> ".join(graph.ops[i].name for i in cycle + [cycle[0]])
    op = graph.ops[first]
    return Problem(_at(op.loc, op.origin), f"cycle: {names}")


def _infer_shapes(graph, order, usable, shapes, problems):
    for i in order:
        op = graph.ops[i]
        if not usable[i] or any(name not in shapes for name in op.inputs):
            continue
        spec = oplib.get(op.op)
        in_shapes = [shapes[name] for name in op.inputs]
        try:
            outs = spec.infer(in_shapes, op.resolved, len(op.outputs))
        except oplib.OpError as exc:
            where = f"{op.loc}.{exc.where}" if exc.where else op.loc
            problems.append(Problem(_at(where, op.origin), str(exc)))
            continue
        for name, shape in zip(op.outputs, outs):
            shapes[name] = tuple(int(d) for d in shape)


def _too_big(graph, shapes, limits) -> set:
    """Inputs and params over the tensor limit or the engine's element
    count (reported by _check_sizes)."""
    return {t.name for t in graph.inputs + graph.params if t.name in shapes and (
        oplib.numel(shapes[t.name]) > MAX_ELEMENTS
        or oplib.numel(shapes[t.name]) * BYTES_PER_ELEMENT > limits.max_tensor_bytes)}


def _check_sizes(graph, shapes, limits, problems):
    total = 0
    declared = [(t.name, f"{t.loc}.shape", t.origin) for t in graph.inputs + graph.params]
    for op in graph.ops:
        declared += [(name, f"{op.loc}.outputs[{j}]", op.origin)
                     for j, name in enumerate(op.outputs)]
    seen = set()
    for name, loc, origin in declared:
        if name not in shapes or name in seen:
            continue
        seen.add(name)
        nbytes = oplib.numel(shapes[name]) * BYTES_PER_ELEMENT
        total += nbytes
        if nbytes > limits.max_tensor_bytes:
            problems.append(Problem(_at(loc, origin),
                                    f'tensor "{name}" {oplib.show_shape(shapes[name])} '
                                    f"needs {human_bytes(nbytes)}, more than the "
                                    f"{human_bytes(limits.max_tensor_bytes)} limit "
                                    f"({how_to_raise('max_tensor_bytes')})"))
        elif oplib.numel(shapes[name]) > MAX_ELEMENTS:
            problems.append(Problem(_at(loc, origin),
                                    f'tensor "{name}" {oplib.show_shape(shapes[name])} has '
                                    f"more than {MAX_ELEMENTS} elements, which the engine's "
                                    "kernels count in 32-bit ints (whatever the limits)"))
    if total > limits.max_total_bytes:
        problems.append(Problem("model", f"all tensors together need {human_bytes(total)}, "
                                         f"more than the {human_bytes(limits.max_total_bytes)} "
                                         f"limit ({how_to_raise('max_total_bytes')})"))


def _in_file_order(problems, graph):
    """Sort by section then index so the first message is the first line to
    fix; problems without an index keep their relative order."""
    rank = {"inputs": 0, "params": 1, "ops": 2, "outputs": 3, "model": 4}

    def key(item):
        idx, p = item
        loc = p.location
        head = loc.split("[", 1)[0].split(".", 1)[0]
        num = 0
        if "[" in loc:
            try:
                num = int(loc.split("[", 1)[1].split("]", 1)[0])
            except ValueError:
                num = 0
        return (rank.get(head, 5), num, idx)

    return [p for _, p in sorted(enumerate(problems), key=key)]


def tensor_bytes(graph: Graph) -> Dict[str, int]:
    """Bytes of every tensor of a validated graph."""
    return {name: oplib.numel(s) * BYTES_PER_ELEMENT for name, s in graph.shapes.items()}
