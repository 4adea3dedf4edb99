"""The CNN stem convolution (the first conv: 3 input channels from the
user's NCHW image, stride 2) in hwtune against ONNX Runtime, one conv per
model, at 1 and 2 threads:

- MobileNetV2 / EfficientNet-B0: 3 -> 32, 3x3, pad 1, 224x224 -> 112x112,
  + bias + ReLU6 (Clip 0..6);
- ResNet-50 / ResNeXt-50: 3 -> 64, 7x7, pad 3, 224x224 -> 112x112, + bias
  + ReLU.

Each shape is written once as a one-Conv ONNX model (seeded weights) and
run by `hwtune compare MODEL --with ort --threads T --json`: hwtune's
default (untuned) plan on its engine and ONNX Runtime on the same file,
samples interleaved in one process, outputs checked against each other.
Rounds alternate with the other shapes, so load drifts hit every row. The
ratio is ORT time / hwtune time (above 1.0 hwtune is faster); a row prints
the median of the rounds' ratios and each side's least median.

    python benchmarks/bench_stem.py [--threads 1,2] [--rounds 3] [--reps 20]
        [--hwtune .venv/bin/hwtune] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

# (name, K, kernel, pad, activation): the two stems of the model zoo.
SHAPES = [("mbv2-3x3-relu6", 32, 3, 1, "relu6"), ("resnet-7x7-relu", 64, 7, 3, "relu")]
HW = 224


def stem_onnx(path: str, k: int, r: int, pad: int, act: str) -> None:
    """A Conv (+ Clip or Relu) on a 1x3x224x224 input, seeded weights."""
    from onnx import TensorProto, helper, numpy_helper, save
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, 3, r, r)) / np.sqrt(3 * r * r)).astype(np.float32)
    b = (0.1 * rng.standard_normal(k)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2],
                              pads=[pad] * 4, kernel_shape=[r, r])]
    if act == "relu6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    oh = (HW + 2 * pad - r) // 2 + 1
    g = helper.make_graph(nodes, "stem",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, HW, HW])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, oh, oh])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, path)


def compare(hwtune: str, path: str, threads: int, reps: int, db: str):
    """(hwtune median s, ort median s) of one `hwtune compare` run."""
    r = subprocess.run([hwtune, "compare", path, "--with", "ort", "--threads", str(threads),
                        "--reps", str(reps), "--db", db, "--json"],
                       capture_output=True, text=True)
    if not r.stdout.strip().startswith("{"):
        sys.exit(f"{hwtune} compare {path}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    sides = {s["key"]: s for s in json.loads(r.stdout)["sides"]}
    return sides["hwtune"]["median_s"], sides["ort"]["median_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hwtune", default=os.path.join(os.path.dirname(sys.executable), "hwtune"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="bench_stem_")
    os.makedirs(work, exist_ok=True)
    db = os.path.join(work, "bench_stem.db")
    paths = {}
    for name, k, r, pad, act in SHAPES:
        paths[name] = os.path.join(work, f"{name}.onnx")
        stem_onnx(paths[name], k, r, pad, act)
    threads = [int(t) for t in a.threads.split(",")]
    got = {(n, t): [] for n, *_ in SHAPES for t in threads}
    for rnd in range(a.rounds):
        for t in threads:
            for name, *_ in SHAPES:
                got[(name, t)].append(compare(a.hwtune, paths[name], t, a.reps, db))
    print(f"stem convs, 1x3x224x224, {a.rounds} rounds of {a.reps} interleaved samples; "
          "ratio = ORT / hwtune (> 1: hwtune faster)")
    print(f"{'shape':18s} {'thr':>3s} {'hwtune us':>10s} {'ORT us':>9s} {'ratio':>6s}"
          f" {'ratios per round':s}")
    for (name, t), rows in got.items():
        ratios = [o / h for h, o in rows]
        print(f"{name:18s} {t:3d} {min(h for h, _ in rows) * 1e6:10.0f} "
              f"{min(o for _, o in rows) * 1e6:9.0f} {statistics.median(ratios):6.2f} "
              + " ".join(f"{x:.2f}" for x in ratios))


if __name__ == "__main__":
    main()
