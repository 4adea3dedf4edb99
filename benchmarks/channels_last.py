"""Channels-last 1x1 CONVs against NCHW in whole models: whether holding
a mobile CNN's 1x1 CONVs in one block of channels (ic_bn = C, oc_bn = K:
kernels/conv/nhwc_gemm.c, the depthwise CONVs between them in the same
block) pays as a default, or is left to tune-graph's layout DP.

    python benchmarks/channels_last.py MODEL.onnx [MODEL.onnx ...]
        [--threads 1] [--reps 60] [--rounds 2] [--workdir DIR]

For each model, three user configs in scratch results databases, run by
`hwtune run` in fresh processes, alternated --rounds times:
  nchw   no CONV knobs (the default: every CONV on NCHW tensors);
  small  the 1x1 stride-1 unpadded CONVs whose NCHW default kernel is the
         template channels-last (the small images the NCHW GEMM leaves to
         the template: 196 pixels or fewer on AVX-512, none elsewhere);
  all    every 1x1 stride-1 unpadded CONV channels-last.
Prints each run's least and median time, then per mode the median over
rounds of the least times and its ratio to nchw's. Outputs are checked
against the numpy reference in every run (`--check`): a mismatch stops the
script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HWTUNE = os.path.join(os.path.dirname(sys.executable), "hwtune")


def _op_params(graph, isa: str, mode: str) -> dict:
    from hwtune.engine.workloads import channels_last_point, conv_workload, nchw_kernel
    out = {}
    if mode == "nchw":
        return out
    for op in graph.ops:
        if op.op != "conv2d" or int(op.resolved.get("group") or 1) != 1:
            continue
        wl = conv_workload(graph, op)
        point = channels_last_point(wl, wl.default_params(isa), wl.space(isa))
        if point is None or (mode == "small" and nchw_kernel(wl, isa) != "NCHW"):
            continue
        out[op.name] = dict(point, layout="NCHWc")
    return out


def _prepare(model: str, mode: str, threads: int, db: str) -> None:
    import hwtune
    from hwtune import machine
    from hwtune.api import _open_db
    from hwtune.native.isa import selected_isa
    m = hwtune.load(model)
    os.makedirs(os.path.dirname(db) or ".", exist_ok=True)
    with _open_db(db) as d:
        host = d.upsert_host(machine.fingerprint())
        gh = d.put_graph(m.graph.to_json())
        d.put_engine_config(host, gh, executors=1, threads_per_executor=threads,
                            scheduler="sequential", pin=False,
                            op_params=_op_params(m.graph, selected_isa(), mode), source="user")


def _run(model: str, db: str, threads: int, reps: int) -> dict:
    r = subprocess.run([HWTUNE, "run", model, "--db", db, "--threads", str(threads), "--reps",
                        str(reps), "--warmup", "5", "--check", "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"hwtune run failed ({r.returncode}): {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    if doc.get("check") and not doc["check"].get("ok", True):
        sys.exit(f"{model}: outputs differ from the reference: {doc['check']}")
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="channels-last-")
    modes = ("nchw", "small", "all")
    print(f"load at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for model in a.models:
        name = os.path.basename(model)
        dbs = {mode: os.path.join(work, f"{name}.{mode}.db") for mode in modes}
        for mode, db in dbs.items():
            if os.path.exists(db):
                os.remove(db)
            _prepare(model, mode, a.threads, db)
        least = {m: [] for m in modes}
        for rnd in range(a.rounds):
            for mode in modes:
                doc = _run(model, dbs[mode], a.threads, a.reps)
                lat = doc["latency_s"]
                least[mode].append(lat["min"] * 1e3)
                print(f"{name} {a.threads}t round {rnd + 1} {mode:6s} least "
                      f"{lat['min'] * 1e3:8.3f} ms  median {lat['median'] * 1e3:8.3f} ms  "
                      f"({doc['knobs_text']})", flush=True)
        mid = {m: statistics.median(v) for m, v in least.items()}
        print(f"{name} {a.threads}t median of the rounds' least: " + ", ".join(
            f"{m} {mid[m]:.3f} ms ({mid['nchw'] / mid[m]:.3f}x nchw)" for m in modes))
    print(f"load at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
