"""Per-layer 1x1 CONVs of a CNN: hwtune's time, GFLOPS and share of the FMA
peak against ONNX Runtime's per-node time in the whole model.

    python benchmarks/pointwise_layers.py MODEL.onnx [--isa avx2] [--reps 15]
        [--peak 117.1] [--baseline-lib OTHER/libhwtune.so] [--ort-runs 5]

Each distinct 1x1 CONV of the model (C, K, H, W, stride, and its epilogue:
bias, then + residual when an Add of the block follows, then ReLU when a
Relu follows, or SiLU / HardSwish, as hwtune's fusion passes merge them) runs through the CONV C
API the engine calls (NCHW plan with default params, weights packed once,
hwt_conv_run_part_res with bias and residual), one thread, thread-time
medians of --reps samples; with --baseline-lib the other build's same calls
alternate with this build's in every rep. ORT: the model in one session with
profiling (default optimisations, so its NCHWc transformer's fused
convolutions), each node's least time over --ort-runs runs, the median over
the nodes of a row. `kernel`: the plan's path (NCHW-gemm, NCHW template,
flat = the template over the flattened image, sub = over the subsampled
input of a strided 1x1: kernels/conv/pw_stride.c). GFLOPS count 2*C*K*OH*OW;
% peak against --peak GFLOPS (the FMA peak of the host at one thread).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import statistics
import tempfile
from collections import defaultdict

import numpy as np


def pointwise_nodes(path: str):
    """[(ORT names, (C, K, H, W, stride, residual, relu, act))] of the 1x1 CONVs
    of the model as hwtune runs it (its CONV fusions applied)."""
    from hwtune.graph.passes.fuse import fuse_conv
    from hwtune.sources import load_any
    g, _ = load_any(path, {}, [])
    g = fuse_conv(g)
    out = []
    for op in g.ops:
        if op.op != "conv2d" or int(op.attrs.get("group") or 1) != 1:
            continue
        w = g.shapes[op.inputs[1]]
        if tuple(w[2:]) != (1, 1):
            continue
        C, H, W = g.shapes[op.inputs[0]][1:4]
        stride = int((op.attrs.get("stride") or [1, 1])[0])
        res, relu = len(op.inputs) >= 4, bool(op.attrs.get("relu"))
        # ORT names a node by its original output or its fused chain's.
        act = op.attrs.get("act") or None
        out.append(((op.name, op.outputs[0]), (C, w[0], H, W, stride, res, relu, act)))
    return out


def ort_node_us(path: str, runs: int) -> dict:
    """node name -> least kernel time (us) in the whole model, 1 thread."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    tmp = tempfile.mkdtemp()
    so.profile_file_prefix = os.path.join(tmp, "ort")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1
                                                  for d in i.shape]).astype(np.float32)
    for _ in range(3 + runs):
        sess.run(None, {i.name: x})
    ev = json.load(open(sess.end_profiling()))
    best = {}
    for e in ev:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            node = e["args"].get("node_name") or e["name"][:-len("_kernel_time")]
            node = node[:-len("_nchwc")] if node.endswith("_nchwc") else node
            best[node] = min(best.get(node, 1e30), e["dur"])
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    return best


def ort_time(best: dict, names):
    for name in names:
        if name in best:
            return best[name]
    return None


def conv_closure(lib_, shape, isa, rng):
    """One NCHW CONV of `shape` through lib_'s C API (as the engine plans
    it): the run closure, the output, the plan's kernel name, and the
    inputs for the reference."""
    from hwtune.native import gemm as G
    from hwtune.native._lib import lib
    from hwtune.native.conv import LAYOUTS, _desc, _Plan
    from hwtune.native.isa import resolve_isa
    for name in ("hwt_conv_plan_make", "hwt_conv_pack_weights", "hwt_conv_run_part_res"):
        f = getattr(lib_, name)
        f.argtypes, f.restype = getattr(lib, name).argtypes, getattr(lib, name).restype
    C, K, H, W, s, res, relu, act = shape
    x = rng.standard_normal((1, C, H, W), dtype=np.float32)
    w = (rng.standard_normal((K, C, 1, 1)) / np.sqrt(C)).astype(np.float32)
    b = rng.standard_normal(K, dtype=np.float32)
    OH, OW = (H - 1) // s + 1, (W - 1) // s + 1
    r = rng.standard_normal((1, K, OH, OW), dtype=np.float32) if res else None
    d = _desc(x.shape, w.shape, s, 0, relu, act=act)
    plan = _Plan()
    assert lib_.hwt_conv_plan_make(ctypes.byref(d), LAYOUTS.index("NCHW"), None,
                                   resolve_isa(isa), 1, ctypes.byref(plan)) == 0
    kernel = LAYOUTS[plan.layout] + (" flat" if plan.flat else "") + (" sub" if plan.sub else "")
    wp = G.workspace(plan.w_floats)
    assert lib_.hwt_conv_pack_weights(ctypes.byref(plan), G._ptr(w), G._ptr(wp)) == 0
    ws = G.workspace(max(plan.ws_floats, 1))
    y = np.empty((1, K, OH, OW), np.float32)
    args = (ctypes.byref(plan), G._ptr(x), G._ptr(wp), G._ptr(b), G._ptr(r), G._ptr(y),
            G._ptr(ws), 0, 1)
    keep = (plan, wp, ws)
    return (lambda: (keep, lib_.hwt_conv_run_part_res(*args))), y, kernel, (x, w, b, r)


def reference(x, w, b, r, stride, relu, act=None):
    y = np.einsum("kc,nchw->nkhw", w[:, :, 0, 0].astype(np.float64),
                  x[:, :, ::stride, ::stride].astype(np.float64)) + b[None, :, None, None]
    if r is not None:
        y = y + r
    if act == "silu":
        return y / (1.0 + np.exp(-y))
    if act == "hard_swish":
        return y * np.clip(y / 6.0 + 0.5, 0.0, 1.0)
    return np.maximum(y, 0) if relu else y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--isa", default=None)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--peak", type=float, default=117.1,
                    help="FMA peak GFLOPS at 1 thread (Zen 4 scan: 117.1)")
    ap.add_argument("--baseline-lib", default=None)
    ap.add_argument("--ort-runs", type=int, default=5)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--stat", default="median", choices=("median", "min"),
                    help="per row: the median (default) or the least of the samples")
    ap.add_argument("--only", default=None, help="rows whose label contains this ('/2')")
    a = ap.parse_args()
    from hwtune.measure import clock
    from hwtune.native._lib import lib
    nodes = pointwise_nodes(a.model)
    groups = defaultdict(list)
    for name, shape in nodes:
        groups[shape].append(name)
    best = {} if a.no_ort else ort_node_us(a.model, a.ort_runs)
    base = ctypes.CDLL(a.baseline_lib) if a.baseline_lib else None
    rng = np.random.default_rng(0)
    print(f"{os.path.basename(a.model)}: {len(nodes)} 1x1 CONVs, {len(groups)} shapes, "
          f"isa {a.isa or 'host'}, 1 thread, thread-time {a.stat} of {a.reps}")
    print(f"{'C->K @HxW /s epi':>26} {'n':>2} {'kernel':>14} {'us':>8} {'GFLOPS':>7} {'%pk':>4}"
          f" {'ort us':>8} {'ort/hw':>6}" + (f" {'base us':>8} {'base/new':>8}" if base else ""))
    tot = defaultdict(float)
    for shape, names in sorted(groups.items(), key=lambda kv: (-kv[0][2], kv[0][0])):
        C, K, H, W, s, res, relu, act = shape
        epi = ("+res" if res else "") + ("+relu" if relu else "") + (f"+{act}" if act else "")
        label = f"{C}->{K} @{H}x{W} /{s} {epi}"
        if a.only and a.only not in label:
            continue
        OH, OW = (H - 1) // s + 1, (W - 1) // s + 1
        flops = 2.0 * C * K * OH * OW
        run, y, kernel, ins = conv_closure(lib, shape, a.isa, rng)
        sides = {"new": run}
        if base is not None:
            sides["base"], y_base, _, _ = conv_closure(base, shape, a.isa,
                                                       np.random.default_rng(1))
        run()
        ref = reference(*ins, s, relu, act)
        err = float(np.abs(y - ref).max() / np.abs(ref).max())
        assert err < 1e-4, (shape, err)
        times = {k: [] for k in sides}
        for f in sides.values():
            f()
        for _ in range(a.reps):
            for k, f in sides.items():
                times[k].append(clock.cpu_per_call(f, 1) * 1e6)
        stat = statistics.median if a.stat == "median" else min
        med = {k: stat(v) for k, v in times.items()}
        ort_us = [t for t in (ort_time(best, n) for n in names) if t is not None]
        o = statistics.median(ort_us) if ort_us else float("nan")
        n = len(names)
        tot["new"] += n * med["new"]
        tot["ort"] += n * o if ort_us else 0.0
        if base is not None:
            tot["base"] += n * med["base"]
        gf = flops / med["new"] / 1e3
        print(f"{label:>26} {n:2d} {kernel:>14} {med['new']:8.1f} "
              f"{gf:7.1f} {gf / a.peak:4.0%} {o:8.1f} {o / med['new']:6.2f}" +
              (f" {med['base']:8.1f} {med['base'] / med['new']:8.2f}" if base else ""),
              flush=True)
    print(f"{'total (ms)':>26} {'':2s} {'':>14} {tot['new'] / 1e3:8.2f} {'':7s} {'':4s} "
          f"{tot['ort'] / 1e3:8.2f} {tot['ort'] / tot['new']:6.2f}" +
          (f" {tot['base'] / 1e3:8.2f} {tot['base'] / tot['new']:8.2f}" if base else ""))


if __name__ == "__main__":
    main()
