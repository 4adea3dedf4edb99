"""Grouped CONVs alone: hwtune against ONNX Runtime, one Conv node each.

    python benchmarks/bench_grouped.py [--threads 1] [--reps 30] [--workdir DIR]

Each shape is a one-node ONNX model (Conv with bias, seeded weights, batch
1, NCHW), run by `hwtune compare MODEL --with ort` (interleaved samples in
one process, medians; ratio = ORT / hwtune, above 1.0 hwtune is faster).
The shapes are ResNeXt-50 (32x4d)'s grouped 3x3 CONVs, one per stage (32
groups of 4, 8, 16 and 32 channels), and RegNetY-400MF's (groups of 8
channels), the rows where op_breakdown.py --nodes 'conv grouped' places
ResNeXt's gap to ORT.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HWTUNE = os.path.join(os.path.dirname(sys.executable), "hwtune")

# (name, C = K, H = W, group, stride)
SHAPES = [("resnext s1 4/group", 128, 56, 32, 1), ("resnext s2 8/group", 256, 28, 32, 1),
          ("resnext s3 16/group", 512, 14, 32, 1), ("resnext s4 32/group", 1024, 7, 32, 1),
          ("resnext s2 in 8/group s2", 256, 56, 32, 2),
          ("regnety 8/group", 104, 28, 13, 1), ("regnety 8/group 14", 208, 14, 26, 1)]


def out_hw(H, stride):
    """The output side of a 3x3 conv padded by 1."""
    return (H + 2 - 3) // stride + 1


def model(path, C, H, group, stride):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((C, C // group, 3, 3)) / np.sqrt(9 * C // group)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    oh = out_hw(H, stride)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, pads=[1, 1, 1, 1],
                            strides=[stride, stride])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, oh, oh])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp()
    print(f"{'shape':28s} {'hwtune us':>10s} {'ORT us':>8s} {'x ORT':>6s} {'GFLOPS':>7s}")
    for name, C, H, group, stride in SHAPES:
        path = os.path.join(work, f"g_{C}_{H}_{group}_{stride}.onnx")
        model(path, C, H, group, stride)
        out = subprocess.run([HWTUNE, "compare", path, "--with", "ort", "--threads",
                              str(a.threads), "--reps", str(a.reps), "--json", "--db",
                              os.path.join(work, "g.db")], capture_output=True, text=True)
        if out.returncode:
            print(f"{name:28s} failed: {out.stderr.strip()[-200:]}")
            continue
        sides = {s["key"]: s for s in json.loads(out.stdout)["sides"]}
        hw, ort = sides["hwtune"]["median_s"], sides["ort"]["median_s"]
        flops = 2.0 * C * (C // group) * 9 * out_hw(H, stride) ** 2
        print(f"{name:28s} {hw * 1e6:10.1f} {ort * 1e6:8.1f} {ort / hw:6.2f} "
              f"{flops / hw / 1e9:7.1f}", flush=True)


if __name__ == "__main__":
    main()
