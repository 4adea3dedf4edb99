"""Interleaved A/B of two hwtune builds on zoo models, each against ONNX
Runtime in its own process, so that machine load hits both sides alike.

    python benchmarks/ab_zoo.py --a /work/main/.venv/bin/hwtune \
        --b .venv/bin/hwtune --models mobilenet_v2,efficientnet_b0 \
        --threads 1,2 --rounds 3 --reps 10 [--small] [--workdir DIR]

Each round runs `hwtune compare MODEL.onnx --with ort` with A, then with B
(alternating which goes first), per model and thread count; it prints per
round the two medians and ratios to ORT (ORT time / hwtune time: above 1.0
hwtune is faster) and at the end the median ratio of each side. The ORT
ratio is the figure to compare: ORT runs beside each side under the same
load, so it normalises the load the two sides saw. The ONNX files are
exported once (benchmarks/zoo_models.py, seeded weights) and shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import zoo_models as Z  # noqa: E402 (benchmarks/ is sys.path[0])
from bench_zoo import exported


def compare(hwtune, path, flags, threads, reps):
    """(hwtune median ms, ort median ms, ratio, max rel error) or None."""
    r = subprocess.run([hwtune, "compare", path, "--with", "ort", "--threads", str(threads),
                        "--reps", str(reps), "--json"] + flags, capture_output=True, text=True)
    if not r.stdout.strip().startswith("{"):
        print(f"  {hwtune}: exit {r.returncode}: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    res = json.loads(r.stdout)
    sides = {s["key"]: s for s in res["sides"]}
    ort = sides["ort"]
    return (sides["hwtune"]["median_s"] * 1e3, ort["median_s"] * 1e3, ort["ratio"],
            ort["max_rel_err"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="hwtune executable of build A (before)")
    ap.add_argument("--b", required=True, help="hwtune executable of build B (after)")
    ap.add_argument("--models", default="mobilenet_v2")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--workdir", default="zoo_ab")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    for name in args.models.split(","):
        path, flags = exported(Z.BY_NAME[name], args.small, args.workdir)
        for t in threads:
            ratios = {"A": [], "B": []}
            for rnd in range(args.rounds):
                order = [("A", args.a), ("B", args.b)]
                if rnd % 2:
                    order.reverse()
                for side, exe in order:
                    got = compare(exe, path, flags, t, args.reps)
                    if got is None:
                        continue
                    ms, ort_ms, ratio, err = got
                    ratios[side].append(ratio)
                    print(f"{name} t={t} round {rnd} {side}: hwtune {ms:.2f} ms, ort "
                          f"{ort_ms:.2f} ms, ratio {ratio:.3f}, max err {err:.1e}", flush=True)
            med = {s: statistics.median(v) if v else float("nan") for s, v in ratios.items()}
            print(f"{name} t={t}: median ratio to ORT A {med['A']:.3f} B {med['B']:.3f} "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
