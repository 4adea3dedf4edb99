"""Per-op precision applied to a graph (issue #43): the rewrite a tuned
config's op_precision asks for (a graph pass: hwtune.engine builds the
graph a config runs with it, hwtune.precision chooses the table), on the graph the engine runs (batch norms
already folded and ReLUs fused, graph/passes/fuse.py).

int8 (post-training quantisation, onnx/quant.py's representation):
- the activation is quantised per tensor to u8 by one quantize_u8 op per
  tensor, shared by every int8 reader, with the calibrated scale and zero
  point stored in the config (hwtune.precision.calibrate);
- the weights are quantised symmetrically per output channel to s8
  (scale = max|w| / 127 over the channel, zero point 0): a reshape, div and
  quantize_s8 on the weight tensor, which derives from params only, so the
  engine folds them once at prepare (exec/fold.c) and the model's stored
  weights stay float. The scales are computed here from the weight values
  (the fused weights evaluated with the numpy reference), so a config never
  holds per-channel arrays and a model's new weights get their own scales;
- conv2d becomes qconv2d (out f32, relu kept); its residual input, which
  qconv2d does not take, is added after it (then the ReLU / ReLU6), matmul
  on a 2-D weight becomes qmatmul (per output column);
- an int8 op whose output only int8 ops read requantises it to u8 itself
  (out=u8, the readers' calibrated scale): ResNet's conv1 -> conv2 in
  int8 passes u8 values, with no f32 tensor and quantize_u8 between.
bf16: the op's `precision` attribute (matmul, and dense NCHW conv2d).

Op names never change (per-op settings keep applying); added ops and
tensors are named after the op they serve (`conv@wq`, `x@u8`).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from hwtune.graph import ops as oplib
from hwtune.graph.model import Graph, Op, Tensor

PRECISIONS = ("fp32", "int8", "bf16")
_KEYS = {"int8": ("precision", "a_scale", "a_zero"), "bf16": ("precision",)}
# s8 weights are symmetric in [-127, 127]: -128 unused, as ONNX Runtime's
# quantize_static per-channel weights, so w and -w quantise alike.
W_MAX = 127.0


def check_entry(p) -> Optional[str]:
    """Why an op_precision entry cannot be applied, or None."""
    if not isinstance(p, Mapping):
        return f"must be an object like {{\"precision\": \"int8\", ...}}, got {p!r}"
    prec = p.get("precision")
    if prec not in _KEYS:
        return f"precision must be int8 or bf16 (fp32 ops are left out), got {prec!r}"
    unknown = sorted(set(p) - set(_KEYS[prec]))
    if unknown:
        return f"unknown key {unknown[0]!r} for {prec} (known: {', '.join(_KEYS[prec])})"
    if prec == "int8":
        s, z = p.get("a_scale"), p.get("a_zero")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) \
                or s <= 0:
            return f"a_scale must be a finite number > 0, got {s!r}"
        if isinstance(z, bool) or not isinstance(z, int) or not 0 <= z <= 255:
            return f"a_zero must be an integer in 0..255, got {z!r}"
    return None


def _const_tensors(graph: Graph) -> set:
    """Tensors computed from params only (folded at prepare)."""
    const = {t.name for t in graph.params}
    for i in graph.order:
        op = graph.ops[i]
        if op.inputs and all(t in const for t in op.inputs):
            const.update(op.outputs)
    return const


def bf16_supported(kind: str) -> bool:
    spec = oplib.get(kind)
    return spec is not None and any(a.name == "precision" and "bf16" in (a.choices or ())
                                    for a in spec.attrs)


def candidates(graph: Graph, precision: str) -> List[str]:
    """Names of the ops of graph (fused, validated) that can run in
    precision: conv2d (NCHW, constant weights) and matmul on a constant 2-D
    weight for int8; ops whose spec takes precision=bf16 on a constant
    weight for bf16."""
    const = _const_tensors(graph)
    out = []
    for op in graph.ops:
        r = op.resolved or {}
        if len(op.inputs) < 2 or op.inputs[1] not in const:
            continue
        if precision == "int8":
            if op.op == "conv2d" and r.get("layout", "NCHW") == "NCHW":
                out.append(op.name)
            elif (op.op == "matmul" and not r.get("transpose_a")
                  and len(graph.shapes[op.inputs[1]]) == 2
                  and len(graph.shapes[op.inputs[0]]) >= 2):
                out.append(op.name)
        elif precision == "bf16" and op.op in ("matmul", "conv2d") and bf16_supported(op.op):
            # the bf16 conv is dense NCHW only (engine/ops/conv.c refuses
            # grouped, depthwise and NCHWc convs with precision bf16)
            if op.op == "conv2d" and ((op.attrs.get("group") or 1) != 1
                                      or r.get("layout", "NCHW") != "NCHW"):
                continue
            out.append(op.name)
    return out


def weight_values(graph: Graph, names: List[str]) -> Dict[str, np.ndarray]:
    """The values of constant tensors `names` (params, or ops on params such
    as the fused batch norm's scaled weights), by the numpy reference."""
    from hwtune.graph.reference import init_params
    values = init_params(graph)
    want = set(names) - set(values)
    if want:
        const = _const_tensors(graph)
        for i in graph.order:
            op = graph.ops[i]
            if not all(t in const for t in op.inputs) or not op.inputs:
                continue
            outs = oplib.get(op.op).ref([values[t] for t in op.inputs], op.resolved,
                                        len(op.outputs))
            values.update(zip(op.outputs, outs))
    return {n: values[n] for n in names}


def weight_scales(w: np.ndarray, axis: int) -> np.ndarray:
    """Per output channel (axis) symmetric s8 scales: max|w| / 127 (1 for
    an all-zero channel, whose integers are 0 whatever the scale)."""
    other = tuple(a for a in range(w.ndim) if a != axis)
    m = np.abs(w.astype(np.float64)).max(axis=other)
    return np.where(m > 0, m / W_MAX, 1.0).astype(np.float32)


class _Rewriter:
    def __init__(self, graph: Graph, op_precision: Mapping[str, Mapping[str, Any]],
                 values: Optional[Mapping[str, np.ndarray]] = None):
        self.g = graph
        self.want = op_precision
        self.ops: List[Op] = []
        self.params: List[Tensor] = []
        self.quantized: Dict[tuple, str] = {}  # (tensor, scale, zero) -> u8 tensor
        int8 = [op for op in graph.ops if (op_precision.get(op.name) or {}).get("precision")
                == "int8"]
        # tensor -> the ops reading it (a requantised output, _requant)
        self.readers: Dict[str, List[tuple]] = {}
        for op in graph.ops:
            for k, t in enumerate(op.inputs):
                self.readers.setdefault(t, []).append((op.name, k))
        self.outputs = set(graph.outputs)
        names = [op.inputs[1] for op in int8]
        have = dict(values or {})
        missing = [n for n in names if n not in have]
        if missing:
            have.update(weight_values(graph, missing))
        self.w = have

    def emit(self, name, kind, inputs, outputs, attrs, like: Op):
        self.ops.append(Op(name, kind, list(inputs), list(outputs), dict(attrs), like.loc,
                           like.origin))

    def param(self, name: str, values: np.ndarray) -> str:
        v = np.asarray(values, np.float32)
        self.params.append(Tensor(name, tuple(v.shape), init={"data": v.reshape(-1).tolist()}))
        return name

    def act_u8(self, x: str, p: Mapping[str, Any], like: Op) -> str:
        key = (x, float(p["a_scale"]), int(p["a_zero"]))
        if key not in self.quantized:
            name = f"{x}@u8" if not any(k[0] == x for k in self.quantized) else \
                f"{x}@u8_{len(self.quantized)}"
            self.emit(name, "quantize_u8", [x], [name],
                      {"scale": key[1], "zero_point": float(key[2])}, like)
            self.quantized[key] = name
        return self.quantized[key]

    def requant(self, out: str, at: Dict[str, Any]) -> str:
        """The name the int8 op writes out to: when every reader of out is
        an int8 op reading it as its activation (they share its calibrated
        params) and out is no graph
        output, the op requantises its own output to u8 (out=u8 in its
        epilogue) under the name act_u8 gives out, and no quantize_u8 pass
        over an f32 tensor is left between the two; else out (f32)."""
        reads = self.readers.get(out, [])
        users = [u for u, _ in reads]
        # read as the activation (input 0) only: a residual input stays f32
        if not reads or out in self.outputs or any(
                k != 0 or (self.want.get(u) or {}).get("precision") != "int8" for u, k in reads):
            return out
        params = {(float(self.want[u]["a_scale"]), int(self.want[u]["a_zero"])) for u in users}
        if len(params) != 1:
            return out
        (scale, zero), = params
        name = f"{out}@u8"
        at.update(out="u8", y_scale=scale, y_zero=zero)
        self.quantized[(out, scale, zero)] = name
        return name

    def weights_s8(self, op: Op, w: str, scales: np.ndarray, shape: List[int]) -> str:
        """w / scale (per channel, broadcast by shape) rounded to s8: ops on
        a constant, folded at prepare."""
        s = self.param(f"{op.name}@w_scale", scales.reshape(shape))
        self.emit(f"{op.name}@w_div", "div", [w, s], [f"{op.name}@w_div"], {}, op)
        self.emit(f"{op.name}@wq", "quantize_s8", [f"{op.name}@w_div"], [f"{op.name}@wq"],
                  {"scale": 1.0, "zero_point": 0.0}, op)
        return f"{op.name}@wq"

    def conv(self, op: Op, p: Mapping[str, Any]) -> None:
        r = op.resolved
        x, w = op.inputs[0], op.inputs[1]
        oc = self.g.shapes[w][0]
        scales = weight_scales(self.w[w], 0)
        wq = self.weights_s8(op, w, scales, [oc, 1, 1, 1])
        ws = self.param(f"{op.name}@w_scale_oc", scales)
        wz = self.param(f"{op.name}@w_zero", np.zeros(1, np.float32))
        ins = [self.act_u8(x, p, op), wq, ws, wz]
        if len(op.inputs) >= 3:
            ins.append(op.inputs[2])
        residual = op.inputs[3] if len(op.inputs) == 4 else None
        clip_max = r.get("relu_max")
        out = op.outputs[0]
        at = {"stride": list(r["stride"]), "padding": list(r["padding"]),
              "dilation": list(r["dilation"]), "groups": int(r.get("group") or 1),
              "a_scale": float(p["a_scale"]), "a_zero": int(p["a_zero"]), "out": "f32"}
        if r.get("padding_end") is not None:
            at["padding_end"] = list(r["padding_end"])
        # qconv2d's epilogue has a ReLU but no residual and no ReLU6 bound:
        # those follow as their own ops.
        fused_relu = bool(r.get("relu")) and residual is None and clip_max is None
        if fused_relu:
            at["relu"] = True
        act = r.get("act")  # SiLU / HardSwish: their own op after qconv2d
        tail = residual is not None or (r.get("relu") and not fused_relu) or act is not None
        y = f"{out}@q" if tail else self.requant(out, at)
        self.emit(op.name, "qconv2d", ins, [y], at, op)
        if residual is not None:
            z = f"{out}@res" if r.get("relu") or act is not None else out
            self.emit(f"{op.name}@res", "add", [y, residual], [z], {}, op)
            y = z
        if r.get("relu") and not fused_relu:
            if clip_max is None:
                self.emit(f"{op.name}@relu", "relu", [y], [out], {}, op)
            else:
                self.emit(f"{op.name}@relu", "clip", [y], [out],
                          {"min": 0.0, "max": float(clip_max)}, op)
        if act is not None:
            self.emit(f"{op.name}@{act}", act, [y], [out], {}, op)

    def matmul(self, op: Op, p: Mapping[str, Any]) -> None:
        r = op.resolved
        a, b = op.inputs[0], op.inputs[1]
        wv = self.w[b]
        if r.get("transpose_b"):  # [N, K] stored: the int8 GEMM takes [K, N]
            wv = wv.T
            self.emit(f"{op.name}@bT", "transpose", [b], [f"{op.name}@bT"], {"perm": [1, 0]},
                      op)
            b = f"{op.name}@bT"
        scales = weight_scales(wv, 1)
        wq = self.weights_s8(op, b, scales, [1, wv.shape[1]])
        ws = self.param(f"{op.name}@w_scale_n", scales)
        wz = self.param(f"{op.name}@w_zero", np.zeros(1, np.float32))
        ins = [self.act_u8(a, p, op), wq, ws, wz]
        if len(op.inputs) == 3:
            ins.append(op.inputs[2])
        at = {"a_scale": float(p["a_scale"]), "a_zero": int(p["a_zero"]), "out": "f32"}
        y = self.requant(op.outputs[0], at)
        self.emit(op.name, "qmatmul", ins, [y], at, op)

    def run(self) -> List[Op]:
        for i in self.g.order:
            op = self.g.ops[i]
            p = self.want.get(op.name)
            prec = (p or {}).get("precision", "fp32")
            if prec == "int8" and op.op == "conv2d":
                self.conv(op, p)
            elif prec == "int8" and op.op == "matmul":
                self.matmul(op, p)
            elif prec == "bf16":
                self.emit(op.name, op.op, op.inputs, op.outputs,
                          dict(op.attrs, precision="bf16"), op)
            else:
                self.ops.append(op)
        return self.ops


class PrecisionError(ValueError):
    """An op_precision entry that does not fit the graph."""


def apply_precision(graph: Graph, op_precision: Mapping[str, Mapping[str, Any]],
                    values: Optional[Mapping[str, np.ndarray]] = None) -> Graph:
    """A new validated graph with the ops of op_precision rewritten (graph
    itself for an empty table). graph: validated, as the engine runs it
    (fused); values: weight values already computed (weight_values), else
    they are. PrecisionError names an op that is missing or cannot run in
    the asked precision."""
    from hwtune.graph.passes.layout import ensure_validated
    from hwtune.graph.validate import validate_graph
    if not op_precision:
        return graph
    graph = ensure_validated(graph)
    by_prec: Dict[str, set] = {}
    for name, p in op_precision.items():
        msg = check_entry(p)
        if msg:
            raise PrecisionError(f"op_precision[{name!r}]: {msg}")
        prec = p["precision"]
        if prec not in by_prec:
            by_prec[prec] = set(candidates(graph, prec))
        if name not in by_prec[prec]:
            kind = next((op.op for op in graph.ops if op.name == name), None)
            raise PrecisionError(f"op_precision[{name!r}]: " + (
                f"no op named {name!r} in {graph.name}" if kind is None else
                f"a {kind} that cannot run in {prec} here"))
    rw = _Rewriter(graph, op_precision, values)
    ops = rw.run()
    new = Graph(name=graph.name, inputs=list(graph.inputs), params=list(graph.params) +
                rw.params, ops=ops, outputs=list(graph.outputs), seed=graph.seed,
                description=graph.description, vars=dict(graph.vars), source=graph.source)
    validate_graph(new)
    for key in ("_fused_ops",):
        if hasattr(graph, key):
            setattr(new, key, getattr(graph, key))
    return new
