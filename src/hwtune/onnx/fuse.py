"""Import-time rewrites of the emitted model.json ops.

SiLU (swish), x * sigmoid(x), arrives from exporters as a Sigmoid and a Mul
of its input by its output (PyTorch's F.silu, EfficientNet's and
MobileNetV3's blocks, YOLO's): where the sigmoid's output has that one
reader and is not a graph output, the pair becomes one silu op (one pass
over the activation instead of two, no intermediate); Mish written out
(Softplus -> Tanh -> Mul, opset-17 exports) one mish op. The tanh GELU
written out (fuse_gelu_tanh) becomes one gelu_tanh op the same way, the
erf GELU written out (fuse_gelu_erf) one gelu op.

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
    replaced by silu(x), under the mul's name; likewise softplus(x) ->
    tanh -> mul(x, t) (Mish as opset-17 exports write it) by mish(x)."""
    readers: Dict[str, List[int]] = {}
    for k, op in enumerate(ops):
        for t in op["inputs"]:
            readers.setdefault(t, []).append(k)

    def sole(op):
        users = readers.get(op["name"], [])
        if op["name"] in outputs or len(users) != 1 or "outputs" in op:
            return None
        return users[0]

    drop = set()
    for k, op in enumerate(ops):
        if op["op"] not in ("sigmoid", "softplus") or sole(op) is None:
            continue
        x, chain, j = op["inputs"][0], [k], sole(op)
        if op["op"] == "softplus":
            if ops[j]["op"] != "tanh" or sole(ops[j]) is None:
                continue
            chain.append(j)
            j = sole(ops[j])
        mul, last = ops[j], ops[chain[-1]]["name"]
        if mul["op"] != "mul" or sorted(mul["inputs"]) != sorted([x, last]) or x == last:
            continue
        mul["op"], mul["inputs"] = ("silu" if op["op"] == "sigmoid" else "mish"), [x]
        mul.pop("attrs", None)
        drop.update(chain)
    return [op for k, op in enumerate(ops) if k not in drop]


def _close(v, want):
    return abs(v - want) <= 1e-6 * abs(want)


class _Chains:
    """Who produces and who reads each tensor of the emitted ops, for the
    GELU matchers: an intermediate joins a fused op only when it has one
    reader and is not a graph output."""

    def __init__(self, ops: List[Dict[str, Any]], outputs: Sequence[str]):
        self.ops = ops
        self.producer = {op["name"]: k for k, op in enumerate(ops) if "outputs" not in op}
        self.readers: Dict[str, List[int]] = {}
        for k, op in enumerate(ops):
            for t in op["inputs"]:
                self.readers.setdefault(t, []).append(k)
        self.out_set = set(outputs)

    def inner(self, t, kind):
        """The op producing t, if of this kind and t has only that reader."""
        k = self.producer.get(t)
        if (k is None or self.ops[k]["op"] != kind or t in self.out_set
                or len(self.readers.get(t, [])) != 1):
            return None
        return k

    def affine(self, k, scale, shift):
        a = self.ops[k].get("attrs", {})
        return _close(float(a.get("scale", 1.0)), scale) and float(a.get("shift", 0.0)) == shift

    def reader(self, t, kind):
        users = self.readers.get(t, [])
        if t in self.out_set or len(users) != 1 or self.ops[users[0]]["op"] != kind:
            return None
        return users[0]

    def half_product(self, ka, x):
        """([ops folded], the last op) of the product of ops[ka]'s output
        (1 + tanh or 1 + erf) with x/2, in the three orders exporters write
        (x/2 times, x times then halved, or x times the half), or None."""
        ops = self.ops
        km2 = self.reader(ops[ka]["name"], "mul")
        if km2 is not None and len(ops[km2]["inputs"]) == 2:
            other = [t for t in ops[km2]["inputs"] if t != ops[ka]["name"]]
            kh = self.inner(other[0], "affine") if len(other) == 1 else None
            if kh is not None and self.affine(kh, 0.5, 0.0) and ops[kh]["inputs"] == [x]:
                return [ka, kh], km2
            if other == [x]:
                kz = self.reader(ops[km2]["name"], "affine")
                if kz is not None and self.affine(kz, 0.5, 0.0):
                    return [ka, km2], kz
            return None
        kh = self.reader(ops[ka]["name"], "affine")
        if kh is not None and self.affine(kh, 0.5, 0.0):
            km2 = self.reader(ops[kh]["name"], "mul")
            if km2 is not None and sorted(ops[km2]["inputs"]) == sorted([x, ops[kh]["name"]]):
                return [ka, kh], km2
        return None


def fuse_gelu_tanh(ops: List[Dict[str, Any]], outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """The tanh GELU written out (PyTorch's exports of gelu(approximate=
    "tanh"), GPT-2's gelu_new), x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))), as the importer emits it: x^3 two muls, the constants affine
    ops, then tanh, + 1, and the product with x/2 (x/2 times, x times then
    halved, or x times the half). Each intermediate with one reader and not
    a graph output becomes part of one gelu_tanh op under the last op's name
    (nine passes over the activation become one)."""
    cx = _Chains(ops, outputs)
    inner, affine, reader = cx.inner, cx.affine, cx.reader

    def cube_of(t, x):
        k = inner(t, "mul")
        if k is None:
            return None
        a, b = ops[k]["inputs"]
        q = b if a == x else a if b == x else None
        kq = inner(q, "mul") if q is not None and q != x else None
        if kq is None or ops[kq]["inputs"] != [x, x]:
            return None
        return [k, kq]

    drop, taken = set(), set()
    for kt, tanh in enumerate(ops):
        if tanh["op"] != "tanh":
            continue
        ku = inner(tanh["inputs"][0], "affine")
        if ku is None or not affine(ku, 0.7978845608028654, 0.0):
            continue
        ks = inner(ops[ku]["inputs"][0], "add")
        if ks is None or len(ops[ks]["inputs"]) != 2:
            continue
        found = None
        for x, m in (ops[ks]["inputs"], ops[ks]["inputs"][::-1]):
            km = inner(m, "affine")
            if km is not None and affine(km, 0.044715, 0.0):
                cube = cube_of(ops[km]["inputs"][0], x)
                if cube is not None:
                    found = x, [km] + cube
        if found is None:
            continue
        x, chain = found
        ka = reader(tanh["name"], "affine")
        if ka is None or not affine(ka, 1.0, 1.0):
            continue
        tail = cx.half_product(ka, x)
        if tail is None:
            continue
        parts = chain + [ks, ku, kt] + tail[0]
        if taken & set(parts + [tail[1]]):
            continue
        taken.update(parts + [tail[1]])
        drop.update(parts)
        last = ops[tail[1]]
        last["op"], last["inputs"] = "gelu_tanh", [x]
        last.pop("attrs", None)
    return [op for k, op in enumerate(ops) if k not in drop]


def fuse_gelu_erf(ops: List[Dict[str, Any]], outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """The exact GELU written out (PyTorch's opset-17 exports of gelu(),
    BERT's intermediate activation), x/2 (1 + erf(x / sqrt 2)), as the
    importer emits it: x / sqrt 2 an affine, erf, + 1 an affine, and the
    product with x/2 in the three orders above. The chain becomes one gelu
    op under the last op's name where every intermediate has one reader and
    is not a graph output (five passes over BERT-base's [128, 3072]
    activation become one: erf, the affines and the mul took 4.5% of the
    int8 BERT-base's samples against 32% in the VNNI micro-kernel, perf,
    1 thread, under load)."""
    cx = _Chains(ops, outputs)
    drop, taken = set(), set()
    for ke, erf in enumerate(ops):
        if erf["op"] != "erf":
            continue
        kd = cx.inner(erf["inputs"][0], "affine")
        if kd is None or not cx.affine(kd, 0.7071067811865476, 0.0):
            continue
        x = ops[kd]["inputs"][0]
        ka = cx.reader(erf["name"], "affine")
        if ka is None or not cx.affine(ka, 1.0, 1.0):
            continue
        tail = cx.half_product(ka, x)
        if tail is None:
            continue
        parts = [kd, ke] + tail[0]
        if taken & set(parts + [tail[1]]):
            continue
        taken.update(parts + [tail[1]])
        drop.update(parts)
        last = ops[tail[1]]
        last["op"], last["inputs"] = "gelu", [x]
        last.pop("attrs", None)
    return [op for k, op in enumerate(ops) if k not in drop]
