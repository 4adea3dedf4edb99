"""The op registry: per op its arity, attributes, shape inference, numpy
reference and FLOP count.

Each family module (eltwise, linear, conv, pool, norm, movement, layout, rnn)
registers its ops with `register()`; importing this package loads them all.
The numpy reference of an op is the semantic contract the C engine is tested
against, so it favours obviousness over speed.
"""

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REQUIRED = object()  # default marker: the attribute must be given
# The engine's C ops read integer attributes into 32-bit ints.
INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1


class OpError(Exception):
    """A problem in one op; `where` is relative to the op ("inputs[1]",
    "attrs.stride" or "")."""

    def __init__(self, message: str, where: str = ""):
        super().__init__(message)
        self.where = where


@dataclass
class Attr:
    """One attribute: kind is int, float, bool, str, pair (int or [a, b]),
    ints (array of ints) or layout (a layout string such as "NCHW16c")."""

    name: str
    kind: str
    default: Any = REQUIRED
    choices: Optional[Sequence[Any]] = None
    minimum: Optional[float] = None
    doc: str = ""
    # Integers the C op reads as int64 (slice bounds, where INT64_MAX means
    # "to the end" as in ONNX); every other integer is read into a C int.
    int64: bool = False

    def normalize(self, value):
        """Return the canonical value or raise OpError naming the attribute."""
        where = f"attrs.{self.name}"
        if value is None and self.default is None:
            return None  # explicit null: "not set", the same as leaving it out
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise OpError(f"must be true or false, got {value!r}", where)
        elif self.kind == "int":
            if not _is_int(value):
                raise OpError(f"must be an integer, got {value!r}", where)
        elif self.kind == "float":
            if not _is_num(value) or not math.isfinite(value):
                raise OpError(f"must be a finite number, got {value!r}", where)
            value = float(value)
        elif self.kind in ("str", "layout"):
            if not isinstance(value, str):
                raise OpError(f"must be a string, got {value!r}", where)
        elif self.kind == "pair":
            if _is_int(value):
                value = (value, value)
            elif (isinstance(value, list) and len(value) == 2
                  and all(_is_int(v) for v in value)):
                value = tuple(value)
            else:
                raise OpError(f"must be an integer or [h, w], got {value!r}", where)
        elif self.kind == "ints":
            if not isinstance(value, list) or not all(_is_int(v) for v in value):
                raise OpError(f"must be an array of integers, got {value!r}", where)
            value = tuple(value)
        items = value if isinstance(value, tuple) else (value,)
        lo, hi = (-(2 ** 63), 2 ** 63 - 1) if self.int64 else (INT_MIN, INT_MAX)
        if any(_is_int(v) and not lo <= v <= hi for v in items):
            # The C ops hold attribute values in C ints (int64 where the Attr
            # says so): a stride of 1e30 would wrap to an arbitrary number.
            raise OpError(f"{_show(value)} is out of range: integers here are "
                          f"{lo}..{hi}", where)
        if self.choices is not None and value not in self.choices:
            legal = ", ".join(_show(c) for c in self.choices)
            raise OpError(f"{_show(value)} is not one of {legal}", where)
        if self.minimum is not None:
            items = value if isinstance(value, tuple) else (value,)
            if any(v < self.minimum for v in items):
                raise OpError(f"must be >= {_show(self.minimum)}, got {_show(value)}", where)
        return value


@dataclass
class OpSpec:
    """Everything hwtune knows about one op type.

    infer(in_shapes, attrs, n_outputs) -> list of output shapes (raises
    OpError); ref(arrays, attrs, n_outputs) -> list of numpy arrays;
    flops(in_shapes, out_shapes, attrs) -> int.
    """

    name: str
    inputs: Tuple[str, ...]            # input names, for messages and docs
    min_inputs: int
    max_inputs: Optional[int]          # None: any number (n-ary ops)
    infer: Callable
    ref: Callable
    flops: Callable
    attrs: List[Attr] = field(default_factory=list)
    n_outputs: Optional[int] = 1       # None: as many as the op lists
    doc: str = ""
    # How the op treats blocked (NCHW[x]c) activations, read by
    # graph/passes/layout_rules.py: "elementwise" (y = f(x) per element: any
    # layout, kept), "join" (same-shape operands share one layout),
    # "tolerant" (runs blocked when its `layout` attribute says so), None
    # (NCHW only, or a rule of its own there).
    layout: Optional[str] = None

    def attr(self, name) -> Attr:
        return {a.name: a for a in self.attrs}[name]

    def normalize_attrs(self, attrs: Dict[str, Any]) -> Dict[str, Any]:
        """Fill defaults, check kinds and choices; raises the first OpError."""
        known = {a.name: a for a in self.attrs}
        for key in attrs:
            if key not in known:
                names = ", ".join(known) or "none"
                raise OpError(f'unknown attribute "{key}" for {self.name} '
                              f"(known: {names})", f"attrs.{key}")
        out = {}
        for a in self.attrs:
            if a.name in attrs:
                out[a.name] = a.normalize(attrs[a.name])
            elif a.default is REQUIRED:
                raise OpError(f'{self.name} needs attribute "{a.name}"', "attrs")
            else:
                out[a.name] = a.default
        return out


REGISTRY: Dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.name in REGISTRY:
        raise RuntimeError(f"op {spec.name} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def get(name: str) -> Optional[OpSpec]:
    return REGISTRY.get(name)


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return str(v)


def show_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def expect_rank(shape, rank: int, form: str, where: str) -> None:
    """OpError at `where` unless shape has `rank` dims; form says what it
    must be ("conv2d input must be [N, C, H, W]")."""
    if len(shape) != rank:
        raise OpError(f"{form}, got {show_shape(shape)}", where)


def check_bias(in_shapes, i: int, n: int) -> None:
    """The optional bias, input i, must be [n]."""
    if len(in_shapes) > i and tuple(in_shapes[i]) != (n,):
        raise OpError(f"bias must have shape [{n}], got {show_shape(in_shapes[i])}",
                      f"inputs[{i}]")


def normalize_axis(axis: int, rank: int, where="attrs.axis") -> int:
    if not -rank <= axis < rank:
        raise OpError(f"axis {axis} is out of range for rank {rank}", where)
    return axis % rank


# Load every family (each registers its ops on import).
from hwtune.graph.ops import eltwise, linear, conv, pool, norm, movement, layout, rnn  # noqa: E402,F401,E501
from hwtune.graph.ops import conv_transpose  # noqa: E402,F401
from hwtune.graph.ops import conv3d  # noqa: E402,F401  (video classifiers, NCDHW)
from hwtune.graph.ops import indexing  # noqa: E402,F401  (run-time indices and masks)
from hwtune.graph.ops import attention  # noqa: E402,F401  (fused at ONNX import)
from hwtune.graph.ops import resize, argmax  # noqa: E402,F401
from hwtune.graph.ops import train  # noqa: E402,F401  (backward, loss and optimizer ops)
from hwtune.graph.ops import quant  # noqa: E402,F401  (int8 ops, issue #43)
