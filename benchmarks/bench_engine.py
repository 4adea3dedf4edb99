"""Engine benchmark (issue #3): hwtune's graph engine against ONNX Runtime.

Run with the installed package:  python benchmarks/bench_engine.py [--reps 5]
(onnx and onnxruntime are needed for the reference rows only:
 pip install onnx onnxruntime)

(a) engine overhead: a chain of 10,000 tiny Adds (64 floats) and a wide graph
    of 8 independent chains of 125 Adds (32768 floats), per scheduler, beside
    ONNX Runtime on the same graphs built with onnx.helper.
(b) model latency: lstm_medium, pathnet_medium, inception_small under the
    four schedulers (corun: Strategy 3, without tuned candidates here: each
    op on executors' worth of threads), each at its best executors x threads
    on this machine.

Comparisons are interleaved: every repetition takes one hwtune sample and then
one reference sample (in (b): one sample of each scheduler in turn), so a
burst of load from the other users of this shared machine hits every side
instead of biasing one. Figures are medians; goals end in PASS/MISS.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from hwtune.engine.instance import NativeEngine
from hwtune.native.sched import schedulers
from hwtune.errors import HwtuneError
from hwtune.graph import load_model
from hwtune.measure import clock
from hwtune.measure.sampling import interleaved_calls
from hwtune.native.threads import allowed_cpus

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "models")
ORT_MISSING = "onnxruntime not installed: pip install onnx onnxruntime"

CHAIN_OPS, CHAIN_N = 10_000, 64
WIDE_CHAINS, WIDE_OPS, WIDE_N = 8, 125, 32768
GOAL_OP_US = 0.2       # issue #3: ORT measured ~0.56 us/node here
GOAL_WIDE_MS = 2.8     # issue #3: ORT measured 5.0 ms seq / 7.0 ms parallel here
# One sample of a graph lasts at least this long: long enough that the
# Python call and timer (~1-2 us) are < 0.1% of it, short enough that the
# whole script stays under ~3 minutes.
SAMPLE_S = 0.02
# The issue allows shrinking a model whose run exceeds 2 s; we shrink at a
# lower bound so (b) fits the script's ~3-minute budget: 3 models x up to 7
# configs x (probe + reps) samples.
MODEL_MAX_S = 0.5


# ---------------------------------------------------------------- timing

def interleaved(fns, reps: int):
    """Median seconds per call of each fn, sampled round-robin."""
    return [statistics.median(s) for s in interleaved_calls(fns, reps, sample_s=SAMPLE_S)]


# ---------------------------------------------------------------- graphs

def chains_model(chains: int, length: int, n: int) -> dict:
    """model.json dict: `chains` independent chains x_{i+1} = x_i + c."""
    ops, outs = [], []
    for j in range(chains):
        prev = f"x{j}"
        for i in range(1, length + 1):
            name = f"a{j}.{i}"
            ops.append({"name": name, "op": "add", "inputs": [prev, "c"]})
            prev = name
        outs.append(prev)
    return {"format_version": 1, "name": f"chains-{chains}x{length}-n{n}",
            "inputs": [{"name": f"x{j}", "shape": [n]} for j in range(chains)],
            "params": [{"name": "c", "shape": [n]}],
            "ops": ops, "outputs": outs}


def ort_session(model: dict, parallel: bool, intra: int, inter: int):
    """The same graph as an ONNX Runtime session, or None when ORT is missing."""
    try:
        import onnx
        from onnx import TensorProto, helper
        import onnxruntime as ort
    except ImportError:
        return None
    n = model["params"][0]["shape"][0]
    nodes = [helper.make_node("Add", [op["inputs"][0], op["inputs"][1]], [op["name"]])
             for op in model["ops"]]
    c = helper.make_tensor("c", TensorProto.FLOAT, [n], np.full(n, 0.5, np.float32).tolist())
    g = helper.make_graph(
        nodes, model["name"],
        [helper.make_tensor_value_info(t["name"], TensorProto.FLOAT, [n]) for t in model["inputs"]],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [n]) for o in model["outputs"]],
        initializer=[c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = min(m.ir_version, 8)  # older runtimes refuse newer IR versions
    onnx.checker.check_model(m)
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL if parallel else ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads, so.inter_op_num_threads = intra, inter
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {t["name"]: np.ones(n, np.float32) for t in model["inputs"]}
    return lambda: sess.run(None, feeds)


def engine_configs(ncpu: int, scheduler: str):
    """(executors, threads) pairs that fit this machine."""
    pairs = [(k, t) for k in range(1, ncpu + 1) for t in range(1, ncpu + 1) if k * t <= ncpu]
    if schedulers()[scheduler].single_team:
        pairs = [p for p in pairs if p[0] == 1]  # one executor runs everything
    return pairs


# ---------------------------------------------------------------- (a)

def section_a(ncpu: int, reps: int, lines: list):
    print("\n(a) engine overhead vs ONNX Runtime")
    for label, model_dict, refs, per_op in (
            ("chain 10000 x add[64]", chains_model(1, CHAIN_OPS, CHAIN_N),
             [("ORT sequential, 1 intra-op thread", False, 1, 1)], True),
            (f"wide {WIDE_CHAINS} chains x {WIDE_OPS} add[{WIDE_N}]",
             chains_model(WIDE_CHAINS, WIDE_OPS, WIDE_N),
             [("ORT sequential, 1 intra-op thread", False, 1, 1),
              (f"ORT sequential, {ncpu} intra-op threads", False, ncpu, 1),
              (f"ORT parallel, {ncpu} inter-op threads", True, 1, ncpu)], False)):
        graph = load_model(model_dict)
        ref_fns = [(name, ort_session(model_dict, par, intra, inter))
                   for name, par, intra, inter in refs]
        nops = len(graph.ops)
        print(f"  {label} ({nops} ops)")
        # The chain has no parallelism: the configs (the single-team
        # scheduler at 1x1, the others at 2x1 and 1x2) show what each adds
        # per op. The wide graph runs every config that fits. Every row of
        # the engine's scheduler table runs.
        configs = [(s, k, t) for s, row in schedulers().items()
                   for k, t in engine_configs(ncpu, s)
                   if not per_op or (k * t == 1 if row.single_team else k * t == ncpu)]
        ref_med = {}
        best = None
        for sched, k, t in configs:
            with NativeEngine(graph, executors=k, threads=t, scheduler=sched) as eng:
                avail = [f for _, f in ref_fns if f is not None]
                meds = interleaved([eng.run] + avail, reps)
            hw = meds[0]
            for (name, f), m in zip([r for r in ref_fns if r[1] is not None], meds[1:]):
                ref_med.setdefault(name, []).append(m)
            ref_now = meds[1] if len(meds) > 1 else None
            ratio = f"  ORT-seq-1t/this {ref_now / hw:5.2f}x" if ref_now else ""
            if per_op:
                us = hw / nops * 1e6
                verdict = "PASS" if us < GOAL_OP_US else "MISS"
                print(f"    hwtune {sched:13s} {k}x{t}: {hw * 1e3:8.3f} ms/run  "
                      f"{us:6.3f} us/op{ratio}  goal < {GOAL_OP_US} us/op: {verdict}")
                lines.append(f"chain overhead {sched} {k}x{t}: {us:.3f} us/op -> {verdict}")
                if best is None or hw < best[0]:
                    best = (hw, f"{sched} {k}x{t}")
            else:
                verdict = "PASS" if hw * 1e3 < GOAL_WIDE_MS else "MISS"
                print(f"    hwtune {sched:13s} {k}x{t}: {hw * 1e3:8.3f} ms/run{ratio}"
                      f"  goal < {GOAL_WIDE_MS} ms: {verdict}")
                if best is None or hw < best[0]:
                    best = (hw, f"{sched} {k}x{t}")
        for name, f in ref_fns:
            if f is None:
                print(f"    {ORT_MISSING}")
                continue
            m = statistics.median(ref_med[name])
            extra = f"  {m / nops * 1e6:6.3f} us/op" if per_op else ""
            vs = f"  this/best hwtune {m / best[0]:5.2f}x" if best else ""
            print(f"    {name:38s}: {m * 1e3:8.3f} ms/run{extra}{vs}  (median of all pairings)")
        if not per_op and best is not None:
            verdict = "PASS" if best[0] * 1e3 < GOAL_WIDE_MS else "MISS"
            lines.append(f"wide graph best ({best[1]}): {best[0] * 1e3:.3f} ms -> {verdict}")


# ---------------------------------------------------------------- (b)

def _one_run_s(graph) -> float:
    with NativeEngine(graph, executors=1, threads=allowed_ncpu(), scheduler="sequential") as eng:
        eng.run()
        return statistics.median(clock.per_call(eng.run, 1) for _ in range(2))


def _fit_model(path: str):
    """The model at the largest power-of-two fraction of its batch whose run
    takes <= MODEL_MAX_S; (graph, note). Runs at batch 1 and 4 fit
    t = fixed + per_item * batch (lstm at small batch is weight-streaming
    bound, so a proportional guess from batch 1 alone shrinks it far too
    much); the chosen batch is then checked and halved while too slow, so
    the full model never runs."""
    full = int(load_model(path).vars["batch"])
    t1 = _one_run_s(load_model(path, overrides={"batch": 1}))
    t4 = _one_run_s(load_model(path, overrides={"batch": min(4, full)}))
    per_item = max(0.0, (t4 - t1) / max(1, min(4, full) - 1))
    batch = full
    while batch > 1 and t1 + per_item * (batch - 1) > MODEL_MAX_S:
        batch //= 2
    while True:
        graph = load_model(path, overrides={"batch": batch})
        if batch == 1 or _one_run_s(graph) <= MODEL_MAX_S:
            break
        batch //= 2
    note = f"batch {batch}" + (f" (shrunk from {full} to fit the time budget)"
                               if batch != full else "")
    return graph, note


def allowed_ncpu() -> int:
    return len(allowed_cpus())


def section_b(ncpu: int, reps: int, lines: list):
    print("\n(b) model latency per scheduler (best executors x threads, k*t <= "
          f"{ncpu} CPUs)")
    scheds = tuple(schedulers())
    for stem in ("lstm_medium", "pathnet_medium", "inception_small"):
        path = os.path.join(MODELS_DIR, stem + ".json")
        graph, note = _fit_model(path)
        print(f"  {stem}: {len(graph.ops)} ops, {note}")
        best = {}
        # Probe every config with a short interleaved round, then measure the
        # best config of each scheduler against each other, interleaved.
        for sched in scheds:
            probes = []
            for k, t in engine_configs(ncpu, sched):
                with NativeEngine(graph, executors=k, threads=t, scheduler=sched) as eng:
                    eng.run()
                    probes.append((statistics.median(clock.per_call(eng.run, 1) for _ in range(3)),
                                   k, t))
            best[sched] = min(probes)[1:]
            print("    probe " + sched + ": " +
                  ", ".join(f"{k}x{t} {s * 1e3:.1f} ms" for s, k, t in probes))
        engines = [NativeEngine(graph, executors=best[s][0], threads=best[s][1], scheduler=s)
                   for s in scheds]
        try:
            meds = interleaved([e.run for e in engines], reps)
        finally:
            for e in engines:
                e.close()
        med = dict(zip(scheds, meds))
        for s, m in med.items():
            k, t = best[s]
            print(f"    {s:13s} {k}x{t}: {m * 1e3:9.2f} ms  (sequential/this "
                  f"{med['sequential'] / m:4.2f}x)")
        cp, others = med["critical-path"], min(med["sequential"], med["shared-queue"])
        verdict = "PASS" if cp < others else "MISS"
        multi = "" if stem != "lstm_medium" else " (lstm: layer wavefront only)"
        lines.append(f"{stem}: critical-path {cp * 1e3:.2f} ms vs best other "
                     f"{others * 1e3:.2f} ms ({others / cp:.2f}x){multi} -> {verdict}")
        lines.append(f"{stem}: corun {med['corun'] * 1e3:.2f} ms (sequential/corun "
                     f"{med['sequential'] / med['corun']:.2f}x)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    ap.add_argument("--skip-models", action="store_true", help="run section (a) only")
    args = ap.parse_args(argv)
    ncpu = allowed_ncpu()
    try:
        import onnxruntime as ort
        ort_ver = ort.__version__
    except ImportError:
        ort_ver = "missing"
    print(f"hwtune engine benchmark: {ncpu} CPUs allowed, onnxruntime {ort_ver}, "
          f"{args.reps} interleaved reps, medians")
    watch = clock.Stopwatch()
    lines = []
    try:
        section_a(ncpu, args.reps, lines)
        if not args.skip_models:
            section_b(ncpu, args.reps, lines)
    except HwtuneError as exc:
        raise SystemExit(f"error: {exc}")
    print("\ngoals")
    for line in lines:
        print("  " + line)
    print(f"\ntotal {watch.elapsed():.0f} s")


if __name__ == "__main__":
    main()
