"""Peer benchmark for pooling (issue #10): hwtune's pool2d vs ONNX Runtime.

The windowed pools of common CNNs at batch 1, as one-op models on hwtune's
engine (NCHW, and NCHW[x]c with the blocks the AVX2 and AVX-512 CONVs use)
against ORT's MaxPool / AveragePool on the same NCHW values, at 1 thread and
at all allowed cores. Samples of all sides are interleaved (medians), and
every row first checks that hwtune's NCHW output equals ORT's.

Run: python benchmarks/bench_pool.py [--reps 15]   (needs onnx, onnxruntime)
"""

import argparse
import os
import sys

import numpy as np

from bench_conv import interleaved, ort_run, _onnx  # noqa: E402 (benchmarks/ is sys.path[0])

from hwtune.graph import load_model
from hwtune.engine.instance import NativeEngine
from hwtune.native.isa import selected_isa
from hwtune.native.threads import allowed_cpus

# (name, channels, size, mode, kernel, stride, padding)
CASES = [
    ("GoogLeNet 3a max 3x3/1", 192, 28, "max", 3, 1, 1),
    ("ResNet stem max 3x3/2", 64, 112, "max", 3, 2, 1),
    ("avg 3x3/1 (Inception-v3)", 192, 28, "avg", 3, 1, 1),
    ("DenseNet transition avg 2x2/2", 256, 28, "avg", 2, 2, 0),
]
BLOCKS = (8, 16)  # NCHW[x]c blocks: one AVX2 / one AVX-512 vector of channels


def out_size(hw, k, s, p):
    return (hw + 2 * p - k) // s + 1


def engine(c, hw, mode, k, s, p, threads, block=0):
    attrs = {"mode": mode, "kernel": k, "stride": s, "padding": p}
    shape = [1, c, hw, hw]
    if block:
        attrs["layout"] = "NCHWc"
        shape = [1, c // block, hw, hw, block]
    g = load_model({"format_version": 1, "name": "pool", "inputs": [{"name": "x", "shape": shape}],
                    "ops": [{"name": "y", "op": "pool2d", "inputs": ["x"], "attrs": attrs}],
                    "outputs": ["y"]})
    return NativeEngine(g, executors=1, threads=threads, scheduler="sequential")


def ort_pool(x, mode, k, s, p, threads):
    helper = _onnx()[3]
    node = helper.make_node("MaxPool" if mode == "max" else "AveragePool", ["x"], ["y"],
                            kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
    o = out_size(x.shape[2], k, s, p)
    return ort_run([node], [("x", x.shape)], [("y", (1, x.shape[1], o, o))], {}, {"x": x},
                   threads)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15, help="interleaved samples per side")
    args = ap.parse_args(argv)
    if _onnx() is None:
        print("error: onnx and onnxruntime are needed (pip install '.[bench]')", file=sys.stderr)
        return 2
    ncpu = len(allowed_cpus())
    print(f"isa {selected_isa()}, {ncpu} allowed cores, load average "
          f"{os.getloadavg()[0]:.1f}; medians in us")
    print(f"{'pool':>30} {'shape':>10} {'thr':>3} | {'NCHW':>7} "
          + " ".join(f"{'NCHW' + str(b) + 'c':>8}" for b in BLOCKS) + f" {'ORT':>7} | NCHW/ORT")
    ok = True
    for name, c, hw, mode, k, s, p in CASES:
        x = np.random.default_rng(0).uniform(-1, 1, (1, c, hw, hw)).astype(np.float32)
        for th in sorted({1, ncpu}):
            engines = [engine(c, hw, mode, k, s, p, th)]
            engines += [engine(c, hw, mode, k, s, p, th, b) for b in BLOCKS]
            engines[0].set_input("x", x)
            ort = ort_pool(x, mode, k, s, p, th)
            engines[0].run()
            want = ort()[0]
            if not np.allclose(engines[0].output("y"), want, rtol=1e-5, atol=1e-6):
                print(f"{name}: WRONG (hwtune and ORT outputs differ)")
                ok = False
                continue
            t = interleaved([e.run for e in engines] + [ort], args.reps)
            print(f"{name:>30} {f'{c}x{hw}':>10} {th:>3} | {t[0] * 1e6:7.1f} "
                  + " ".join(f"{v * 1e6:8.1f}" for v in t[1:-1])
                  + f" {t[-1] * 1e6:7.1f} | {t[-1] / t[0]:7.2f}x", flush=True)
            for e in engines:
                e.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
