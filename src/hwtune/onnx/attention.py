"""Import-time fusion of eager attention into one `attention` op.

What transformers' eager attention exports to, once imported:

    q = affine(q, scale, shift 0)   # optional, likewise kt
    s = batch_matmul(q, kt)          # [..., S, T]
    s = affine(s, scale, shift 0)    # or mul by a scalar: optional
    s = add(s, mask)                 # optional; either operand order
    p = softmax(s, last axis)
    y = batch_matmul(p, v)

becomes y = attention(q, kt, v, [mask], scale) when every intermediate is
read by the next op only (and is no graph output), q, kt and v share their
leading dims and the mask broadcasts to the scores; the factors of the
optional affines on q and kt join the scale. Anything else is left as it
is.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple


def _broadcasts_to(small: Tuple[int, ...], big: Tuple[int, ...]) -> bool:
    if len(small) > len(big):
        return False
    return all(a in (1, b) for a, b in zip(small[::-1], big[::-1]))


def fuse_attention(ops: List[Dict[str, Any]], outputs: Sequence[str],
                   shapes: Dict[str, Tuple[int, ...]]) -> List[Dict[str, Any]]:
    """ops with each eager attention block replaced by one attention op."""
    producer: Dict[str, int] = {}
    readers: Dict[str, List[int]] = {}
    for k, op in enumerate(ops):
        for t in op.get("outputs", [op["name"]]):
            producer[t] = k
        for t in op["inputs"]:
            readers.setdefault(t, []).append(k)
    outs = set(outputs)

    def only_reader(t, k):
        """t is read by op k alone (once) and is no graph output."""
        return t not in outs and readers.get(t) == [k]

    def made_by(t, kind):
        k = producer.get(t)
        return k if k is not None and ops[k]["op"] == kind else None

    drop, fused = set(), {}
    for k, sm in enumerate(ops):
        if sm["op"] != "softmax":
            continue
        x = sm["inputs"][0]
        rank = len(shapes[x])
        if int(sm.get("attrs", {}).get("axis", -1)) % rank != rank - 1:
            continue
        users = readers.get(sm["name"], [])
        if sm["name"] in outs or len(users) != 1:
            continue
        pv = ops[users[0]]
        if pv["op"] != "batch_matmul" or pv["inputs"][0] != sm["name"] \
                or pv["inputs"][1] == sm["name"]:
            continue
        chain, cur, mask, scale = [k], x, None, 1.0
        a = made_by(cur, "add")
        if a is not None and only_reader(cur, chain[-1]):
            ins = ops[a]["inputs"]
            for si, mi in ((0, 1), (1, 0)):
                src = ins[si]
                if made_by(src, "batch_matmul") is not None or made_by(src, "affine") is not None:
                    mask, cur = ins[mi], src
                    chain.append(a)
                    break
        f = made_by(cur, "affine")
        if f is not None and only_reader(cur, chain[-1]):
            fa = ops[f].get("attrs", {})
            if float(fa.get("shift", 0.0)) == 0.0:
                scale = float(fa.get("scale", 1.0))
                chain.append(f)
                cur = ops[f]["inputs"][0]
        qk = made_by(cur, "batch_matmul")
        if qk is None or not only_reader(cur, chain[-1]):
            continue
        q, kt = ops[qk]["inputs"]
        # q and kt each scaled on their own (PyTorch's scaled_dot_product_
        # attention math path, ViT's nn.MultiheadAttention: q and k times
        # 1/sqrt(sqrt(d))): the factors join the op's scale, two passes
        # over q and k less per layer.
        folded = []
        for i, t in ((0, q), (1, kt)):
            f = made_by(t, "affine")
            fa = ops[f].get("attrs", {}) if f is not None else {}
            if f is not None and only_reader(t, qk) and float(fa.get("shift", 0.0)) == 0.0:
                folded.append((i, f, float(fa.get("scale", 1.0)), ops[f]["inputs"][0]))
        for i, f, sc, src in folded:
            scale *= sc
            chain.append(f)
            q, kt = (src, kt) if i == 0 else (q, src)
        v = pv["inputs"][1]
        sq, sk, sv = shapes[q], shapes[kt], shapes[v]
        if not (len(sq) >= 2 and len(sk) == len(sq) == len(sv) and sk[:-2] == sq[:-2]
                and sv[:-2] == sq[:-2] and sk[-2] == sq[-1] and sv[-2] == sk[-1]):
            continue
        scores = tuple(sq[:-1]) + (sk[-1],)
        if tuple(shapes[x]) != scores:
            continue
        if mask is not None and (mask == x or not _broadcasts_to(tuple(shapes[mask]), scores)):
            continue
        chain.append(qk)
        drop.update(chain)
        op = {"name": pv["name"], "op": "attention",
              "inputs": [q, kt, v] + ([mask] if mask is not None else [])}
        if scale != 1.0:
            op["attrs"] = {"scale": scale}
        fused[users[0]] = op
    return [fused.get(k, op) for k, op in enumerate(ops) if k not in drop]
