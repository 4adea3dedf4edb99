"""Measure the `hwtune check` gate itself on this machine: its false-positive
rate over A/A comparisons and its detection rate of a real 10% slowdown over
A/B comparisons, with the default suite's samples, rounds and thresholds.

Runs of suite A (the unchanged figures) and suite B (the same figures doing
10% more work: GEMM with K x 1.1, element-wise over n x 1.1 elements, i.e. a
real 10% longer computation, not a scaled number) alternate in time, so load
from other users drifts over both alike. Comparison i of the A/A set is
run A[i] (baseline) vs run A[i+1] (current); of the A/B set, A[i] vs B[i].
Each comparison goes through the gate's own measurement (measure_suite),
decision (gate.decide) and confirmation (gate.confirm: a figure that looks
regressed is measured again, after all runs, and must look regressed again),
in absolute and in relative mode; a comparison counts as flagged when any
figure is a regression.

    python benchmarks/bench_gate.py              # 30 A/A + 30 A/B, ~3-5 min
    python benchmarks/bench_gate.py --pairs 10   # quicker look
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

from hwtune.check.baseline import Baseline
from hwtune.check.gate import confirm, decide
from hwtune.check.measure import measure_suite
from hwtune.check.suite import Figure, load_suite
from hwtune.measure import clock
from hwtune.measure.stats import median

ROOT = Path(__file__).resolve().parent.parent
# The real slowdown of suite B: 10% more work per call.
SLOWDOWN = 1.10
# Fast figures of the default suite: one compute-bound (GEMM) and one
# memory-bound (element-wise) kernel keep a run near 3 s here.
FIGURES = ("gemm-64x512x512-t1", "eltwise-mul-n262144-t1")


def slower(f: Figure) -> Figure:
    p = dict(f.params)
    if f.kind == "gemm":
        p["K"] = int(round(p["K"] * SLOWDOWN))
    elif f.kind == "eltwise":
        p["n"] = int(round(p["n"] * SLOWDOWN))
    else:
        raise SystemExit(f"no 10% variant for a {f.kind} figure")
    return replace(f, params=p)  # same name: compared against A's figure


def flagged(suite, base, cur, relative: bool, hints):
    """The gate's decision, confirmation re-measurement included (it runs
    only for figures that look regressed, on the suite that produced cur)."""
    b = Baseline("h", suite.name, base)
    outs = decide(suite, cur, b, relative=relative)
    outs = confirm(suite, outs, b, relative=relative, mode="gate",
                   measure=lambda sub: measure_suite(sub, inner_hints=hints))
    return any(o.status == "regression" for o in outs), outs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(ROOT / "configs" / "ci.toml"))
    ap.add_argument("--pairs", type=int, default=30, help="A/A and A/B comparisons each")
    ap.add_argument("--json", dest="json_path", default=None, help="write raw results here")
    args = ap.parse_args(argv)

    full = load_suite(args.suite)
    suite_a = full.select(list(FIGURES))
    suite_b = replace(suite_a, figures=[slower(f) for f in suite_a.figures])
    print(f"suite {full.name}: {suite_a.samples} samples (each best of {suite_a.best_of}) in "
          f"{suite_a.rounds} rounds per figure, "
          f"alpha {full.thresholds.alpha}, min effect {full.thresholds.min_effect:.0%}; "
          f"figures {', '.join(FIGURES)}; B = A with {SLOWDOWN - 1:.0%} more work", flush=True)
    runs_a, runs_b = [], []
    watch = clock.Stopwatch()
    hints = None
    for i in range(args.pairs + 1):
        ra = measure_suite(suite_a, inner_hints=hints)
        # Both sides time the same calls per sample, as a check run reuses
        # the baseline's (measure_suite's inner_hints).
        hints = hints or {n: r.params["inner"] for n, r in ra.items() if "inner" in r.params}
        runs_a.append(ra)
        if i < args.pairs:
            runs_b.append(measure_suite(suite_b, inner_hints=hints))
        print(f"\rrun {i + 1}/{args.pairs + 1} ({watch.elapsed():.0f} s)", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)

    table = {}
    for relative in (False, True):
        mode = "relative" if relative else "absolute"
        # Confirmation measures the current side's suite again, now.
        aa = [flagged(suite_a, runs_a[i], runs_a[i + 1], relative, hints)
              for i in range(args.pairs)]
        ab = [flagged(suite_b, runs_a[i], runs_b[i], relative, hints)
              for i in range(args.pairs)]
        fp = sum(f for f, _ in aa)
        tp = sum(f for f, _ in ab)
        undec_aa = sum(any(o.status == "undecidable" for o in outs) for _, outs in aa)
        undec_ab = sum(any(o.status == "undecidable" for o in outs) for _, outs in ab)
        table[mode] = {"false_positives": fp, "aa": len(aa), "detected": tp, "ab": len(ab),
                       "undecidable_aa": undec_aa, "undecidable_ab": undec_ab}
        print(f"{mode:9s} A/A false positives {fp}/{len(aa)} (goal <= 1/30), "
              f"A/B detected {tp}/{len(ab)} (goal >= 29/30); undecidable A/A {undec_aa}, "
              f"A/B {undec_ab}")
    # The slowdown B really had, and the A/A drift, per figure (absolute).
    for name in FIGURES:
        ab = [median(runs_b[i][name].samples) / median(runs_a[i][name].samples)
              for i in range(args.pairs)]
        aa = [median(runs_a[i + 1][name].samples) / median(runs_a[i][name].samples)
              for i in range(args.pairs)]
        print(f"  {name}: B/A median ratio {median(ab):.3f} (min {min(ab):.3f}); "
              f"A/A ratio range {min(aa):.3f}-{max(aa):.3f}")
    print(f"total {watch.elapsed():.0f} s")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"rates": table,
                       "runs_a": [{n: r.to_json() for n, r in ra.items()} for ra in runs_a],
                       "runs_b": [{n: r.to_json() for n, r in rb.items()} for rb in runs_b]},
                      f, allow_nan=False, default=lambda x: None if not math.isfinite(x) else x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
