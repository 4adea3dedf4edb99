"""ONNX graph -> model.json document: the walk over the nodes and the
context the rules (rules.py) write into.

The walk visits nodes in file order (ONNX requires topological order).
A node whose inputs are all constants (initializers, Constant nodes, shapes
of tensors whose shape is known, results of earlier folding) is evaluated at
import when its rule can fold it, so shape-only subgraphs (Shape -> Gather ->
Unsqueeze -> Concat -> Reshape) vanish. Every other node goes through its
rule, which emits hwtune ops; each emitted op's output shape comes from the
op registry's own shape inference, so `Shape` of any tensor is known
exactly. Tensors keep their ONNX names: graph inputs and outputs match the
file, and a model.json op is easy to trace back to its node.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from hwtune.graph import ops as oplib
from hwtune.graph.naming import fresh_name
from hwtune.onnx.errors import InvalidAxis, OnnxImportError, Unsupported


def attributes(node) -> Dict[str, Any]:
    """A node's attributes as Python values (strings decoded, tensors as
    numpy arrays)."""
    from onnx import helper

    from hwtune.onnx.reader import tensor_value
    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif hasattr(value, "dims") and hasattr(value, "data_type"):
            value = tensor_value(value, f'node "{node.name}" ({node.op_type}): attribute '
                                        f'"{a.name}"')
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        out[a.name] = value
    return out


class Context:
    """What the rules see: constants, shapes, and the hwtune ops emitted."""

    def __init__(self, opset: int, consts: Dict[str, np.ndarray]):
        self.opset = opset
        self.consts: Dict[str, np.ndarray] = dict(consts)   # ONNX name -> value
        self.alias: Dict[str, str] = {}                      # ONNX name -> hwtune tensor
        self.shapes: Dict[str, Tuple[int, ...]] = {}         # hwtune tensor -> shape
        self.inputs: List[Dict[str, Any]] = []
        self.params: Dict[str, np.ndarray] = {}              # hwtune param -> value
        self.ops: List[Dict[str, Any]] = []
        self._param_of: Dict[str, str] = {}                  # const name -> param
        self._taken = set(self.consts)
        # hwtune tensor -> inclusive bounds of its values, for tensors that
        # hold integers (ONNX int and bool tensors, carried as float32)
        self.int_bounds: Dict[str, Tuple[float, float]] = {}
        self.node = None                                      # the node being converted
        self.readers: Dict[str, List[Any]] = {}               # ONNX tensor -> nodes reading it
        self.sequences: Dict[str, Any] = {}                   # ONNX sequence -> composed.Sequence

    # -- names --------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A tensor name no ONNX tensor and no emitted tensor uses."""
        return fresh_name(hint, self._taken, ":")

    def reserve(self, names: Sequence[str]) -> None:
        self._taken.update(n for n in names if n)

    # -- inputs of the current node -----------------------------------------
    def has(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def is_const(self, i: int) -> bool:
        return self.has(i) and self.node.input[i] in self.consts

    def const(self, i: int, what: str = "") -> Optional[np.ndarray]:
        """The constant value of input i (None when the input is omitted);
        Unsupported when it is computed at run time."""
        if not self.has(i):
            return None
        name = self.node.input[i]
        if name not in self.consts:
            raise Unsupported(f"input {i}{f' ({what})' if what else ''} \"{name}\" must be a "
                              "constant (an initializer or computable at import), but it is "
                              "computed at run time")
        return self.consts[name]

    def tensor(self, i: int) -> str:
        """The hwtune tensor of input i; a constant becomes a param (one per
        constant, however many nodes read it)."""
        name = self.node.input[i]
        if name in self.consts:
            if name not in self._param_of:
                self._param_of[name] = self.param(name, self.consts[name])
            return self._param_of[name]
        return self.alias.get(name, name)

    def shape(self, i: int) -> Tuple[int, ...]:
        name = self.node.input[i]
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return self.shapes[self.alias.get(name, name)]

    def out(self, k: int = 0) -> str:
        return self.node.output[k]

    # -- results ------------------------------------------------------------
    def param(self, hint: str, value) -> str:
        """A new param holding value (float32; a 0-d value becomes [1])."""
        arr = np.asarray(value)
        if arr.size == 0:
            raise Unsupported(f'the empty tensor "{hint}" (shape {list(arr.shape)}) is read at '
                              "run time: hwtune's tensors hold at least one element")
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise Unsupported(f'constant "{hint}" of type {arr.dtype} cannot be a float32 '
                              "tensor")
        from hwtune.onnx.intvalues import const_bounds
        bounds = const_bounds(arr)
        arr = arr.astype(np.float32).reshape(arr.shape if arr.ndim else (1,))
        name = hint if hint not in self.shapes else self.fresh(hint)
        self._taken.add(name)
        self.params[name] = arr
        if bounds is not None:
            self.int_bounds[name] = bounds
        self.shapes[name] = tuple(arr.shape)
        return name

    def define(self, onnx_name: str, value) -> None:
        """onnx_name is a constant from here on (folded at import)."""
        self.consts[onnx_name] = np.asarray(value)

    def bind(self, onnx_name: str, tensor: str) -> None:
        """onnx_name is the hwtune tensor `tensor` (a no-op such as Identity)."""
        self.alias[onnx_name] = tensor

    def emit(self, op: str, inputs: Sequence[str], attrs: Optional[Dict[str, Any]] = None,
             out: Optional[str] = None, outputs: Optional[Sequence[str]] = None):
        """Append a hwtune op; returns its output name (or names). Its output
        shape is inferred now by the op registry, so later rules know it."""
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        spec = oplib.get(op)
        names = list(outputs) if outputs else [out or self.fresh(f"{self.out()}:{op}")]
        for n in names:
            self._taken.add(n)
        try:
            resolved = spec.normalize_attrs(attrs)
            shapes = spec.infer([self.shapes[n] for n in inputs], resolved, len(names))
        except oplib.OpError as exc:
            raise Unsupported(f"{op}: {exc}") from None
        for n, s in zip(names, shapes):
            self.shapes[n] = tuple(int(d) for d in s)
        from hwtune.onnx.intvalues import note
        note(self, op, inputs, resolved, names)
        item = {"name": names[0], "op": op, "inputs": list(inputs)}
        if names != [names[0]]:
            item["outputs"] = names
        if attrs:
            item["attrs"] = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
        self.ops.append(item)
        return names if outputs else names[0]


def convert(model, opset: int, input_shapes: Dict[str, Tuple[int, ...]],
            consts: Dict[str, np.ndarray], dtypes: Optional[Dict[str, str]] = None
            ) -> Context:
    """Walk model.graph; returns the filled Context. Raises OnnxImportError
    naming the node for anything it cannot import. dtypes: input -> its
    model.json dtype (float32 when absent); an int or bool input gets the
    range of values it may take (intvalues.index_ranges)."""
    from hwtune.onnx.intvalues import EXACT, index_ranges
    from hwtune.onnx.rules import RULES
    cx = Context(opset, consts)
    g = model.graph
    dtypes = dict(dtypes or {})
    ranges = index_ranges(model, dtypes)
    for node in g.node:
        cx.reserve(node.output)
        for name in node.input:
            cx.readers.setdefault(name, []).append(node)
    for name, shape in input_shapes.items():
        item = {"name": name, "shape": list(shape)}
        if dtypes.get(name, "float32") != "float32":
            low, high = ranges[name]
            if high - 1 > EXACT:
                raise OnnxImportError(
                    f'input "{name}" indexes a table of {high} rows: hwtune carries '
                    f"integer tensors as float32, exact only up to 2^24 = {EXACT}")
            item.update(dtype=dtypes[name], low=low, high=high)
            cx.int_bounds[name] = (float(low), float(high - 1))
        cx.inputs.append(item)
        cx.shapes[name] = tuple(shape)
        cx.reserve([name])
    for node in g.node:
        cx.node = node
        rule = RULES[node.op_type]
        attrs = attributes(node)
        folded = False
        if rule.fold is not None and all(n == "" or n in cx.consts for n in node.input):
            try:
                values = [cx.consts[n] if n else None for n in node.input]
                outs = rule.fold(values, attrs, cx)
            except InvalidAxis as exc:  # invalid on every path: the converter would refuse it too
                raise OnnxImportError(f'node "{node.name}" ({node.op_type}): {exc}') from None
            except Unsupported:
                outs = None  # not foldable this way: let the converter try
            except (ValueError, IndexError, TypeError) as exc:
                raise OnnxImportError(f'node "{node.name}" ({node.op_type}): cannot evaluate '
                                      f"its constant inputs: {exc}") from None
            if outs is not None:
                for name, value in zip(node.output, outs):
                    if name:
                        cx.define(name, value)
                folded = True
        if folded:
            continue
        if rule.convert is None:
            raise OnnxImportError(
                f'node "{node.name}" ({node.op_type}): hwtune imports {node.op_type} only on '
                f"constants and shapes (folded at import); input "
                f'"{next(n for n in node.input if n and n not in cx.consts)}" is computed at '
                "run time")
        try:
            rule.convert(cx, attrs)
        except Unsupported as exc:
            raise OnnxImportError(f'node "{node.name}" ({node.op_type}): {exc}') from None
    for out in g.output:
        if out.name in cx.sequences:
            raise OnnxImportError(f'output "{out.name}" is a sequence (SplitToSequence): '
                                  "hwtune's model outputs are tensors")
    return cx
