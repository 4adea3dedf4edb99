"""A dynamic model: a vertex function F (the model's ops) plus the roles of
its inputs, read from a model.json that declares `vertex`
(docs/model-format.md, "Dynamic models").

The document's ops are F's and the readouts'; its inputs and outputs are
not written by hand but derived here from `vertex`: every gathered tensor
(the vertex's input, child states, per-child rows, readout reads) becomes a
[1, width] input of an ordinary hwtune Graph, which the static validator
checks and shapes, and which lowers to the C graph unchanged. So F's ops
are the static ops, with the same numpy references and C kernels.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from hwtune.graph.errors import GraphError, Problem, fail
from hwtune.graph.limits import Limits
from hwtune.graph.model import Graph, _read_json, check_document, load_model
from hwtune.graph import template

VERTEX_KEY, SAMPLES_KEY = "vertex", "samples"
_VERTEX_KEYS = {"input", "arity", "states", "children", "edges", "readouts", "comment"}
_AT = ("root", "every", "last")
# Ops whose numpy reference and C kernel treat each row on its own: the
# only ones a vertex function may use, since the engine runs F over the
# rows of many vertices at once (and over pieces of them).
ROW_OPS = {"matmul", "add", "sub", "mul", "div", "minimum", "maximum", "mod", "sum", "affine",
           "sigmoid", "tanh", "relu", "abs", "leaky_relu", "softmax", "concat", "split",
           "slice"}


@dataclass
class Gather:
    """A tensor F reads that no op of F writes: its role (hwtune/dynamic.h)."""

    name: str
    kind: str          # vertex_input, child, child_sum, child_each, to_edges, sum_edges, state
    width: int
    state: int = -1    # child*, state: which state
    child: int = 0     # child: which child
    source: str = ""   # to_edges / sum_edges: the tensor moved
    readout: int = -1  # state: which readout reads it


@dataclass
class Readout:
    name: str
    at: str
    outputs: List[str]


@dataclass
class DynModel:
    graph: Graph                        # F and the readouts, validated at one row
    input_kind: str                     # "none", "tokens", "features"
    input_name: Optional[str]
    input_width: int
    embedding: Optional[str]            # tokens: the [vocab, width] param
    vocab: int
    arity: int                          # 0: any number of children
    states: List[Tuple[str, int, str]]  # (name, width, update tensor)
    gathers: List[Gather]
    readouts: List[Readout]
    samples: Dict[str, Any] = field(default_factory=dict)  # the data generator's spec
    source: Optional[str] = None

    @property
    def name(self) -> str:
        return self.graph.name

    def width(self, tensor: str) -> int:
        return int(self.graph.shapes[tensor][-1])


def model_hash(model: "DynModel") -> str:
    """sha256 of what the engine evaluates: F's expanded document (ops,
    params, shapes) and the vertex roles (gathers, states, readouts), so a
    stored run or tuned config follows the model, not its file's name."""
    from dataclasses import asdict
    from hwtune.db.keys import graph_hash
    return graph_hash({"graph": model.graph.to_json(), "input": model.input_kind,
                       "embedding": model.embedding, "arity": model.arity,
                       "states": [list(s) for s in model.states],
                       "gathers": [asdict(g) for g in model.gathers],
                       "readouts": [asdict(r) for r in model.readouts]})


def is_dynamic(doc) -> bool:
    return isinstance(doc, dict) and VERTEX_KEY in doc


def read_document(path: str, limits: Optional[Limits] = None):
    limits = limits or Limits.from_env()
    doc = _read_json(os.fspath(path), limits)
    check_document(doc, limits)
    return doc


def _int(value, where, problems, low=0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        problems.append(Problem(where, f"must be an integer >= {low}, got {value!r}"))
        return low
    return value


def _name(value, where, problems) -> str:
    if not isinstance(value, str) or not value:
        problems.append(Problem(where, f"must be a tensor name, got {value!r}"))
        return ""
    return value


def _object(value, where, problems, allowed) -> dict:
    if not isinstance(value, dict):
        problems.append(Problem(where, "must be an object"))
        return {}
    for key in value:
        if key not in allowed:
            problems.append(Problem(f"{where}.{key}", f'unknown key "{key}" (one of: '
                                                      f'{", ".join(sorted(allowed))})'))
    return value


def load_dynamic(source, overrides: Optional[Dict[str, Any]] = None,
                 limits: Optional[Limits] = None) -> DynModel:
    """Load and validate a dynamic model from a path or a parsed dict; a
    GraphError lists every problem with its location."""
    limits = limits or Limits.from_env()
    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    try:
        doc = read_document(label, limits) if label else source
        if not is_dynamic(doc):
            fail("", 'not a dynamic model: it declares no "vertex" function')
        model = _build(copy.deepcopy(doc), overrides or {}, limits)
    except GraphError as exc:
        if exc.source is None and label:
            raise GraphError(exc.problems, label) from None
        raise
    model.source = label
    model.graph.source = label
    return model


def _build(doc: dict, overrides, limits: Limits) -> DynModel:
    for key in ("inputs", "outputs", "extends"):
        if key in doc:
            fail(key, f'a dynamic model derives its {key} from "vertex"; remove "{key}"'
                 if key != "extends" else '"extends" is not supported with "vertex"')
    raw_vertex = doc.pop(VERTEX_KEY)
    raw_samples = doc.pop(SAMPLES_KEY, {})
    declared = doc.get("vars", {})
    if not isinstance(declared, dict):
        fail("vars", "must be an object of name: value")
    counter = template.new_counter(limits)
    env = template.resolve_vars(declared, overrides, counter)
    v = template.expand_value(raw_vertex, env, VERTEX_KEY, counter)
    samples = template.expand_value(raw_samples, env, SAMPLES_KEY, counter)
    problems: List[Problem] = []
    v = _object(v, VERTEX_KEY, problems, _VERTEX_KEYS)
    if not isinstance(samples, dict):
        problems.append(Problem(SAMPLES_KEY, "must be an object"))
        samples = {}

    gathers: List[Gather] = []
    raw_params = doc.get("params", [])
    raw_params = template.expand_value(raw_params if isinstance(raw_params, list) else [],
                                       env, "params", template.new_counter(limits))
    params = {p.get("name"): p for p in raw_params if isinstance(p, dict)}
    # the vertex's own input
    inp = v.get("input")
    kind, in_name, in_width, emb, vocab = "none", None, 0, None, 0
    if inp is not None:
        loc = f"{VERTEX_KEY}.input"
        inp = _object(inp, loc, problems, {"name", "tokens", "features"})
        in_name = _name(inp.get("name"), f"{loc}.name", problems)
        if ("tokens" in inp) == ("features" in inp):
            problems.append(Problem(loc, 'give either "tokens": EMBEDDING_PARAM or '
                                         '"features": WIDTH'))
        elif "tokens" in inp:
            kind, emb = "tokens", _name(inp["tokens"], f"{loc}.tokens", problems)
            shape = params.get(emb, {}).get("shape")
            if (not isinstance(shape, list) or len(shape) != 2
                    or not all(isinstance(d, int) for d in shape)):
                problems.append(Problem(f"{loc}.tokens", f'"{emb}" must be a param of shape '
                                                         "[vocab, width]"))
            else:
                vocab, in_width = shape
        else:
            kind = "features"
            in_width = _int(inp["features"], f"{loc}.features", problems, 1)
        gathers.append(Gather(in_name, "vertex_input", in_width))
    arity = _int(v.get("arity", 0), f"{VERTEX_KEY}.arity", problems)

    states: List[Tuple[str, int, str]] = []
    raw_states = v.get("states")
    if not isinstance(raw_states, list) or not raw_states:
        problems.append(Problem(f"{VERTEX_KEY}.states", "must be a non-empty array of "
                                                         '{"name", "width", "update"}'))
        raw_states = []
    for i, s in enumerate(raw_states):
        loc = f"{VERTEX_KEY}.states[{i}]"
        s = _object(s, loc, problems, {"name", "width", "update"})
        states.append((_name(s.get("name"), f"{loc}.name", problems),
                       _int(s.get("width"), f"{loc}.width", problems, 1),
                       _name(s.get("update"), f"{loc}.update", problems)))
    state_ix = {name: i for i, (name, _, _) in enumerate(states)}

    def state_of(value, where):
        if value not in state_ix:
            problems.append(Problem(where, f"no state named {value!r} (states: "
                                           f"{', '.join(state_ix) or 'none'})"))
            return 0
        return state_ix[value]

    for i, c in enumerate(v.get("children", []) or []):
        loc = f"{VERTEX_KEY}.children[{i}]"
        c = _object(c, loc, problems, {"name", "state", "child", "reduce"})
        s = state_of(c.get("state"), f"{loc}.state")
        width = states[s][1] if states else 1
        name = _name(c.get("name"), f"{loc}.name", problems)
        if "child" in c and "reduce" not in c:
            k = _int(c["child"], f"{loc}.child", problems)
            if arity and k >= arity:
                problems.append(Problem(f"{loc}.child", f"child {k} of a vertex of arity {arity}"))
            gathers.append(Gather(name, "child", width, state=s, child=k))
        elif c.get("reduce") in ("sum", "each") and "child" not in c:
            gathers.append(Gather(name, "child_sum" if c["reduce"] == "sum" else "child_each",
                                  width, state=s))
        else:
            problems.append(Problem(loc, 'give "child": K (the K-th child) or "reduce": '
                                         '"sum" | "each"'))
    for i, e in enumerate(v.get("edges", []) or []):
        loc = f"{VERTEX_KEY}.edges[{i}]"
        e = _object(e, loc, problems, {"name", "width", "to_edges", "sum_edges"})
        name = _name(e.get("name"), f"{loc}.name", problems)
        width = _int(e.get("width"), f"{loc}.width", problems, 1)
        if ("to_edges" in e) == ("sum_edges" in e):
            problems.append(Problem(loc, 'give "to_edges": TENSOR (a vertex row per child '
                                         'link) or "sum_edges": TENSOR (per-link rows summed)'))
            continue
        which = "to_edges" if "to_edges" in e else "sum_edges"
        gathers.append(Gather(name, which, width,
                              source=_name(e[which], f"{loc}.{which}", problems)))

    readouts: List[Readout] = []
    for i, r in enumerate(v.get("readouts", []) or []):
        loc = f"{VERTEX_KEY}.readouts[{i}]"
        r = _object(r, loc, problems, {"name", "at", "reads", "outputs"})
        at = r.get("at", "root")
        if at not in _AT:
            problems.append(Problem(f"{loc}.at", f"must be one of {', '.join(_AT)}, got {at!r}"))
            at = "root"
        reads = r.get("reads", {})
        if not isinstance(reads, dict) or not reads:
            problems.append(Problem(f"{loc}.reads", 'must be an object {"TENSOR": "STATE"}'))
            reads = {}
        for tname, sname in reads.items():
            s = state_of(sname, f"{loc}.reads.{tname}")
            gathers.append(Gather(tname, "state", states[s][1] if states else 1, state=s,
                                  readout=i))
        outs = r.get("outputs")
        if not isinstance(outs, list) or not outs or not all(isinstance(o, str) for o in outs):
            problems.append(Problem(f"{loc}.outputs", "must be a non-empty array of tensor "
                                                       "names"))
            outs = []
        readouts.append(Readout(_name(r.get("name"), f"{loc}.name", problems), at, outs))
    seen = set()
    for g in gathers:
        if g.name in seen:
            problems.append(Problem(VERTEX_KEY, f'tensor "{g.name}" is declared twice'))
        seen.add(g.name)
    if problems:
        raise GraphError(problems)

    doc["inputs"] = [{"name": g.name, "shape": [1, g.width]} for g in gathers]
    outs: List[str] = []
    for name in [s[2] for s in states] + [o for r in readouts for o in r.outputs]:
        if name not in outs:
            outs.append(name)
    doc["outputs"] = outs
    graph = load_model(doc, overrides, limits)
    _check_rows(graph, gathers, states)
    return DynModel(graph, kind, in_name, in_width, emb, vocab, arity, states, gathers,
                    readouts, samples)


def _check_rows(graph: Graph, gathers: List[Gather], states) -> None:
    """What the static validator cannot know: F's ops work row by row, every
    row tensor is [1, width], each state's update has the state's width, and
    moved tensors have their source's width."""
    problems: List[Problem] = []
    for i, op in enumerate(graph.ops):
        if op.op not in ROW_OPS:
            problems.append(Problem(f"ops[{i}].op", f'"{op.op}" is not a row-wise op; a vertex '
                                                     f"function may use {', '.join(sorted(ROW_OPS))}"))
            continue
        axis = (op.resolved or {}).get("axis")
        if op.op in ("concat", "split", "slice", "softmax") and axis not in (1, -1):
            problems.append(Problem(f"ops[{i}].attrs.axis", f'{op.op} in a vertex function works '
                                                            "along axis 1 (within a row)"))
        if op.op == "matmul" and (op.resolved or {}).get("transpose_a"):
            problems.append(Problem(f"ops[{i}].attrs.transpose_a", "would mix rows of "
                                                                    "different vertices"))
        for name in op.outputs:
            shape = graph.shapes.get(name)
            if shape is not None and (len(shape) != 2 or shape[0] != 1):
                problems.append(Problem(f"ops[{i}]", f'output "{name}" has shape {list(shape)}; '
                                                     "rows of a vertex function are [1, width]"))
    for i, (name, width, update) in enumerate(states):
        shape = graph.shapes.get(update)
        if shape is not None and tuple(shape) != (1, width):
            problems.append(Problem(f"{VERTEX_KEY}.states[{i}].update",
                                    f'"{update}" is {list(shape)}, the state is [1, {width}]'))
    for g in gathers:
        if g.source:
            shape = graph.shapes.get(g.source)
            if shape is None:
                problems.append(Problem(VERTEX_KEY, f'"{g.name}" moves "{g.source}", which '
                                                    "the model does not have"))
            elif tuple(shape) != (1, g.width):
                problems.append(Problem(VERTEX_KEY, f'"{g.name}" is [1, {g.width}] but its '
                                                    f'source "{g.source}" is {list(shape)}'))
    if problems:
        raise GraphError(problems)
