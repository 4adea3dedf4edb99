"""Load model.json: read (with `extends`), expand templates, parse into a Graph.

Parsing collects every structural problem (wrong types, missing keys) with
its location instead of stopping at the first; `validate.py` then checks the
graph's meaning (names, ops, attributes, shapes, cycles, sizes).
"""

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from hwtune.graph import template
from hwtune.graph.errors import GraphError, Problem, fail

FORMAT_VERSION = 1
DTYPES = ("float32",)
# "file": the values are the tensor of that name in the model's weights file.
INIT_KINDS = ("uniform", "normal", "zeros", "ones", "constant", "file")
_TOP_KEYS = {"format_version", "name", "description", "seed", "vars", "extends",
             "inputs", "params", "ops", "outputs", "comment", "weights"}
# In-memory key of a "file" tensor's init: its opened WeightsFile. Kept in
# the init dict so that every copy of a tensor's init (layout passes, one-op
# graphs of the tuners) still finds its values; never written to JSON.
WEIGHTS_KEY = "_weights"
_TENSOR_KEYS = {"name", "shape", "dtype", "init", "scale", "low", "high",
                "value", "data", "comment"}
_OP_KEYS = {"name", "op", "inputs", "outputs", "attrs", "comment"}
# `extends` chains longer than this are almost certainly a loop.
_MAX_EXTENDS_DEPTH = 8


@dataclass
class Tensor:
    """A graph input or parameter (float32, row-major)."""

    name: str
    shape: Tuple[int, ...]
    dtype: str = "float32"
    init: Dict[str, Any] = field(default_factory=dict)  # kind + its numbers
    loc: str = ""
    origin: Optional[str] = None

    def to_json(self):
        out = {"name": self.name, "shape": list(self.shape)}
        out.update({k: v for k, v in self.init.items() if k != WEIGHTS_KEY})
        return out


@dataclass
class Op:
    name: str
    op: str
    inputs: List[str]
    outputs: List[str]
    attrs: Dict[str, Any] = field(default_factory=dict)
    loc: str = ""
    origin: Optional[str] = None
    # Attributes with defaults filled and kinds normalised (set by validate).
    resolved: Optional[Dict[str, Any]] = field(default=None, repr=False)

    def to_json(self):
        out = {"name": self.name, "op": self.op, "inputs": list(self.inputs)}
        if self.outputs != [self.name]:
            out["outputs"] = list(self.outputs)
        if self.attrs:
            out["attrs"] = dict(self.attrs)
        return out


@dataclass
class Graph:
    name: str
    inputs: List[Tensor]
    params: List[Tensor]
    ops: List[Op]
    outputs: List[str]
    seed: int = 0
    description: str = ""
    vars: Dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None
    # Filled by validate(): tensor name -> shape, and a topological op order.
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    order: List[int] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        """The ordinary (expanded) model.json document."""
        doc = {"format_version": FORMAT_VERSION, "name": self.name}
        if self.description:
            doc["description"] = self.description
        doc["seed"] = self.seed
        weights = self.weights
        if weights is not None:
            doc["weights"] = weights.to_json()
        doc["inputs"] = [t.to_json() for t in self.inputs]
        doc["params"] = [t.to_json() for t in self.params]
        doc["ops"] = [o.to_json() for o in self.ops]
        doc["outputs"] = list(self.outputs)
        return doc

    @property
    def weights(self):
        """The WeightsFile the "file" tensors read from, or None."""
        for t in self.inputs + self.params:
            if WEIGHTS_KEY in t.init:
                return t.init[WEIGHTS_KEY]
        return None


def dump_document(doc) -> str:
    """model.json text with one input, param, op or output per line:
    diffable and greppable even for thousands of ops."""
    lines = ["{"]
    keys = list(doc)
    for k, key in enumerate(keys):
        value = doc[key]
        end = "," if k < len(keys) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f"  {json.dumps(key)}: [")
            for i, item in enumerate(value):
                sep = "," if i < len(value) - 1 else ""
                lines.append(f"    {json.dumps(item)}{sep}")
            lines.append(f"  ]{end}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _where(loc, origin):
    return f"{loc} (from {origin})" if origin else loc


def _read_json(path: str):
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        fail("", f"cannot read {path}: {exc.strerror}")
    return parse_json_text(text, path)


def parse_json_text(text: str, name: str = "<model>"):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # "file.json:3:14: ..." as compilers print it, whichever file of an
        # `extends` chain is broken.
        raise GraphError([Problem(f"{exc.lineno}:{exc.colno}", f"malformed JSON: {exc.msg}")],
                         name) from None


def _resolve_extends(doc, path, depth=0):
    """Merge a document over the one it `extends` (a path relative to it).

    The child's `vars` update the parent's; any other key replaces it.
    """
    if not isinstance(doc, dict):
        fail("", "the model must be a JSON object")
    base = doc.get("extends")
    if base is None:
        return doc
    if not isinstance(base, str):
        fail("extends", "must be a file path string")
    if depth >= _MAX_EXTENDS_DEPTH:
        fail("extends", f"more than {_MAX_EXTENDS_DEPTH} nested extends (a loop?)")
    here = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    base_path = os.path.join(here, base)
    parent = _resolve_extends(_read_json(base_path), base_path, depth + 1)
    merged = dict(parent)
    for key, value in doc.items():
        if key == "vars":
            merged["vars"] = {**parent.get("vars", {}), **value}
        elif key != "extends":
            merged[key] = value
    return merged


def load_model(source, overrides: Optional[Dict[str, Any]] = None,
               limits=None, validate: bool = True) -> Graph:
    """Load a model from a path or an already-parsed dict.

    overrides replace declared `vars` (e.g. {"seq": 3} for a quick run).
    With validate=True (default) the graph is fully checked and shapes are
    inferred; a GraphError lists every problem.
    """
    path = source if isinstance(source, (str, os.PathLike)) else None
    label = os.fspath(path) if path else None
    try:
        doc = _read_json(os.fspath(path)) if path else source
        doc = _resolve_extends(doc, label)
        graph = expand_document(doc, overrides or {})
        _attach_weights(graph, doc.get("weights"), label)
    except GraphError as exc:
        if exc.source is None and label:
            raise GraphError(exc.problems, label) from None
        raise
    graph.source = label
    if validate:
        from hwtune.graph.validate import validate_graph
        validate_graph(graph, limits)
    return graph


def expand_document(doc, overrides) -> Graph:
    if not isinstance(doc, dict):
        fail("", "the model must be a JSON object")
    problems: List[Problem] = []
    for key in doc:
        if key not in _TOP_KEYS:
            problems.append(Problem(key, f'unknown key "{key}"'))
    version = doc.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        fail("format_version", f"unsupported format version {version!r} "
                               f"(this hwtune reads {FORMAT_VERSION})")
    declared = doc.get("vars", {})
    if not isinstance(declared, dict):
        fail("vars", "must be an object of name: value")
    env = template.resolve_vars(declared, overrides)
    counter = template.new_counter()
    sections = {}
    for key in ("inputs", "params", "ops", "outputs"):
        raw = doc.get(key, [])
        if not isinstance(raw, list):
            problems.append(Problem(key, "must be an array"))
            raw = []
        sections[key] = template.expand_list(raw, env, key, counter)
    name = template.expand_value(doc.get("name", "model"), env, "name", counter)
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        problems.append(Problem("seed", f"must be a non-negative integer, got {seed!r}"))
        seed = 0
    graph = Graph(
        name=str(name),
        description=str(template.expand_value(doc.get("description", ""), env,
                                              "description", counter)),
        seed=seed, vars=env, inputs=[], params=[], ops=[], outputs=[])
    for key in ("inputs", "params"):
        for i, (item, origin) in enumerate(sections[key]):
            tensor = _parse_tensor(item, f"{key}[{i}]", template.origin_text(origin), problems)
            if tensor is not None:
                getattr(graph, key).append(tensor)
    for i, (item, origin) in enumerate(sections["ops"]):
        op = _parse_op(item, f"ops[{i}]", template.origin_text(origin), problems)
        if op is not None:
            graph.ops.append(op)
    for i, (item, origin) in enumerate(sections["outputs"]):
        if not isinstance(item, str):
            problems.append(Problem(_where(f"outputs[{i}]", template.origin_text(origin)),
                                    "must be a tensor name string"))
        else:
            graph.outputs.append(item)
    if problems:
        raise GraphError(problems)
    return graph


def _attach_weights(graph: Graph, spec, path: Optional[str]) -> None:
    """Open the weights file a model names and give each "file" tensor its
    source; every problem (no file, changed file, missing or misshapen
    tensor) is reported with its location."""
    from hwtune.graph.weights import WeightsError, open_weights
    users = [t for t in graph.inputs + graph.params if t.init.get("init") == "file"]
    if spec is None:
        if users:
            raise GraphError([Problem(f"{t.loc}.init", 'init "file" needs the model\'s '
                                      '"weights" file') for t in users])
        return
    if (not isinstance(spec, dict) or not isinstance(spec.get("file"), str)
            or not spec["file"] or set(spec) - {"file", "sha256", "comment"}
            or not isinstance(spec.get("sha256", ""), str)):
        fail("weights", 'must be {"file": PATH, "sha256": HEX} (sha256 optional)')
    here = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    try:
        wf = open_weights(os.path.join(here, spec["file"]), spec["file"], spec.get("sha256"))
    except WeightsError as exc:
        fail("weights", str(exc))
    problems = []
    for t in users:
        have = wf.shape(t.name)
        if have is None:
            problems.append(Problem(f"{t.loc}.init", f'tensor "{t.name}" is not in weights '
                                                     f"file {wf.ref}"))
        elif have != tuple(t.shape):
            problems.append(Problem(f"{t.loc}.shape", f"{list(t.shape)} differs from "
                                                      f"{list(have)} in weights file {wf.ref}"))
        else:
            t.init[WEIGHTS_KEY] = wf
    if problems:
        raise GraphError(problems)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_object(item, loc, origin, problems, allowed, what):
    """Shared head of tensor and op parsing: an object with known keys and a
    non-empty name. Returns (name, ok), or None when item is not an object."""
    if not isinstance(item, dict):
        problems.append(Problem(_where(loc, origin), f"must be an object with {what}"))
        return None
    ok = True
    for key in item:
        if key not in allowed:
            problems.append(Problem(_where(f"{loc}.{key}", origin), f'unknown key "{key}"'))
            ok = False
    name = item.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem(_where(f"{loc}.name", origin), "missing or empty name"))
        ok = False
    return name, ok


def _parse_tensor(item, loc, origin, problems) -> Optional[Tensor]:
    head = _check_object(item, loc, origin, problems, _TENSOR_KEYS, "name and shape")
    if head is None:
        return None
    name, ok = head
    shape = item.get("shape")
    if (not isinstance(shape, list) or not all(_is_int(d) for d in shape)):
        problems.append(Problem(_where(f"{loc}.shape", origin),
                                f"must be an array of integers, got {shape!r}"))
        ok = False
    elif any(d < 1 for d in shape):
        problems.append(Problem(_where(f"{loc}.shape", origin),
                                f"dimensions must be >= 1, got {shape}"))
        ok = False
    dtype = item.get("dtype", "float32")
    if dtype not in DTYPES:
        problems.append(Problem(_where(f"{loc}.dtype", origin),
                                f'unsupported dtype "{dtype}" (supported: float32)'))
        ok = False
    init = _parse_init(item, loc, origin, problems)
    if not ok or init is None:
        return None
    return Tensor(name, tuple(shape), dtype, init, loc, origin)


def _parse_init(item, loc, origin, problems):
    """Check the initialisation fields; returns them as a dict (or None)."""
    init = {k: item[k] for k in ("init", "scale", "low", "high", "value", "data") if k in item}
    kind = item.get("init", "data" if "data" in item else "uniform")
    where = _where(f"{loc}.init", origin)
    if "data" in item:
        if "init" in item:
            problems.append(Problem(where, 'give either "init" or "data", not both'))
            return None
        return init
    if kind not in INIT_KINDS:
        problems.append(Problem(where, f'unknown init "{kind}" '
                                       f"(one of: {', '.join(INIT_KINDS)})"))
        return None
    for key in ("scale", "low", "high", "value"):
        if key in item and not _is_num(item[key]):
            problems.append(Problem(_where(f"{loc}.{key}", origin),
                                    f"must be a number, got {item[key]!r}"))
            return None
    if kind == "constant" and "value" not in item:
        problems.append(Problem(where, 'init "constant" needs "value"'))
        return None
    if ("low" in item) != ("high" in item):
        problems.append(Problem(where, '"low" and "high" go together'))
        return None
    if "low" in item and item["low"] > item["high"]:
        problems.append(Problem(where, f"low {item['low']} > high {item['high']}"))
        return None
    return init


def _parse_op(item, loc, origin, problems) -> Optional[Op]:
    head = _check_object(item, loc, origin, problems, _OP_KEYS, "name, op and inputs")
    if head is None:
        return None
    name, ok = head
    kind = item.get("op")
    if not isinstance(kind, str):
        problems.append(Problem(_where(f"{loc}.op", origin), "missing op type"))
        ok = False
    inputs = item.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
        problems.append(Problem(_where(f"{loc}.inputs", origin),
                                "must be an array of tensor names"))
        ok = False
    outputs = item.get("outputs", [name])
    if "outputs" not in item and not ok:
        pass  # a missing name is already reported; its default output too
    elif (not isinstance(outputs, list) or not outputs
            or not all(isinstance(x, str) and x for x in outputs)):
        problems.append(Problem(_where(f"{loc}.outputs", origin),
                                "must be a non-empty array of tensor names"))
        ok = False
    attrs = item.get("attrs", {})
    if not isinstance(attrs, dict):
        problems.append(Problem(_where(f"{loc}.attrs", origin), "must be an object"))
        ok = False
    if not ok:
        return None
    return Op(name, kind, list(inputs), list(outputs), dict(attrs), loc, origin)
