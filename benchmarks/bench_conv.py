"""Peer benchmark for CONV (issue #4): hwtune vs ONNX Runtime and PyTorch.

1. The ResNet-18 3x3 CONV layers at batch 1 (64x56x56, 128x28x28, 256x14x14,
   512x7x7; stride 1, pad 1, C = K), at 1 thread and at all allowed cores:
   - hwtune "best": the best params of an exhaustive grid over the knobs the
     C template declares (hwtune.native.conv.knobs), time-capped, nothing
     cached. The grid is screened at 1 thread (best of two kernel calls per
     point, visited nearest-to-the-default first so the time cap cuts the
     far tail; the table says how much of the grid was measured), then the
     fastest few are re-measured on the engine at each thread count and the
     best kept.
   - hwtune "default": hwt_conv_default_params, no tuning.
   Both run as a one-op model on hwtune's engine with NCHW tensors in and
   out, as ONNX Runtime's Conv does (hwtune stages NCHW rows into the
   template inside the op), plus the blocked NCHW[x]c kernel (in and out
   NCHW[x]c, NeoCPU's in-network setting) for reference.
   - ONNX Runtime: a Conv graph built with onnx.helper, intra_op_num_threads
     set; PyTorch: torch.nn.functional.conv2d under torch.set_num_threads,
     when installed. Samples of all sides are interleaved.
   Goal (issue #4): hwtune best >= 1.0x ONNX Runtime per layer.
2. GoogleNet inception 3a at 192x28x28, batch 1 (1x1 64; 1x1 96 -> 3x3 128;
   1x1 16 -> 5x5 32; 3x3 maxpool -> 1x1 32; concat; every conv + bias +
   ReLU), as a model.json on hwtune's engine (default params, 1 executor,
   all cores) vs the same graph in ONNX Runtime. Goal: < 1.4 ms on 2 cores
   (ONNX Runtime measured here: 1.59 ms).

Each row gives medians (the verdict) and the fastest sample of each side:
on the shared machine the fastest sample is the least disturbed one.

Run: python benchmarks/bench_conv.py [--grid-s 6] [--reps 15]
(needs numpy, onnx, onnxruntime; torch optional). Takes ~1.5-3 minutes.
"""

import argparse
import itertools
import os
import statistics
import sys

import numpy as np

from hwtune.engine.instance import NativeEngine
from hwtune.measure import clock
from hwtune.measure.sampling import interleaved_calls
from hwtune.graph import load_model
from hwtune.graph.passes.fuse import fuse_conv
from hwtune.native import conv
from hwtune.native.isa import selected_isa
from hwtune.native.threads import allowed_cpus

LAYERS = [(64, 56), (128, 28), (256, 14), (512, 7)]  # (channels, spatial)
GOAL_RATIO = 1.0
GOAL_INCEPTION_MS = 1.4
ORT_INCEPTION_MS = 1.59  # issue #4, measured here on 2 cores
# One sample lasts at least this long: the Python call and timer (~2 us)
# stay < 0.1% of it, and 4 layers x 2 thread counts x ~5 sides x reps
# samples fit the script's 3-minute budget.
SAMPLE_S = 0.02
# Screened candidates re-measured on the engine per thread count: 4 keeps
# that step at ~1-2 s per layer and thread count.
TOP_K = 4


# ---------------------------------------------------------------- timing

def interleaved(fns, reps: int, stat=statistics.median):
    """stat (median by default) of the seconds per call of each fn, sampled
    round-robin so every side sees the same noise from the shared machine;
    stat=None returns the samples."""
    samples = interleaved_calls(fns, reps, sample_s=SAMPLE_S, max_calls=1000, settle_s=0.05)
    return samples if stat is None else [stat(s) for s in samples]


# ---------------------------------------------------------------- hwtune

def conv_model(c: int, hw: int, k: int, params=None, blocked: bool = False) -> dict:
    """One 3x3 conv (+ bias) as a model.json dict; blocked: NCHW[x]c tensors
    and OIHW[x]i[y]o weights with params' blocks."""
    attrs = {"padding": 1}
    if blocked:
        ib, ob = params["ic_bn"], params["oc_bn"]
        x_shape, w_shape = [1, c // ib, hw, hw, ib], [k // ob, c // ib, 3, 3, ib, ob]
        attrs.update(layout="NCHWc", reg_n=params["reg_n"],
                     unroll_ker=bool(params["unroll_ker"]))
    else:
        x_shape, w_shape = [1, c, hw, hw], [k, c, 3, 3]
        if params:
            attrs.update({n: (bool(v) if n == "unroll_ker" else int(v))
                          for n, v in params.items()})
    return {"format_version": 1, "name": f"conv{c}x{hw}",
            "inputs": [{"name": "x", "shape": x_shape}],
            "params": [{"name": "w", "shape": w_shape}, {"name": "b", "shape": [k]}],
            "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w", "b"], "attrs": attrs}],
            "outputs": ["y"]}


def engine(model: dict, threads: int) -> NativeEngine:
    return NativeEngine(load_model(model), executors=1, threads=threads, scheduler="sequential")


def screen_grid(c: int, hw: int, cap_s: float):
    """(seconds, params) of every grid point measured within cap_s at 1
    thread, fastest first, and the grid size."""
    x_shape, w_shape = (1, c, hw, hw), (c, c, 3, 3)
    kn = conv.knobs(x_shape, w_shape, pad=1)
    dflt = conv.default_params(x_shape, w_shape, pad=1)
    vec = 16 if selected_isa() == "avx512" else 8
    grid = [dict(zip(conv.KNOBS, v)) for v in itertools.product(*(kn[k] for k in conv.KNOBS))]

    def order(p):
        # Full SIMD lanes first, then nearest to the default: the cap cuts
        # the blocks farthest from the register file's shape (only the
        # visiting order is heuristic, not the grid).
        def dist(k):
            return abs(np.log2(p[k] / dflt[k]))
        return (p["oc_bn"] % vec != 0, dist("oc_bn") + dist("ic_bn"), dist("reg_n"),
                p["unroll_ker"], p["reg_h"])
    grid.sort(key=order)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, w_shape).astype(np.float32)
    b = rng.uniform(-1, 1, c).astype(np.float32)
    xb = {}
    out = []
    end = clock.deadline_after(cap_s)
    for p in grid:
        if clock.passed(end):
            break
        ic_bn = p["ic_bn"]
        plan = conv.Conv2dPlan(x_shape, w, b, pad=1, layout="NCHWc", params=p)
        if ic_bn not in xb:
            xb[ic_bn] = conv.to_nchwc(x, ic_bn)
        y = np.empty(plan.out_shape, np.float32)
        plan.run(xb[ic_bn], y)  # first touch
        t = min(clock.per_call(lambda: plan.run(xb[ic_bn], y), 1) for _ in range(2))
        out.append((t, p))
    out.sort(key=lambda r: r[0])
    return out, len(grid)


def best_on_engine(c: int, hw: int, cands, threads: int, reps: int):
    """(seconds, params) of the fastest candidate on the engine (NCHW)."""
    engs = [engine(conv_model(c, hw, c, p), threads) for p in cands]
    try:
        ts = interleaved([e.run for e in engs], reps)
    finally:
        for e in engs:
            e.close()
    i = int(np.argmin(ts))
    return ts[i], cands[i]


# ---------------------------------------------------------------- peers

def _onnx():
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    return onnx, ort, TensorProto, helper, numpy_helper


def ort_run(nodes, inputs, outputs, inits, feeds, threads: int):
    """A callable running the graph in ONNX Runtime, or None without it."""
    mods = _onnx()
    if mods is None:
        return None
    onnx, ort, TensorProto, helper, numpy_helper = mods
    g = helper.make_graph(
        nodes, "bench",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = min(m.ir_version, 8)  # older runtimes refuse newer IR versions
    onnx.checker.check_model(m)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    # ORT's idle intra-op threads spin after a run and take the second core
    # from the hwtune sample interleaved next: with spinning on, hwtune's
    # 2-thread ResNet conv2_x measured 98.9 GFLOPS (its 1-thread speed), with
    # it off 146.5, while ORT's own figure moved 219 -> 211 (2026-11-22).
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def ort_conv(c: int, hw: int, threads: int):
    mods = _onnx()
    if mods is None:
        return None
    helper = mods[3]
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (c, c, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, c).astype(np.float32)
    x = rng.uniform(-1, 1, (1, c, hw, hw)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1],
                            kernel_shape=[3, 3])
    return ort_run([node], [("x", x.shape)], [("y", x.shape)], {"w": w, "b": b}, {"x": x},
                   threads)


def torch_conv(c: int, hw: int, threads: int):
    try:
        import torch
    except ImportError:
        return None
    rng = np.random.default_rng(1)
    w = torch.from_numpy(rng.uniform(-1, 1, (c, c, 3, 3)).astype(np.float32))
    b = torch.from_numpy(rng.uniform(-1, 1, c).astype(np.float32))
    x = torch.from_numpy(rng.uniform(-1, 1, (1, c, hw, hw)).astype(np.float32))

    def run():
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        with torch.no_grad():
            torch.nn.functional.conv2d(x, w, b, padding=1)
    return run


# ---------------------------------------------------------------- inception

INCEPTION_3A = dict(cin=192, c1=64, r3=96, c3=128, r5=16, c5=32, pp=32)


def inception_model(hw: int = 28) -> dict:
    m = INCEPTION_3A
    convs = [("b1", "x", m["cin"], m["c1"], 1), ("b2r", "x", m["cin"], m["r3"], 1),
             ("b2", "b2r", m["r3"], m["c3"], 3), ("b3r", "x", m["cin"], m["r5"], 1),
             ("b3", "b3r", m["r5"], m["c5"], 5), ("b4", "b4p", m["cin"], m["pp"], 1)]
    params, ops = [], [{"name": "b4p", "op": "pool2d", "inputs": ["x"],
                        "attrs": {"mode": "max", "kernel": 3, "stride": 1, "padding": 1}}]
    for name, src, cin, cout, k in convs:
        params += [{"name": f"{name}.w", "shape": [cout, cin, k, k]},
                   {"name": f"{name}.b", "shape": [cout]}]
        ops += [{"name": f"{name}.conv", "op": "conv2d",
                 "inputs": [src, f"{name}.w", f"{name}.b"], "attrs": {"padding": k // 2}},
                {"name": name, "op": "relu", "inputs": [f"{name}.conv"]}]
    ops.append({"name": "y", "op": "concat", "attrs": {"axis": 1},
                "inputs": ["b1", "b2", "b3", "b4"]})
    return {"format_version": 1, "name": "inception-3a", "seed": 0,
            "inputs": [{"name": "x", "shape": [1, m["cin"], hw, hw]}],
            "params": params, "ops": ops, "outputs": ["y"]}


def ort_inception(eng: NativeEngine, model: dict, threads: int):
    """The same graph and values in ONNX Runtime (None without it)."""
    mods = _onnx()
    if mods is None:
        return None
    helper = mods[3]
    from hwtune.graph.reference import init_inputs, init_params
    graph = eng.graph
    inits = {k: np.ascontiguousarray(v, np.float32) for k, v in init_params(graph).items()}
    x = init_inputs(graph)["x"].astype(np.float32)
    nodes = []
    for op in model["ops"]:
        if op["op"] == "conv2d":
            k = next(p["shape"][2] for p in model["params"] if p["name"] == op["inputs"][1])
            pad = op["attrs"]["padding"]
            nodes.append(helper.make_node("Conv", op["inputs"], [op["name"]],
                                          pads=[pad] * 4, kernel_shape=[k, k]))
        elif op["op"] == "relu":
            nodes.append(helper.make_node("Relu", op["inputs"], [op["name"]]))
        elif op["op"] == "pool2d":
            nodes.append(helper.make_node("MaxPool", op["inputs"], [op["name"]],
                                          kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                          strides=[1, 1]))
        elif op["op"] == "concat":
            nodes.append(helper.make_node("Concat", op["inputs"], [op["name"]], axis=1))
    out = (1, sum(INCEPTION_3A[k] for k in ("c1", "c3", "c5", "pp"))) + x.shape[2:]
    return ort_run(nodes, [("x", x.shape)], [("y", out)], inits, {"x": x}, threads)


# ---------------------------------------------------------------- main

def gflops(c: int, hw: int, s: float) -> float:
    return 2.0 * c * c * hw * hw * 9 / s / 1e9


def layer_section(args, ncpu: int, lines: list) -> bool:
    ok = True
    thread_counts = sorted({1, ncpu})
    head = (f"{'layer':>10} {'thr':>3} {'stat':>7} | {'best':>6} {'dflt':>6} {'blk':>6} {'ORT':>6} "
            f"{'torch':>6} | {'best/ORT':>8} {'dflt/ORT':>8} {'torch/ORT':>9} | goal  "
            f"best params ({','.join(conv.KNOBS)})")
    lines += ["ResNet-18 3x3 layers, batch 1, GFLOPS (hwtune on its engine, NCHW in/out; "
              "blk = the blocked NCHW[x]c kernel with the best params)", head]
    print(lines[-2], flush=True)
    print(head, flush=True)
    for c, hw in LAYERS:
        screened, size = screen_grid(c, hw, args.grid_s)
        cands = [p for _, p in screened[:TOP_K]]
        for th in thread_counts:
            t_best, p_best = best_on_engine(c, hw, cands, th, max(3, args.reps // 3))
            sides = [engine(conv_model(c, hw, c, p_best), th),
                     engine(conv_model(c, hw, c), th),
                     engine(conv_model(c, hw, c, p_best, blocked=True), th)]
            fns = [e.run for e in sides]
            peers = [ort_conv(c, hw, th), torch_conv(c, hw, th)]
            fns += [f for f in peers if f is not None]
            samples = interleaved(fns, args.reps, stat=None)
            for e in sides:
                e.close()
            i_ort = 3 if peers[0] is not None else None
            i_torch = (4 if peers[0] is not None else 3) if peers[1] is not None else None
            pb = tuple(p_best[k] for k in conv.KNOBS)
            # Medians are the verdict; the fastest sample shows each side
            # with the least interference from the other engineers' jobs.
            for label, stat in (("median", statistics.median), ("fastest", min)):
                g = [gflops(c, hw, stat(s)) for s in samples]
                g_ort = g[i_ort] if i_ort is not None else None
                g_torch = g[i_torch] if i_torch is not None else None

                def ratio(v):
                    return f"{v / g_ort:8.2f}x" if g_ort else "     n/a"
                verdict = "n/a"
                if g_ort:
                    verdict = "PASS" if g[0] / g_ort >= GOAL_RATIO else "MISS"
                    if label == "median":
                        ok &= verdict == "PASS"
                nan = float("nan")
                row = (f"{c:>4}x{hw:>2}x{hw:<2} {th:>3} {label:>7} | {g[0]:6.1f} {g[1]:6.1f} "
                       f"{g[2]:6.1f} {g_ort or nan:6.1f} {g_torch or nan:6.1f} | "
                       f"{ratio(g[0])} {ratio(g[1])} "
                       f"{(g_torch / g_ort) if (g_torch and g_ort) else nan:8.2f}x | "
                       f"{verdict:5} {pb}  (grid {len(screened)}/{size})")
                lines.append(row)
                print(row, flush=True)
    return ok


def inception_section(args, ncpu: int, lines: list) -> bool:
    model = inception_model()
    # As `hwtune run` runs it: each conv's ReLU fused into its epilogue.
    graph = fuse_conv(load_model(model))
    eng = NativeEngine(graph, executors=1, threads=ncpu, scheduler="sequential")
    try:
        from hwtune.graph.reference import run_reference
        eng.run()
        want = run_reference(eng.graph)["y"]
        err = float(np.max(np.abs(eng.output("y") - want)))
        ort_fn = ort_inception(eng, model, ncpu)
        if ort_fn:
            err = max(err, float(np.max(np.abs(ort_fn()[0] - want))))
        fns = [eng.run] + ([ort_fn] if ort_fn else [])
        samples = interleaved(fns, args.reps, stat=None)
    finally:
        eng.close()
    ms = [statistics.median(v) * 1e3 for v in samples]
    fastest = [min(v) * 1e3 for v in samples]
    verdict = "PASS" if ms[0] < GOAL_INCEPTION_MS else "MISS"
    ort_txt = (f"ORT {ms[1]:.3f} ms (fastest {fastest[1]:.3f}; ORT/hwtune {ms[1] / ms[0]:.2f}x)"
               if ort_fn else "ORT n/a")
    row = (f"inception 3a 192x28x28, batch 1, {ncpu} threads, medians: hwtune {ms[0]:.3f} ms "
           f"(fastest {fastest[0]:.3f}), {ort_txt}; "
           f"goal < {GOAL_INCEPTION_MS} ms (ORT in the issue: {ORT_INCEPTION_MS} ms): {verdict}; "
           f"max |err| of hwtune and ORT vs numpy {err:.2e}")
    lines.append(row)
    print(row, flush=True)
    return verdict == "PASS"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid-s", type=float, default=6.0,
                    help="seconds of 1-thread grid screening per layer")
    ap.add_argument("--reps", type=int, default=15, help="interleaved samples per side")
    ap.add_argument("--only", choices=("layers", "inception"), default=None)
    args = ap.parse_args(argv)
    ncpu = len(allowed_cpus())
    watch = clock.Stopwatch()
    # The machine is shared: the load average says how much to trust medians.
    print(f"isa {selected_isa()}, {ncpu} allowed cores, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    lines = []
    ok = True
    if args.only in (None, "layers"):
        ok &= layer_section(args, ncpu, lines)
    if args.only in (None, "inception"):
        ok &= inception_section(args, ncpu, lines)
    print(f"total {watch.elapsed():.0f} s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
