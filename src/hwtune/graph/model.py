"""Load model.json: read (with `extends`), expand templates, parse into a Graph.

Parsing collects every structural problem (wrong types, missing keys) with
its location instead of stopping at the first; `validate.py` then checks the
graph's meaning (names, ops, attributes, shapes, cycles, sizes).
"""

import json
import math
import os
from typing import Any, Dict, List, Optional

from hwtune.graph import template
from hwtune.graph.errors import GraphError, Problem, fail
# The graph's own types stand in ir.py, below validation; they are the
# model format's too, and are imported from here.
from hwtune.graph.ir import FORMAT_VERSION, WEIGHTS_KEY, Graph, Op, Tensor  # noqa: F401
from hwtune.graph.limits import Limits, how_to_raise, human_bytes
from hwtune.graph.validate import validate_graph

# int64 and bool tensors (ONNX ids and masks) are carried as float32 values,
# exact up to 2^24 (docs/onnx.md); their seeded values are integers in
# [low, high) (default [0, 2)).
DTYPES = ("float32", "int64", "bool")
INT_EXACT = 2 ** 24
# "file": the values are the tensor of that name in the model's weights file.
INIT_KINDS = ("uniform", "normal", "zeros", "ones", "constant", "file")
_TOP_KEYS = {"format_version", "name", "description", "seed", "vars", "extends",
             "inputs", "params", "ops", "outputs", "comment", "weights"}
_TENSOR_KEYS = {"name", "shape", "dtype", "init", "scale", "low", "high",
                "value", "data", "comment"}
_OP_KEYS = {"name", "op", "inputs", "outputs", "attrs", "comment"}
# `extends` chains longer than this are almost certainly a loop.
_MAX_EXTENDS_DEPTH = 8
# The engine's C code holds dimensions and attribute values in 32-bit ints
# (a conv stride of 1e30 would silently wrap there), and float32 tensors hold
# values up to FLT_MAX.
INT_MAX = 2 ** 31 - 1
FLOAT32_MAX = 3.4028234663852886e38
# Byte-order marks of encodings JSON files are sometimes saved in by mistake.
_BOMS = ((b"\xef\xbb\xbf", "UTF-8 with a byte-order mark"),
         (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


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


def _read_json(path: str, limits: Limits):
    """Read and parse one model file, refusing (with the limit and how to
    raise it) a file too large, not UTF-8, nested too deeply or holding a
    number JSON does not have."""
    cap = limits.max_file_bytes
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)  # never more: /dev/zero is a "file" too
    except OSError as exc:
        fail("", f"cannot read {path}: {exc.strerror}")
    if len(data) > cap:
        fail("", f"the file is larger than {human_bytes(cap)} ({how_to_raise('max_file_bytes')})")
    return parse_json_text(decode_text(data), path, limits)


def decode_text(data: bytes) -> str:
    """UTF-8 text of a model file, or a GraphError saying what it is instead."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            if bom == b"\xef\xbb\xbf":
                data = data[len(bom):]  # harmless: a BOM some editors add
                break
            fail("", f"the file is {name} text: save it as UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise GraphError([Problem(f"{line}:{col}", f"not UTF-8 text: byte "
                                  f"0x{data[exc.start]:02x} ({exc.reason}); a model file "
                                  "is UTF-8 JSON")]) from None


class _NonFinite:
    """What NaN / Infinity literals parse to: refused with their location by
    check_document (Python's json accepts them; JSON does not)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def json_depth(text: str) -> int:
    """Deepest nesting of objects and arrays (outside strings), without
    recursion, so the limit is checked before Python's parser recurses."""
    import re
    from itertools import accumulate
    if "[" not in text and "{" not in text:
        return 0
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    steps = [1 if c in "[{" else -1 for c in re.findall(r"[\[\]{}]", bare)]
    return max(accumulate(steps), default=0)


def parse_json_text(text: str, name: str = "<model>", limits: Optional[Limits] = None):
    limits = limits or Limits()
    if len(text) > limits.max_file_bytes:
        raise GraphError([Problem("", f"the text is larger than "
                                      f"{human_bytes(limits.max_file_bytes)} "
                                      f"({how_to_raise('max_file_bytes')})")], name)
    depth = json_depth(text)
    if depth > limits.max_depth:
        raise GraphError([Problem("", f"JSON nested {depth} deep, more than {limits.max_depth} "
                                      f"({how_to_raise('max_depth')})")], name)
    try:
        return json.loads(text, parse_constant=_NonFinite)
    except json.JSONDecodeError as exc:
        # "file.json:3:14: ..." as compilers print it, whichever file of an
        # `extends` chain is broken.
        raise GraphError([Problem(f"{exc.lineno}:{exc.colno}", f"malformed JSON: {exc.msg}")],
                         name) from None
    except RecursionError:  # a parser stack smaller than max_depth needs
        raise GraphError([Problem("", f"JSON nested {depth} deep, more than Python's parser "
                                      "takes: keep HWTUNE_MAX_JSON_DEPTH below ~900")],
                         name) from None


def _path_text(path) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def check_document(doc, limits: Limits) -> None:
    """Refuse, with their location, values no model may hold wherever they
    are: nesting deeper than the limit, a string longer than the limit or
    not encodable as UTF-8 (a lone surrogate from a "\\ud800" escape), a
    non-finite number, a key that is not a string. Iterative: a document
    built in code may be nested deeper than Python's recursion limit."""
    problems: List[Problem] = []
    stack = [(doc, ())]
    while stack and len(problems) < 20:
        value, path = stack.pop()
        if len(path) > limits.max_depth:
            problems.append(Problem(_path_text(path), f"nested more than {limits.max_depth} deep "
                                                      f"({how_to_raise('max_depth')})"))
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append(Problem(_path_text(path), f"key {key!r} is not a string"))
                    continue
                _check_string(key, path + (key,), limits, problems)
                stack.append((item, path + (key,)))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                t = type(item)
                if t is int or t is bool:
                    continue
                if t is float:
                    if not math.isfinite(item):
                        problems.append(Problem(_path_text(path + (i,)),
                                                f"{item!r} is not a finite number"))
                    continue
                stack.append((item, path + (i,)))
        elif isinstance(value, str):
            _check_string(value, path, limits, problems)
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append(Problem(_path_text(path), f"{value!r} is not a finite number"))
        elif isinstance(value, _NonFinite):
            problems.append(Problem(_path_text(path), f"{value.text} is not a number JSON allows"))
        elif value is not None and not isinstance(value, int):
            problems.append(Problem(_path_text(path), f"a {type(value).__name__} is not a "
                                                      "JSON value"))
    if problems:
        problems.sort(key=lambda p: p.location)
        raise GraphError(problems)


def _check_string(text: str, path, limits: Limits, problems: List[Problem]) -> None:
    if len(text) > limits.max_string_chars:
        problems.append(Problem(_path_text(path), f"a string of {len(text)} characters, more "
                                                  f"than {limits.max_string_chars} "
                                                  f"({how_to_raise('max_string_chars')})"))
    elif not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            problems.append(Problem(_path_text(path), f"not valid Unicode: U+{ord(text[exc.start]):04X}"
                                                      " at character "
                                                      f"{exc.start} is a lone surrogate"))


def _resolve_extends(doc, path, limits: Limits, depth=0):
    """Merge a document over the one it `extends` (a path relative to it).

    The child's `vars` update the parent's; any other key replaces it.
    Returns (merged document, each var's value where the chain first
    declares it: the template's own default, which overrides must match).
    """
    if not isinstance(doc, dict):
        fail("", "the model must be a JSON object")
    own = doc.get("vars", {})
    if not isinstance(own, dict):
        fail("vars", "must be an object of name: value")
    base = doc.get("extends")
    if base is None:
        return doc, dict(own)
    if not isinstance(base, str) or not base:
        fail("extends", "must be a file path string")
    if depth >= _MAX_EXTENDS_DEPTH:
        fail("extends", f"more than {_MAX_EXTENDS_DEPTH} nested extends (a loop?)")
    here = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    base_path = os.path.join(here, base)
    try:
        parent_doc = _read_json(base_path, limits)
        check_document(parent_doc, limits)
        parent, first = _resolve_extends(parent_doc, base_path, limits, depth + 1)
    except GraphError as exc:
        # Name the file of the chain that is broken, as the compiler would.
        if exc.source is None:
            raise GraphError(exc.problems, base_path) from None
        raise
    merged = dict(parent)
    for key, value in doc.items():
        if key == "vars":
            merged["vars"] = {**parent.get("vars", {}), **value}
        elif key != "extends":
            merged[key] = value
    for key, value in own.items():
        first.setdefault(key, value)
    return merged, first


def load_model(source, overrides: Optional[Dict[str, Any]] = None,
               limits: Optional[Limits] = None, validate: bool = True) -> Graph:
    """Load a model from a path or an already-parsed dict.

    overrides replace declared `vars` (e.g. {"seq": 3} for a quick run).
    limits: what the model may cost (default: Limits.from_env()).
    With validate=True (default) the graph is fully checked and shapes are
    inferred; a GraphError lists every problem.
    """
    limits = limits or Limits.from_env()
    path = source if isinstance(source, (str, os.PathLike)) else None
    label = os.fspath(path) if path else None
    try:
        doc = _read_json(os.fspath(path), limits) if path else source
        check_document(doc, limits)
        doc, first = _resolve_extends(doc, label, limits)
        graph = expand_document(doc, overrides or {}, limits, first)
        _attach_weights(graph, doc.get("weights"), label)
    except GraphError as exc:
        if exc.source is None and label:
            raise GraphError(exc.problems, label) from None
        raise
    graph.source = label
    if validate:
        validate_graph(graph, limits)
    return graph


def expand_document(doc, overrides, limits: Optional[Limits] = None,
                    first: Optional[Dict[str, Any]] = None) -> Graph:
    if not isinstance(doc, dict):
        fail("", "the model must be a JSON object")
    limits = limits or Limits()
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
    counter = template.new_counter(limits)
    env = template.resolve_vars(declared, overrides, counter, first)
    sections = {}
    for key in ("inputs", "params", "ops", "outputs"):
        raw = doc.get(key, [])
        if not isinstance(raw, list):
            problems.append(Problem(key, "must be an array"))
            raw = []
        sections[key] = template.expand_list(raw, env, key, counter)
    name = template.expand_value(doc.get("name", "model"), env, "name", counter)
    if not isinstance(name, str) or not name:
        problems.append(Problem("name", f"must be a non-empty string, got {name!r}"))
        name = "model"
    description = template.expand_value(doc.get("description", ""), env, "description",
                                        counter)
    if not isinstance(description, str):
        problems.append(Problem("description", f"must be a string, got {description!r}"))
        description = ""
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        problems.append(Problem("seed", f"must be a non-negative integer, got {seed!r}"))
        seed = 0
    graph = Graph(name=name, description=description, seed=seed, vars=env, inputs=[],
                  params=[], ops=[], outputs=[])
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
    elif name_problem(name):
        problems.append(Problem(_where(f"{loc}.name", origin), name_problem(name)))
        ok = False
    return name, ok


def name_problem(name: str) -> Optional[str]:
    """Why a tensor or op name cannot be stored, lowered and read back by the
    C engine and runner (NUL-terminated UTF-8), or None."""
    bad = next((c for c in name if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        return f"name {name[:40]!r} holds the control character U+{ord(bad):04X}"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"name {name[:40]!r} is not valid Unicode (a lone surrogate at {exc.start})"
    return None


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
    elif any(d > INT_MAX for d in shape):
        problems.append(Problem(_where(f"{loc}.shape", origin),
                                f"dimensions must be at most {INT_MAX}, got {shape}"))
        ok = False
    dtype = item.get("dtype", "float32")
    if dtype not in DTYPES:
        problems.append(Problem(_where(f"{loc}.dtype", origin),
                                f'unsupported dtype "{dtype}" (supported: '
                                f'{", ".join(DTYPES)})'))
        ok = False
    elif dtype != "float32":
        for key in ("low", "high"):
            v = item.get(key)
            if v is not None and (not _is_int(v) or abs(v) > INT_EXACT):
                problems.append(Problem(_where(f"{loc}.{key}", origin),
                                        f"must be an integer of magnitude at most 2^24 for a "
                                        f"{dtype} tensor, got {v!r}"))
                ok = False
        if ok and item.get("low", 0) >= item.get("high", 2):
            problems.append(Problem(_where(f"{loc}.high", origin),
                                    "must be above low (values are drawn from [low, high))"))
            ok = False
    init = _parse_init(item, loc, origin, problems)
    if not ok or init is None:
        return None
    if "data" in init and not _check_data(init["data"], shape, _where(f"{loc}.data", origin),
                                          problems):
        return None
    return Tensor(name, tuple(shape), dtype, init, loc, origin)


def flatten_data(data) -> List[Any]:
    """A `data` value (a number, or arrays nested in any way, row-major) as a
    flat list; iterative, so any nesting the depth limit lets through works."""
    out: List[Any] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def _check_data(data, shape, where, problems) -> bool:
    """`data` holds exactly numel(shape) finite float32 numbers."""
    values = flatten_data(data)
    want = 1
    for d in shape:
        want *= d
    if len(values) != want:
        problems.append(Problem(where, f"{len(values)} values for shape {list(shape)} "
                                       f"({want} elements)"))
        return False
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            problems.append(Problem(where, f"value {i} is {v!r}: data holds numbers only"))
            return False
        if not math.isfinite(v) or abs(v) > FLOAT32_MAX:
            problems.append(Problem(where, f"value {i} is {v!r}: not a finite float32 "
                                           f"(|x| <= {FLOAT32_MAX:.7g})"))
            return False
    return True


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
        if key in item and (not math.isfinite(item[key]) or abs(item[key]) > FLOAT32_MAX):
            problems.append(Problem(_where(f"{loc}.{key}", origin),
                                    f"must be a finite float32 (|x| <= {FLOAT32_MAX:.7g}), "
                                    f"got {item[key]!r}"))
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
    elif "outputs" in item:
        for j, out in enumerate(outputs):
            why = name_problem(out)
            if why:
                problems.append(Problem(_where(f"{loc}.outputs[{j}]", origin), why))
                ok = False
    attrs = item.get("attrs", {})
    if not isinstance(attrs, dict):
        problems.append(Problem(_where(f"{loc}.attrs", origin), "must be an object"))
        ok = False
    if not ok:
        return None
    return Op(name, kind, list(inputs), list(outputs), dict(attrs), loc, origin)
