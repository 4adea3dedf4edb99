"""Import-time rewrites of the emitted model.json ops.

SiLU (swish), x * sigmoid(x), arrives from exporters as a Sigmoid and a Mul
of its input by its output (PyTorch's F.silu, EfficientNet's and
MobileNetV3's blocks, YOLO's): where the sigmoid's output has that one
reader and is not a graph output, the pair becomes one silu op (one pass
over the activation instead of two, no intermediate).

A zero Pad on H and W feeding only a convolution is how exporters write
padding the conv itself could not express (PyTorch's ZeroPad2d, TF's
explicit "same" pads): it becomes the conv's own padding / padding_end
(conv2d pads asymmetrically), which saves a full copy of the activation.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence


def _pair(v, default):
    if v is None:
        return list(default)
    return [int(v), int(v)] if isinstance(v, int) else [int(d) for d in v]


def fold_pads_into_convs(ops: List[Dict[str, Any]],
                         outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """ops with each foldable pad removed and its widths added to the
    consuming conv2d's padding."""
    readers: Dict[str, List[int]] = {}
    for k, op in enumerate(ops):
        for t in op["inputs"]:
            readers.setdefault(t, []).append(k)
    drop = set()
    for k, op in enumerate(ops):
        a = op.get("attrs", {})
        pads = a.get("pads", [])
        users = readers.get(op["name"], [])
        if (op["op"] != "pad" or float(a.get("value", 0.0)) != 0.0 or len(pads) != 8
                or any(pads[i] for i in (0, 1, 4, 5)) or op["name"] in outputs
                or len(users) != 1):
            continue
        conv = ops[users[0]]
        if conv["op"] != "conv2d" or conv["inputs"][0] != op["name"] or \
                conv["inputs"].count(op["name"]) != 1:
            continue
        ca = conv.setdefault("attrs", {})
        if ca.get("layout", "NCHW") != "NCHW":
            continue
        begin = _pair(ca.get("padding"), (0, 0))
        end = _pair(ca.get("padding_end"), begin)
        ca["padding"] = [begin[0] + pads[2], begin[1] + pads[3]]
        end = [end[0] + pads[6], end[1] + pads[7]]
        if end != ca["padding"]:
            ca["padding_end"] = end
        else:
            ca.pop("padding_end", None)
        conv["inputs"][0] = op["inputs"][0]
        drop.add(k)
    return [op for k, op in enumerate(ops) if k not in drop]


def fuse_silu(ops: List[Dict[str, Any]], outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """ops with each sigmoid(x) -> mul(x, s) (either operand order) pair
    replaced by silu(x), under the mul's name."""
    readers: Dict[str, List[int]] = {}
    for k, op in enumerate(ops):
        for t in op["inputs"]:
            readers.setdefault(t, []).append(k)
    drop = set()
    for k, op in enumerate(ops):
        users = readers.get(op["name"], [])
        if op["op"] != "sigmoid" or op["name"] in outputs or len(users) != 1 \
                or "outputs" in op:
            continue
        mul = ops[users[0]]
        x = op["inputs"][0]
        if mul["op"] != "mul" or sorted(mul["inputs"]) != sorted([x, op["name"]]) \
                or x == op["name"]:
            continue
        mul["op"], mul["inputs"] = "silu", [x]
        mul.pop("attrs", None)
        drop.add(k)
    return [op for k, op in enumerate(ops) if k not in drop]
