"""Which int8 conv outputs the engine keeps as u8 channels-last bytes
(issue #43).

Quantized activations travel between ops as integer values in float32
buffers (docs/onnx.md), and every qconv2d converted its input rows to u8
channels-last before its micro-kernel read them, after its producer had
stored them as float32 NCHW, one channel plane at a time. Where a qconv2d's
output is read by int8 convs alone, the two sides agree at lowering on
bytes instead: the producer gets the C attribute y_hwc (its epilogue stores
each pixel's output channels as consecutive u8, image n at the start of
that image's float32 slot) and every reader x_hwc (it reads those bytes
in place). The model's semantics are untouched: the numpy reference, the
graph and its outputs never see the bytes, only the lowered C graph does
(engine/ops/quant.c checks both attributes at prepare).
"""

from typing import Dict, List, Tuple

from hwtune.graph.model import Graph


def _producer_ok(graph: Graph, op) -> bool:
    a = op.resolved or {}
    shape = graph.shapes.get(op.outputs[0], ())
    # u8 requantised output, one group, whole 4-byte channel groups (the
    # readers' pixels are icp = channels rounded up to 4 bytes, with no
    # padding bytes to zero)
    return (a.get("out") == "u8" and a.get("groups", 1) == 1 and len(shape) == 4
            and shape[1] % 4 == 0)


def _reader_ok(op, index: int) -> bool:
    a = op.resolved or {}
    return (op.op == "qconv2d" and index == 0 and a.get("groups", 1) == 1
            and not a.get("a_signed", False))


def hwc_links(graph: Graph) -> Dict[str, Dict[str, int]]:
    """op name -> the C attributes it gets ({"y_hwc": 1}, {"x_hwc": 1} or
    both) for the qconv2d -> qconv2d links that carry bytes."""
    readers: Dict[str, List[Tuple[object, int]]] = {}
    for op in graph.ops:
        for k, name in enumerate(op.inputs):
            readers.setdefault(name, []).append((op, k))
    outputs = set(graph.outputs)
    marks: Dict[str, Dict[str, int]] = {}
    for op in graph.ops:
        if op.op != "qconv2d" or len(op.outputs) != 1 or not _producer_ok(graph, op):
            continue
        t = op.outputs[0]
        users = readers.get(t, [])
        if t in outputs or not users or not all(_reader_ok(r, k) for r, k in users):
            continue
        marks.setdefault(op.name, {})["y_hwc"] = 1
        for r, _ in users:
            marks.setdefault(r.name, {})["x_hwc"] = 1
    return marks
