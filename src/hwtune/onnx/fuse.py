"""Import-time rewrites of the emitted model.json ops.

SiLU (swish), x * sigmoid(x), arrives from exporters as a Sigmoid and a Mul
of its input by its output (PyTorch's F.silu, EfficientNet's and
MobileNetV3's blocks, YOLO's): where the sigmoid's output has that one
reader and is not a graph output, the pair becomes one silu op (one pass
over the activation instead of two, no intermediate); Mish written out
(Softplus -> Tanh -> Mul, opset-17 exports) one mish op. The tanh GELU
written out (fuse_gelu_tanh) becomes one gelu_tanh op the same way, the
exact (erf) GELU written out (fuse_gelu) one gelu op.

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


def fuse_gelu_tanh(ops: List[Dict[str, Any]], outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """The tanh GELU written out (PyTorch's exports of gelu(approximate=
    "tanh"), GPT-2's gelu_new), x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))), as the importer emits it: x^3 two muls, the constants affine
    ops, then tanh, + 1, and the product with x/2 (x/2 times, x times then
    halved, or x times the half). Each intermediate with one reader and not
    a graph output becomes part of one gelu_tanh op under the last op's name
    (nine passes over the activation become one)."""
    inner, reader, affine = _matchers(ops, outputs)

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
        tail = _half_product(ops, ka, x, inner, reader, affine)
        if tail is None:
            continue
        _commit(ops, chain + [ks, ku, kt] + tail[0], tail[1], "gelu_tanh", x, taken, drop)
    return [op for k, op in enumerate(ops) if k not in drop]


def _commit(ops, parts, last_k, op_type, x, taken, drop) -> None:
    """One matched GELU chain becomes op_type(x) under the last op's name:
    the ops of parts are dropped, unless a chain already taken shares one."""
    if taken & set(parts + [last_k]):
        return
    taken.update(parts + [last_k])
    drop.update(parts)
    last = ops[last_k]
    last["op"], last["inputs"] = op_type, [x]
    last.pop("attrs", None)


def fuse_gelu(ops: List[Dict[str, Any]], outputs: Sequence[str]) -> List[Dict[str, Any]]:
    """The exact GELU written out (opset < 20 has no Gelu: PyTorch's exports
    of nn.GELU(), ConvNeXt's and BERT's blocks), x/2 (1 + erf(x / sqrt 2)),
    as the importer emits it: the division by sqrt 2 an affine op, erf, + 1,
    and the product with x/2 in any of the orders fuse_gelu_tanh takes. It
    becomes one gelu op under the last op's name where every intermediate
    has one reader and is not a graph output (five passes over the
    activation become one: in ConvNeXt-T over the 4C-wide hidden layer, of
    4.8 MB at 56x56)."""
    inner, reader, affine = _matchers(ops, outputs)
    drop, taken = set(), set()
    for ke, erf in enumerate(ops):
        if erf["op"] != "erf":
            continue
        ku = inner(erf["inputs"][0], "affine")
        if ku is None or not affine(ku, 0.7071067811865476, 0.0):
            continue
        x = ops[ku]["inputs"][0]
        ka = reader(erf["name"], "affine")
        if ka is None or not affine(ka, 1.0, 1.0):
            continue
        tail = _half_product(ops, ka, x, inner, reader, affine)
        if tail is None:
            continue
        _commit(ops, [ku, ke] + tail[0], tail[1], "gelu", x, taken, drop)
    return [op for k, op in enumerate(ops) if k not in drop]


def fuse_matmul_bias(ops: List[Dict[str, Any]], outputs: Sequence[str],
                     params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A bias-free matmul whose output, directly or through the reshape
    back to [..., N] that a MatMul over rank > 2 becomes, is read only by
    an add of a 1-D param of N floats: the param becomes the matmul's bias
    input (added to the tile in the GEMM's epilogue) and the add goes, its
    name kept by the op that now produces its value. PyTorch exports
    nn.Linear on rank > 2 as MatMul + Add (ConvNeXt's two Linear per block,
    BERT's): a pass over the output less per Linear."""
    inner, reader, _ = _matchers(ops, outputs)
    drop = set()
    for km, mm in enumerate(ops):
        if mm["op"] != "matmul" or len(mm["inputs"]) != 2 or "outputs" in mm:
            continue
        attrs = mm.get("attrs", {})
        n = params.get(mm["inputs"][1])
        if n is None or getattr(n, "ndim", 0) != 2 or attrs.get("precision", "fp32") != "fp32":
            continue
        n = n.shape[0] if attrs.get("transpose_b") else n.shape[1]
        last = km
        kr = reader(mm["name"], "reshape")
        if kr is not None and list(ops[kr]["attrs"]["shape"])[-1:] == [n]:
            last = kr
        ka = reader(ops[last]["name"], "add")
        if ka is None or len(ops[ka]["inputs"]) != 2:
            continue
        bias = [t for t in ops[ka]["inputs"] if t != ops[last]["name"]]
        b = params.get(bias[0]) if len(bias) == 1 else None
        if b is None or b.shape != (n,) or str(b.dtype) != "float32":
            continue
        mm["inputs"] = mm["inputs"] + bias
        drop.add(ka)
        # the add was the old name's only reader: its readers (or the
        # graph's outputs) find the value under the add's name
        ops[last]["name"] = ops[ka]["name"]
    return [op for k, op in enumerate(ops) if k not in drop]


def fold_reshapes_around_elementwise(ops: List[Dict[str, Any]], outputs: Sequence[str],
                                     shapes: Dict[str, Sequence[int]]) -> List[Dict[str, Any]]:
    """reshape(a) -> unary element-wise ops -> reshape back to a's shape
    becomes the element-wise ops on a (the last one under the second
    reshape's name) where every intermediate has one reader and is not a
    graph output: an element-wise op does not see the shape, and a reshape
    is a copy in the engine. ConvNeXt's Linear -> GELU -> Linear over
    [1, H, W, 4C] is matmul -> reshape -> gelu -> reshape -> matmul after
    import: two copies of the 4C-wide hidden layer per block go."""
    from hwtune.graph.ops import get

    _, reader, _ = _matchers(ops, outputs)

    def elementwise(k):
        spec = get(ops[k]["op"])
        return spec is not None and spec.layout == "elementwise" and len(ops[k]["inputs"]) == 1

    drop = set()
    for k1, r1 in enumerate(ops):
        if r1["op"] != "reshape" or k1 in drop or r1["inputs"][0] not in shapes:
            continue
        chain, cur = [], r1["name"]
        while True:
            ku = reader(cur, None)
            if ku is None or not elementwise(ku):
                break
            chain.append(ku)
            cur = ops[ku]["name"]
        k2 = reader(cur, "reshape")
        a = r1["inputs"][0]
        if not chain or k2 is None or k2 in drop or \
                list(ops[k2]["attrs"]["shape"]) != list(shapes[a]):
            continue
        ops[chain[0]]["inputs"] = [a]
        ops[chain[-1]]["name"] = ops[k2]["name"]
        for k in chain[:-1]:  # the intermediates now have a's shape (later folds read it)
            shapes[ops[k]["name"]] = tuple(shapes[a])
        drop.update((k1, k2))
    return [op for k, op in enumerate(ops) if k not in drop]


def fold_scales_into_matmuls(ops: List[Dict[str, Any]], outputs: Sequence[str],
                             params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A mul by a constant that scales only the matmul's output columns,
    reached from a matmul on a weight through reshapes and transposes (each
    output read only by the next op and no graph output): the weight's
    columns and the bias are scaled instead (new params, added to `params`)
    and the mul goes, its name kept by the op that now produces its value.
    ConvNeXt's layer scale, gamma[C, 1, 1] * the second Linear's output
    transposed back to NCHW: a pass over the block's output per block."""
    import numpy as np

    producer = {op["name"]: k for k, op in enumerate(ops) if "outputs" not in op}
    _, reader, _ = _matchers(ops, outputs)
    drop = set()
    for kmul, mul in enumerate(ops):
        if mul["op"] != "mul" or len(mul["inputs"]) != 2 or mul["inputs"][0] == mul["inputs"][1]:
            continue
        for gname, t in (mul["inputs"], mul["inputs"][::-1]):
            gamma = params.get(gname)
            if gamma is not None and t not in params:
                break
        else:
            continue
        if str(gamma.dtype) != "float32" or reader(t, "mul") != kmul:
            continue
        # walk back to the matmul, through single-reader reshapes and transposes
        chain, cur = [], t
        k = producer.get(cur)
        while k is not None and ops[k]["op"] in ("reshape", "transpose") and \
                reader(ops[k]["name"], None) is not None:
            chain.append(k)
            cur = ops[k]["inputs"][0]
            k = producer.get(cur)
        if k is None or ops[k]["op"] != "matmul" or reader(ops[k]["name"], None) is None:
            continue
        mm = ops[k]
        attrs = mm.get("attrs", {})
        w = params.get(mm["inputs"][1])
        bias = params.get(mm["inputs"][2]) if len(mm["inputs"]) == 3 else None
        if w is None or w.ndim != 2 or attrs.get("precision", "fp32") != "fp32" or \
                (len(mm["inputs"]) == 3 and bias is None):
            continue
        n = w.shape[0] if attrs.get("transpose_b") else w.shape[1]
        # follow the column axis forward: 1 of the matmul's [M, N]
        axis, rank, ok = 1, 2, True
        for kc in reversed(chain):
            op = ops[kc]
            if op["op"] == "reshape":
                shape = list(op["attrs"]["shape"])
                ok = axis == rank - 1 and shape[-1:] == [n]
                axis, rank = len(shape) - 1, len(shape)
            else:
                perm = [p % rank for p in op["attrs"].get("perm", range(rank)[::-1])]
                axis = perm.index(axis)
            if not ok:
                break
        if not ok or gamma.ndim > rank:
            continue
        g = gamma.reshape((1,) * (rank - gamma.ndim) + gamma.shape)
        if any(d != 1 for i, d in enumerate(g.shape) if i != axis) or g.shape[axis] not in (1, n):
            continue
        col = np.broadcast_to(g.reshape(-1), (n,)).astype(np.float64)
        wname = f"{mm['inputs'][1]}:scaled:{gname}"
        params[wname] = (w * (col[:, None] if attrs.get("transpose_b") else col[None, :])
                         ).astype(np.float32)
        mm["inputs"] = [mm["inputs"][0], wname] + mm["inputs"][2:]
        if bias is not None:
            bname = f"{mm['inputs'][2]}:scaled:{gname}"
            params[bname] = (bias * col).astype(np.float32)
            mm["inputs"][2] = bname
        last = chain[0] if chain else k
        ops[last]["name"] = mul["name"]
        drop.add(kmul)
    return [op for k, op in enumerate(ops) if k not in drop]


def _matchers(ops, outputs):
    """Three pattern helpers over ops: inner(t, kind), the index of the op
    producing t if of that kind and t has only that reader and is no graph
    output; reader(t, kind), the index of t's only reader if of that kind
    (t no graph output; kind None: of any kind); affine(k, scale, shift),
    op k's constants."""
    producer = {op["name"]: k for k, op in enumerate(ops) if "outputs" not in op}
    readers: Dict[str, List[int]] = {}
    for k, op in enumerate(ops):
        for t in op["inputs"]:
            readers.setdefault(t, []).append(k)
    out_set = set(outputs)

    def inner(t, kind):
        """The op producing t, if of this kind and t has only that reader."""
        k = producer.get(t)
        if k is None or ops[k]["op"] != kind or t in out_set or len(readers.get(t, [])) != 1:
            return None
        return k

    def affine(k, scale, shift):
        a = ops[k].get("attrs", {})
        return _close(float(a.get("scale", 1.0)), scale) and float(a.get("shift", 0.0)) == shift

    def reader(t, kind):
        users = readers.get(t, [])
        if t in out_set or len(users) != 1 or kind not in (None, ops[users[0]]["op"]):
            return None
        return users[0]

    return inner, reader, affine


def _half_product(ops, ka, x, inner, reader, affine):
    """The product of op ka's output (1 + f) with x/2, in the three orders
    exporters write it (x/2 times, x times then halved, or halved then
    times x): ([the ops it absorbs], the last op) or None."""
    tail = None
    km2 = reader(ops[ka]["name"], "mul")
    if km2 is not None and len(ops[km2]["inputs"]) == 2:
        other = [t for t in ops[km2]["inputs"] if t != ops[ka]["name"]]
        kh = inner(other[0], "affine") if len(other) == 1 else None
        if kh is not None and affine(kh, 0.5, 0.0) and ops[kh]["inputs"] == [x]:
            tail = [ka, kh], km2
        elif other == [x]:
            kz = reader(ops[km2]["name"], "affine")
            if kz is not None and affine(kz, 0.5, 0.0):
                tail = [ka, km2], kz
    else:
        kh = reader(ops[ka]["name"], "affine")
        if kh is not None and affine(kh, 0.5, 0.0):
            km2 = reader(ops[kh]["name"], "mul")
            if km2 is not None and sorted(ops[km2]["inputs"]) == sorted([x, ops[kh]["name"]]):
                tail = [ka, kh], km2
    return tail
