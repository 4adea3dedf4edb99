"""`hwtune import`: an ONNX file -> model.json + weights sidecar."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Tuple

from hwtune.onnx.errors import OnnxImportError

# Bump when the rules change what an import writes: the cache of on-the-fly
# imports is keyed by it.
# 4: the gemm85 (q/kt scale fold) and convnext (GELU/bias/layer-scale folds)
# branches each moved 2 -> 3 on their own; 4 rebuilds caches either wrote.
# 5: int inputs read through Transpose / Slice get their table's range
# (XLNet), empty Slices and one-operand Einsums import.
# 6: a QDQ depthwise Conv is the float depthwise conv (onnx/quant.py).
# 7: QDQ DequantizeLinear -> MaxPool -> QuantizeLinear is one pool2d on the
# integers (issue #43).
# 8: GatherND, ScatterElements, the QOperator com.microsoft element-wise ops
# and a depthwise QLinearConv as float (merged beside 7).
# 9: a QDQ depthwise Conv with u8 activations and one filter per channel is
# a qconv2d again (so is such a depthwise QLinearConv): the int8 depthwise
# kernel (kernels/qdw) runs it.
# 10: ... only when its output goes to int8 convs (onnx/quant.py _feeds_int8_convs).
IMPORTER_VERSION = 10


@dataclass
class ImportSummary:
    model: str                 # model.json written
    weights: str               # sidecar written
    name: str
    opset: int
    producer: str
    nodes: int                 # ONNX nodes
    folded: int                # nodes evaluated at import (constants, shapes)
    ops: int                   # model.json ops
    params: int
    param_bytes: int
    inputs: Dict[str, Tuple[int, ...]]
    outputs: Dict[str, Tuple[int, ...]]

    def to_json(self):
        return asdict(self)


def _check_op_types(model, path):
    """Refuse every op type without a row before converting anything."""
    from hwtune.onnx.quant import MS_OPS
    from hwtune.onnx.reader import DEFAULT_DOMAINS
    from hwtune.onnx.rules import RULES, supported_ops
    missing = {}
    for node in model.graph.node:
        kind = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        known = node.op_type in RULES and (node.domain in DEFAULT_DOMAINS or (
            node.domain == "com.microsoft" and node.op_type in MS_OPS))  # issue #43
        if not known and kind not in missing:
            missing[kind] = node.name or node.output[0]
    if missing:
        (kind, node), *rest = missing.items()
        more = f" (also unsupported: {', '.join(k for k, _ in rest)})" if rest else ""
        raise OnnxImportError(f'{path}: node "{node}" uses ONNX op {kind}, which hwtune does '
                              f"not support yet{more}. Supported: {supported_ops()}")


def _live(cx, outputs):
    """The ops and params the outputs depend on (dead ONNX nodes dropped)."""
    producer = {}
    for k, op in enumerate(cx.ops):
        for name in op.get("outputs", [op["name"]]):
            producer[name] = k
    need, stack, keep = set(), list(outputs), set()
    while stack:
        t = stack.pop()
        if t in need:
            continue
        need.add(t)
        if t in producer and producer[t] not in keep:
            keep.add(producer[t])
            stack.extend(cx.ops[producer[t]]["inputs"])
    return [op for k, op in enumerate(cx.ops) if k in keep], need


def import_onnx(path: str, out_json: str, shapes=None, dims=None,
                name: Optional[str] = None) -> ImportSummary:
    """Convert the ONNX model at path; writes out_json and its weights file
    (<stem>.weights.safetensors beside it) and checks the result loads."""
    from hwtune.graph import load_model
    from hwtune.graph.model import dump_document
    from hwtune.graph.weights import SUFFIX, write_weights
    from hwtune.onnx.convert import convert
    from hwtune.onnx.attention import fuse_attention
    from hwtune.onnx.fuse import (fold_pads_into_convs, fold_reshapes_around_elementwise,
                                  fold_scales_into_matmuls, fuse_gelu, fuse_gelu_tanh,
                                  fuse_matmul_bias, fuse_silu)
    from hwtune.onnx.reader import input_dtypes, input_shapes, read_model, tensor_value

    model, opset = read_model(path)
    _check_op_types(model, path)
    ins = input_shapes(model, shapes, dims)
    _check_input_sizes(ins)
    consts = {t.name: tensor_value(t, f'{path}: initializer "{t.name}"')
              for t in model.graph.initializer}
    cx = convert(model, opset, ins, consts, input_dtypes(model))
    outs = [o.name for o in model.graph.output]
    cx.node = None
    for o in outs:
        if o in cx.consts:
            raise OnnxImportError(f'{path}: output "{o}" is a constant (computable at import); '
                                  "hwtune graphs compute their outputs")
        if cx.alias.get(o, o) != o:  # an output that is another tensor (Identity, Reshape
            src = cx.alias[o]         # to the same shape): copy it under its own name
            cx.emit("reshape", [src], {"shape": list(cx.shapes[src])}, out=o)
    ops, _ = _live(cx, outs)
    ops = fuse_gelu_tanh(fuse_silu(fold_pads_into_convs(ops, outs), outs), outs)
    ops = fuse_gelu(fuse_matmul_bias(ops, outs, cx.params), outs)
    ops = fold_reshapes_around_elementwise(ops, outs, cx.shapes)
    ops = fold_scales_into_matmuls(ops, outs, cx.params)
    ops = fuse_attention(ops, outs, cx.shapes)
    # the params the ops read: the folds above add some (a weight scaled
    # into a new one) and leave others unread
    read = {t for op in ops for t in op["inputs"]}
    params = [(n, a) for n, a in cx.params.items() if n in read]

    out_json = os.path.abspath(out_json)
    stem = os.path.basename(out_json)
    stem = stem[:-5] if stem.endswith(".json") else stem
    weights_path = os.path.join(os.path.dirname(out_json), stem + SUFFIX)
    sha = write_weights(weights_path, params,
                        {"source": os.path.basename(path), "opset": str(opset)})
    producer = " ".join(x for x in (model.producer_name, model.producer_version) if x)
    label = name or model.graph.name or stem
    if not label or label in ("main_graph", "torch_jit", "torch-jit-export"):
        label = stem
    doc = {
        "format_version": 1,
        "name": label,
        "description": f"imported from {os.path.basename(path)} (ONNX opset {opset}"
                       f"{', ' + producer if producer else ''})",
        "seed": 0,
        "weights": {"file": os.path.basename(weights_path), "sha256": sha},
        "inputs": cx.inputs,
        "params": [{"name": n, "shape": list(a.shape), "init": "file"} for n, a in params],
        "ops": ops,
        "outputs": outs,
    }
    tmp = out_json + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(dump_document(doc))
        os.replace(tmp, out_json)
    except OSError as exc:
        raise OnnxImportError(f"cannot write {out_json}: {exc.strerror or exc}") from None
    graph = load_model(out_json)  # the importer's own check: it must load and validate
    return ImportSummary(
        model=out_json, weights=weights_path, name=label, opset=opset, producer=producer,
        nodes=len(model.graph.node), folded=len(model.graph.node) - _converted(model, cx),
        ops=len(graph.ops), params=len(params),
        param_bytes=int(sum(a.nbytes for _, a in params)),
        inputs={n: tuple(s) for n, s in ins.items()},
        outputs={o: tuple(graph.shapes[o]) for o in outs})


def _check_input_sizes(ins) -> None:
    """An input above the tensor size limit is refused before the rules
    size anything by it (an LSTM's [batch, hidden] state zeros, say)."""
    from hwtune.graph.limits import ENV, Limits, human_bytes
    limit = Limits.from_env().max_tensor_bytes
    for name, shape in ins.items():
        nbytes = 4 * math.prod(shape)
        if nbytes > limit:
            raise OnnxImportError(f'input "{name}" of shape {list(shape)} needs '
                                  f"{human_bytes(nbytes)}, more than the {human_bytes(limit)} "
                                  f"limit (raise it with {ENV['max_tensor_bytes']}=SIZE)")


def _converted(model, cx) -> int:
    """Nodes not folded: those whose outputs are not constants."""
    return sum(1 for n in model.graph.node if not all(o in cx.consts for o in n.output if o))

