"""Which int8 conv outputs the engine keeps as u8 channels-last bytes
(issue #43).

Quantized activations travel between ops as integer values in float32
buffers (docs/onnx.md), and every qconv2d converted its input rows to u8
channels-last before its micro-kernel read them, after its producer had
stored them as float32 NCHW, one channel plane at a time. Where an int8
conv's or residual add's output is read by int8 convs and residual adds
alone, the two sides agree at lowering on bytes instead: the producer gets
the C attribute y_hwc (it stores each pixel's channels as consecutive u8,
image n at the start of that image's float32 slot) and every reader x_hwc
(it reads those bytes in place; a qadd reads and writes bytes in the same
order, an element-wise op does not mind the layout; a max pool2d between
two byte links, ResNet's stem pool, reads and writes bytes too: the max of
u8 integers is one of them). The model's semantics are untouched: the numpy reference, the
graph and its outputs never see the bytes, only the lowered C graph does
(engine/ops/quant.c checks both attributes at prepare).
"""

from typing import Dict, List, Set, Tuple

from hwtune.graph.model import Graph


def _max_pool(op) -> bool:
    a = op.resolved or {}
    return op.op == "pool2d" and a.get("mode") == "max" and a.get("layout", "NCHW") == "NCHW"


def _producer_ok(graph: Graph, op) -> bool:
    a = op.resolved or {}
    shape = graph.shapes.get(op.outputs[0], ()) if len(op.outputs) == 1 else ()
    # u8 requantised output of 4-D NCHW, whole 4-byte channel groups (the
    # readers' pixels are icp = channels rounded up to 4 bytes, with no
    # padding bytes to zero); a conv of one group; a max pool (u8 when its
    # input is bytes: the groups below)
    if len(shape) != 4 or shape[1] % 4:
        return False
    if _max_pool(op):
        return True
    if a.get("out") != "u8":
        return False
    return op.op == "qadd" or (op.op == "qconv2d" and (a.get("groups", 1) == 1 or
                                                      _depthwise(graph, op)))


def _depthwise(graph: Graph, op) -> bool:
    """A depthwise qconv2d with u8 activations (one channel per group,
    multiplier 1): the depthwise int8 kernel (engine/ops/quant.c, kernels/
    qdw) reads and writes channels-last bytes like an ungrouped conv."""
    a = op.resolved or {}
    x = graph.shapes.get(op.inputs[0], ())
    w = graph.shapes.get(op.inputs[1], ()) if len(op.inputs) > 1 else ()
    g = a.get("groups", 1)
    return (len(x) == 4 and len(w) == 4 and g > 1 and g == x[1] == w[0] and w[1] == 1
            and not a.get("a_signed", False) and (w[2] or 1) * (w[3] or 1) <= 64
            and a.get("out", "f32") in ("u8", "f32"))


def _reader_ok(graph: Graph, op, index: int) -> bool:
    a = op.resolved or {}
    if op.op == "qadd" or _max_pool(op):
        return True  # any layout, as long as its inputs and output agree (below)
    return (op.op == "qconv2d" and index == 0 and not a.get("a_signed", False)
            and (a.get("groups", 1) == 1 or _depthwise(graph, op)))


def byte_tensors(graph: Graph) -> Set[str]:
    """The activations that travel as u8 channels-last bytes: written by a
    qconv2d or qadd with a u8 output or a max pool2d, read only by
    ungrouped u8 qconv2d (as x), qadd and max pool2d, not graph outputs;
    and a qadd's two inputs and its output, or a max pool's input and
    output, are all bytes or all float32 (neither loop mixes layouts; a
    pool's output is u8 only when its input is), dropped together until
    that holds."""
    readers: Dict[str, List[Tuple[object, int]]] = {}
    for op in graph.ops:
        for k, name in enumerate(op.inputs):
            readers.setdefault(name, []).append((op, k))
    outputs = set(graph.outputs)
    out: Set[str] = set()
    for op in graph.ops:
        if op.op not in ("qconv2d", "qadd", "pool2d") or not _producer_ok(graph, op):
            continue
        t = op.outputs[0]
        users = readers.get(t, [])
        if t not in outputs and users and all(_reader_ok(graph, r, k) for r, k in users):
            out.add(t)
    adds = [op for op in graph.ops if op.op == "qadd" or _max_pool(op)]
    changed = True
    while changed:
        changed = False
        for op in adds:
            group = set(op.inputs[:2]) | {op.outputs[0]}
            if op.op == "pool2d" and op.outputs[0] in out and op.inputs[0] not in out:
                out.discard(op.outputs[0])  # float in: its max pool writes floats
                changed = True
                continue
            if group & out and not group <= out:
                out -= group
                changed = True
    return out


def hwc_links(graph: Graph) -> Dict[str, Dict[str, int]]:
    """op name -> the C attributes it gets: y_hwc (its output is bytes),
    x_hwc (its input 0, or a qadd's inputs, are bytes)."""
    byte = byte_tensors(graph)
    marks: Dict[str, Dict[str, int]] = {}
    for op in graph.ops:
        if op.op not in ("qconv2d", "qadd", "pool2d"):
            continue
        m = {}
        if op.outputs and op.outputs[0] in byte:
            m["y_hwc"] = 1
        if op.inputs and op.inputs[0] in byte:
            m["x_hwc"] = 1
        if m:
            marks[op.name] = m
    return marks
