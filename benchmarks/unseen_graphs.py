"""Graphs none of hwtune's constants were chosen on: the five kinds issue #12
was found with (a transformer block, a Wide-ResNet block, a 200-op random
DAG, a DCGAN discriminator, an odd-sized LSTM), written here as model.json
documents. `python benchmarks/unseen_graphs.py DIR` writes them to DIR;
bench_reproduce.py tunes and re-measures them.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Dict, List


def _doc(name: str, description: str, inputs, params, ops, outputs) -> dict:
    return {"format_version": 1, "name": name, "description": description, "seed": 0,
            "inputs": [{"name": n, "shape": s} for n, s in inputs],
            "params": [{"name": n, "shape": s} for n, s in params],
            "ops": ops, "outputs": outputs}


def _op(name: str, op: str, inputs: List[str], **attrs) -> dict:
    out = {"name": name, "op": op, "inputs": inputs}
    if attrs:
        out["attrs"] = attrs
    return out


def transformer_block(seq: int = 64, d: int = 256, heads: int = 4, ff: int = 1024) -> dict:
    """Multi-head self-attention and a feed-forward layer, each with a
    residual add (no layer norm: scale-and-shift stands in for it)."""
    hd = d // heads
    params = [(f"W{x}", [d, d]) for x in "qkvo"] + [(f"b{x}", [d]) for x in "qkvo"]
    params += [("W1", [d, ff]), ("b1", [ff]), ("W2", [ff, d]), ("b2", [d])]
    ops = [_op(x, "matmul", ["x", f"W{x}", f"b{x}"]) for x in "qkv"]
    for x in "qkv":
        ops.append({"name": f"{x}_split", "op": "split", "inputs": [x],
                    "outputs": [f"{x}{h}" for h in range(heads)], "attrs": {"axis": 1}})
    for h in range(heads):
        ops += [_op(f"s{h}", "matmul", [f"q{h}", f"k{h}"], transpose_b=True),
                _op(f"s{h}_scaled", "affine", [f"s{h}"], scale=1.0 / hd ** 0.5),
                _op(f"p{h}", "softmax", [f"s{h}_scaled"]),
                _op(f"c{h}", "matmul", [f"p{h}", f"v{h}"])]
    ops += [_op("ctx", "concat", [f"c{h}" for h in range(heads)], axis=1),
            _op("attn", "matmul", ["ctx", "Wo", "bo"]),
            _op("res1", "add", ["x", "attn"]),
            _op("norm1", "affine", ["res1"], scale=0.5),
            _op("ff1", "matmul", ["norm1", "W1", "b1"]),
            _op("ff1_relu", "relu", ["ff1"]),
            _op("ff2", "matmul", ["ff1_relu", "W2", "b2"]),
            _op("res2", "add", ["norm1", "ff2"])]
    return _doc(f"transformer-block-s{seq}-d{d}-h{heads}",
                "unseen-style: one transformer encoder block", [("x", [seq, d])], params, ops,
                ["res2"])


def wide_resnet_block(c_in: int = 64, c_out: int = 128, size: int = 28) -> dict:
    """Wide-ResNet's pre-activation block with a 1x1 projection shortcut:
    three CONVs, two of them 3x3."""
    params = []
    ops = []
    for i, c in ((1, c_in), (2, c_out)):
        params += [(f"bn{i}.{p}", [c]) for p in ("gamma", "beta", "mean", "var")]
    params += [("conv1.w", [c_out, c_in, 3, 3]), ("conv2.w", [c_out, c_out, 3, 3]),
               ("short.w", [c_out, c_in, 1, 1])]
    ops += [_op("bn1", "batch_norm", ["x", "bn1.gamma", "bn1.beta", "bn1.mean", "bn1.var"]),
            _op("relu1", "relu", ["bn1"]),
            _op("conv1", "conv2d", ["relu1", "conv1.w"], padding=1),
            _op("bn2", "batch_norm", ["conv1", "bn2.gamma", "bn2.beta", "bn2.mean", "bn2.var"]),
            _op("relu2", "relu", ["bn2"]),
            _op("conv2", "conv2d", ["relu2", "conv2.w"], padding=1),
            _op("short", "conv2d", ["relu1", "short.w"]),
            _op("out", "add", ["conv2", "short"])]
    return _doc(f"wide-resnet-block-{c_in}-{c_out}-{size}",
                "unseen-style: a Wide-ResNet block with a projection shortcut",
                [("x", [1, c_in, size, size])], params, ops, ["out"])


def random_dag(n_ops: int = 200, width: int = 64, seed: int = 12) -> dict:
    """n_ops ops over [width, width] tensors, each reading one or two of the
    last dozen tensors (wide, shallow and irregular, as a generated graph
    is); every tensor nobody reads is summed into the output."""
    rng = random.Random(seed)
    tensors = ["x"]
    params = []
    ops = []
    read = set()
    unary = ["tanh", "sigmoid", "relu"]
    binary = ["add", "mul", "sub", "maximum"]
    for i in range(n_ops - 1):
        recent = tensors[-12:]
        a = rng.choice(recent)
        kind = rng.random()
        name = f"t{i}"
        if kind < 0.2:
            params.append((f"W{i}", [width, width]))
            ops.append(_op(name, "matmul", [a, f"W{i}"]))
        elif kind < 0.55:
            ops.append(_op(name, rng.choice(unary), [a]))
        else:
            b = rng.choice(recent)
            ops.append(_op(name, rng.choice(binary), [a, b]))
            read.add(b)
        read.add(a)
        tensors.append(name)
    leaves = [t for t in tensors if t not in read]
    if len(leaves) == 1:
        leaves.append("x")
    ops.append(_op("out", "sum", leaves))
    return _doc(f"random-dag-{n_ops}-w{width}-s{seed}",
                "unseen-style: a seeded random DAG of element-wise ops and matmuls",
                [("x", [width, width])], params, ops, ["out"])


def dcgan_discriminator(size: int = 64, base: int = 32) -> dict:
    """DCGAN's discriminator: 4x4 stride-2 CONVs with leaky ReLU and batch
    norm, a final 4x4 CONV to one logit and a sigmoid."""
    chans = [3, base, base * 2, base * 4, base * 8]
    params, ops, x = [], [], "img"
    for i in range(1, 5):
        params.append((f"conv{i}.w", [chans[i], chans[i - 1], 4, 4]))
        ops.append(_op(f"conv{i}", "conv2d", [x, f"conv{i}.w"], stride=2, padding=1))
        x = f"conv{i}"
        if i > 1:
            params += [(f"bn{i}.{p}", [chans[i]]) for p in ("gamma", "beta", "mean", "var")]
            ops.append(_op(f"bn{i}", "batch_norm",
                           [x] + [f"bn{i}.{p}" for p in ("gamma", "beta", "mean", "var")]))
            x = f"bn{i}"
        ops.append(_op(f"lrelu{i}", "leaky_relu", [x], alpha=0.2))
        x = f"lrelu{i}"
    params.append(("conv5.w", [1, chans[4], size // 16, size // 16]))
    ops += [_op("conv5", "conv2d", [x, "conv5.w"]), _op("prob", "sigmoid", ["conv5"])]
    return _doc(f"dcgan-discriminator-{size}-{base}", "unseen-style: DCGAN's discriminator",
                [("img", [1, 3, size, size])], params, ops, ["prob"])


def odd_lstm(hidden: int = 333, inputs: int = 77, seq: int = 7, batch: int = 3) -> dict:
    """A one-layer LSTM of sizes no SIMD width divides."""
    params = [("W", [inputs, 4 * hidden]), ("U", [hidden, 4 * hidden]), ("b", [4 * hidden])]
    ins = [(f"x{t}", [batch, inputs]) for t in range(seq)]
    ins += [("h0", [batch, hidden]), ("c0", [batch, hidden])]
    ops = []
    for t in range(seq):
        h, c = ("h0", "c0") if t == 0 else (f"h{t}", f"c{t}")
        n = t + 1
        ops += [_op(f"xw{n}", "matmul", [f"x{t}", "W", "b"]),
                _op(f"hu{n}", "matmul", [h, "U"]),
                _op(f"g{n}", "add", [f"xw{n}", f"hu{n}"]),
                {"name": f"split{n}", "op": "split", "inputs": [f"g{n}"],
                 "outputs": [f"i{n}", f"f{n}", f"o{n}", f"u{n}"], "attrs": {"axis": 1}},
                _op(f"si{n}", "sigmoid", [f"i{n}"]), _op(f"sf{n}", "sigmoid", [f"f{n}"]),
                _op(f"so{n}", "sigmoid", [f"o{n}"]), _op(f"tu{n}", "tanh", [f"u{n}"]),
                _op(f"fc{n}", "mul", [f"sf{n}", c]), _op(f"iu{n}", "mul", [f"si{n}", f"tu{n}"]),
                _op(f"c{n}", "add", [f"fc{n}", f"iu{n}"]), _op(f"tc{n}", "tanh", [f"c{n}"]),
                _op(f"h{n}", "mul", [f"so{n}", f"tc{n}"])]
    return _doc(f"odd-lstm-h{hidden}-i{inputs}-s{seq}-b{batch}",
                "unseen-style: an LSTM of odd sizes", ins, params, ops, [f"h{seq}"])


GRAPHS = {"transformer": transformer_block, "wide_resnet": wide_resnet_block,
          "random_dag": random_dag, "dcgan_d": dcgan_discriminator, "odd_lstm": odd_lstm}


def write_all(folder) -> Dict[str, Path]:
    """Every graph as DIR/<key>.json; returns key -> path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for key, make in GRAPHS.items():
        path = folder / f"{key}.json"
        path.write_text(json.dumps(make(), indent=1))
        out[key] = path
    return out


if __name__ == "__main__":
    for key, path in write_all(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(f"{key}: {path}")
