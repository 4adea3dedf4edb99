"""Measure the `hwtune check` gate itself on this machine, per metric: its
false-positive rate over A/A comparisons, its detection rate of a real 10%
slowdown over A/B comparisons, how often it stays undecidable, and the
seconds it spends per figure.

Suite B is suite A with 10% more work (GEMM with K x 1.1, element-wise over
n x 1.1 elements: a real longer computation, not a scaled number).

- time, paired (the default, `hwtune check --against`): each comparison
  runs A in one worker process and A (A/A) or B (A/B) in another, chunk by
  chunk, until the sequential test decides on the per-round log-ratios or
  the suite's max_seconds pass. Seconds per figure include starting both
  workers.
- time, baseline (`--procedure baseline`, `hwtune check` against a stored
  baseline): each comparison records a baseline of A the way `hwtune check
  --update-baseline` does, then samples A (A/A) and B (A/B) against it.
- counts (estimated-cycles, or --metric): A counted twice and B once per
  comparison, in separate processes under valgrind as `hwtune check` does.
- fork-join: the same element-wise work as 64x as many fork-join regions
  over consecutive slices of the same arrays (regions = 64): counts see
  only the kernel's own per-region set-up (64x as many entries), time must
  catch the fork-joins.

    python benchmarks/bench_gate.py --pairs 30            # the issue's figures (long)
    python benchmarks/bench_gate.py --pairs 3 --what counts,forkjoin

--noise (issue #42's goals): a background process loads one core on and
off at random (busy 0.1-2 s, idle 0.1-2 s) for the whole run, and each of
--trials trials compares A with A (false regressions) and A with B (a 10%
slowdown: detection) in both modes users gate with: the default, a stored
baseline recorded as `hwtune check --update-baseline` records it (levels
over --processes fresh processes), checked as `hwtune check` checks (this
process, then a suspect re-measured in fresh processes), and `--against`
(two builds interleaved in two workers). Goals: A/A false regressions
<= 1/30 and A/B detected >= 27/30 in both.

    python benchmarks/bench_gate.py --noise --trials 5    # reduced (minutes)
    python benchmarks/bench_gate.py --noise               # 30 trials
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from hwtune.check.baseline import Baseline
from hwtune.check.counted import compare_counts, count_figures
from hwtune.check.measure import measure_suite
from hwtune.check.paired import measure_paired
from hwtune.check.suite import Figure, load_suite
from hwtune.measure import clock

ROOT = Path(__file__).resolve().parent.parent
# The real slowdown of suite B: 10% more work per call.
SLOWDOWN = 1.10
# One compute-bound (GEMM) and one memory-bound (element-wise) kernel.
FIGURES = ("gemm-64x512x512-t1", "eltwise-mul-n262144-t1")
# Fork-join regions of the time-only regression (same elements in total).
REGIONS = 64


def slower(f: Figure) -> Figure:
    p = dict(f.params)
    if f.kind == "gemm":
        p["K"] = int(round(p["K"] * SLOWDOWN))
    elif f.kind == "eltwise":
        p["n"] = int(round(p["n"] * SLOWDOWN))
    else:
        raise SystemExit(f"no 10% variant for a {f.kind} figure")
    return replace(f, params=p)  # same name: compared against A's figure


def load1() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def alternated(suite_a, suite_b, trials: int, what: str, measure, setup=lambda: None) -> dict:
    """Per trial, setup() (its value: `state`), then an A/A and an A/B
    measurement: measure(suite, figures_b, state) -> {figure: (status,
    ratio, rounds)}, where suite is suite_a, then suite_b, and figures_b
    None, then suite_b's figures by name (for the paired modes, which run
    suite_a with B's figures in the second worker). "seconds": each
    measurement's wall time per figure."""
    out = {"aa": [], "ab": [], "seconds": []}
    figs_b = {f.name: f for f in suite_b.figures}
    for i in range(trials):
        state = setup()
        for key, suite, fb in (("aa", suite_a, None), ("ab", suite_b, figs_b)):
            watch = clock.Stopwatch()
            got = measure(suite, fb, state)
            out["seconds"].append(watch.elapsed() / len(suite.figures))
            out[key].append(got)
        said(f"{what} {i + 1}/{trials}", out)
    return out


def decided(results) -> dict:
    """{figure: (status, ratio, rounds)} of measured results (name -> result)."""
    return {n: (r.decision.status if r.decision else "error",
                r.decision.ratio if r.decision else None,
                r.params.get("rounds")) for n, r in results.items()}


def outcomes(outs) -> dict:
    """{figure: (status, ratio, rounds)} of the gate's outcomes."""
    return {o.name: (o.status, o.verdict.ratio if o.verdict else None,
                     o.current.params.get("rounds") if o.current else None) for o in outs}


def timed(suite_a, suite_b, pairs: int) -> dict:
    """A/A and A/B outcomes per figure through the gate's own sampling."""
    def baseline():
        return Baseline("h", suite_a.name, measure_suite(suite_a, record=True))

    def measure(suite, _, base):
        got = measure_suite(suite, inner_hints=base.inner_hints(), baseline=base)
        return decided({n: r for n, r in got.items() if n in FIGURES or n.startswith("ew-")})
    return alternated(suite_a, suite_b, pairs, "time pair", measure, baseline)


def paired(suite_a, suite_b, pairs: int) -> dict:
    """A/A and A/B outcomes per figure through `hwtune check --against`'s
    procedure: two worker processes of this interpreter, one running A, the
    other A or B."""
    def measure(_, figures_b, __):
        return decided(measure_paired(suite_a, sys.executable, figures_b=figures_b)[1])
    return alternated(suite_a, suite_b, pairs, "time pair", measure)


# The background load of --noise: one busy thread, on and off at random.
LOAD = """
import random, time
rng = random.Random({seed})
while True:
    end = time.perf_counter() + rng.uniform(0.1, 2.0)
    while time.perf_counter() < end:
        pass
    time.sleep(rng.uniform(0.1, 2.0))
"""


def stored_mode(suite_a, suite_b, trials: int, processes: int) -> dict:
    """`hwtune check --update-baseline` then `hwtune check` (A/A) and the
    same check of B (A/B), per trial: a baseline recorded over `processes`
    processes, decided by the gate's level test, a suspect re-measured in
    fresh processes (hwtune.check.gate)."""
    from hwtune.check import gate

    def baseline():
        rec = measure_suite(suite_a, record=True, levels=True)
        gate.record_levels(suite_a, rec, processes=processes)
        return Baseline("h", suite_a.name, rec)

    def measure(suite, _, base):
        got = measure_suite(suite, inner_hints=base.inner_hints(), baseline=base)
        return outcomes(gate.confirm_regressions(
            suite, gate.decide(suite, got, base, mode="gate", relative=False), base,
            mode="gate", relative=False))
    return alternated(suite_a, suite_b, trials, "stored-baseline trial", measure, baseline)


def against_mode(suite_a, suite_b, trials: int) -> dict:
    """`hwtune check --against`: paired() decided as the gate decides."""
    from hwtune.check import gate

    def measure(_, figures_b, __):
        olds, got, _ = measure_paired(suite_a, sys.executable, figures_b=figures_b)
        return outcomes(gate.decide_paired(suite_a, f, got.get(f.name), olds.get(f.name),
                                           mode="gate") for f in suite_a.figures)
    return alternated(suite_a, suite_b, trials, "--against trial", measure)


def noise(suite_a, suite_b, trials: int, processes: int, seed: int) -> dict:
    """Both modes under the on/off load of one core; the per-trial figures."""
    import subprocess
    load = subprocess.Popen([sys.executable, "-c", LOAD.format(seed=seed)])
    results = {}
    try:
        for label, run in (("stored baseline (default)",
                            lambda: stored_mode(suite_a, suite_b, trials, processes)),
                           ("--against", lambda: against_mode(suite_a, suite_b, trials))):
            r = run()
            false = sum(1 for row in r["aa"] if any(st == "regression"
                                                    for st, _, _ in row.values()))
            caught = {n: sum(1 for row in r["ab"] if row[n][0] == "regression")
                      for n in r["ab"][0]}
            aa_other = {st for row in r["aa"] for st, _, _ in row.values()} - {"pass"}
            print(f"{label} (load average {load1():.1f}):")
            print(f"  A/A false regressions: {false}/{trials} trials (goal <= 1/30; "
                  f"statuses other than pass: {sorted(aa_other) or 'none'})")
            for n, c in caught.items():
                print(f"  A/B 10% slower detected, {n}: {c}/{trials} (goal >= 27/30)")
            summary("A/A", r["aa"], "per figure")
            summary("A/B", r["ab"], "per figure")
            print(f"  seconds per figure and comparison: mean "
                  f"{sum(r['seconds']) / len(r['seconds']):.1f}", flush=True)
            r["false_regressions"], r["detected"] = false, caught
            results[label] = r
    finally:
        load.kill()
        load.wait()
    return results


def said(what: str, out: dict) -> None:
    """One line per pair as it ends (status, ratio, rounds per figure), so
    that a run stopped early still shows what it measured."""
    row = {k: {n: (st, round(r, 4) if r else r, k2) for n, (st, r, k2) in out[k][-1].items()}
           for k in ("aa", "ab")}
    print(f"  {what} (load {load1():.1f}): {json.dumps(row)}", file=sys.stderr, flush=True)


def summary(label: str, rows, goal: str) -> dict:
    flat = [st for r in rows for (st, _, _) in r.values()]
    counts = {s: flat.count(s) for s in sorted(set(flat))}
    print(f"  {label}: {counts} over {len(flat)} figure comparisons ({goal})")
    return counts


def counts(suite_a, suite_b, pairs: int, metric: str) -> dict:
    figs_a = [replace(f, metric=metric) for f in suite_a.figures]
    figs_b = [replace(f, metric=metric) for f in suite_b.figures]
    out = {"aa": [], "ab": [], "seconds": []}
    for i in range(pairs):
        watch = clock.Stopwatch()
        a1 = count_figures(figs_a, metric, suite_a)
        out["seconds"].append(watch.elapsed() / len(figs_a))
        a2 = count_figures(figs_a, metric, suite_a)
        b = count_figures(figs_b, metric, suite_b)
        for key, cur in (("aa", a2), ("ab", b)):
            row = {}
            for n in a1:
                st, ratio, _ = compare_counts(cur[n], a1[n], suite_a.count_threshold)
                row[n] = (st, ratio, 1)
            out[key].append(row)
        said(f"counts pair {i + 1}/{pairs}", out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(ROOT / "configs" / "ci.toml"))
    ap.add_argument("--pairs", type=int, default=30, help="A/A and A/B comparisons each")
    ap.add_argument("--metric", default="estimated-cycles",
                    help="the counting metric (instructions, cycles, estimated-cycles)")
    ap.add_argument("--what", default="time,counts,forkjoin",
                    help="comma-separated: time, counts, forkjoin")
    ap.add_argument("--procedure", choices=("paired", "baseline"), default="paired",
                    help="time: against another build now (--against), or a stored baseline")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="cap per time figure (default: the suite's)")
    ap.add_argument("--json", dest="json_path", default=None, help="write raw results here")
    ap.add_argument("--noise", action="store_true",
                    help="issue #42's figures: both modes under a random on/off load of one "
                         "core (A/A false regressions, A/B detection per trial)")
    ap.add_argument("--trials", type=int, default=30, help="--noise: trials per mode")
    ap.add_argument("--processes", type=int, default=None,
                    help="--noise: processes per recorded baseline (default: hwtune's)")
    ap.add_argument("--seed", type=int, default=42, help="--noise: the load's on/off pattern")
    args = ap.parse_args(argv)
    what = set(args.what.split(","))

    full = load_suite(args.suite)
    if args.max_seconds:
        full = replace(full, max_seconds=args.max_seconds)
    base_figs = [replace(f, metric="time") for f in full.select(list(FIGURES)).figures]
    suite_a = replace(full.select(list(FIGURES)), figures=base_figs, metric="time")
    suite_b = replace(suite_a, figures=[slower(f) for f in suite_a.figures])
    from hwtune import machine
    from hwtune.native.isa import selected_isa
    fp = machine.fingerprint()
    print(f"{fp.get('cpu_model')} ({selected_isa()}), load average {load1():.1f}; "
          f"alpha {full.thresholds.alpha}, min effect {full.thresholds.min_effect:.0%}, "
          f"max {full.max_seconds:.0f} s per time figure, count threshold "
          f"{full.count_threshold:.1%}; B = A with {SLOWDOWN - 1:.0%} more work", flush=True)
    results = {}
    watch = clock.Stopwatch()
    if args.noise:
        from hwtune.check.levels import PROCESSES
        k = args.processes or PROCESSES
        print(f"--noise: one core loaded on and off at random; {args.trials} trials per mode; "
              f"stored baselines over {k} processes", flush=True)
        results = noise(suite_a, suite_b, args.trials, k, args.seed)
        print(f"total {watch.elapsed():.0f} s")
        if args.json_path:
            with open(args.json_path, "w") as f:
                json.dump(results, f, default=str)
        return 0
    time_of = paired if args.procedure == "paired" else timed
    if "time" in what:
        r = time_of(suite_a, suite_b, args.pairs)
        print(f"time, {args.procedure} (load average {load1():.1f}):")
        r["aa_counts"] = summary("A/A", r["aa"], "goal: <= 1/30 regression, <= 3/30 undecidable")
        r["ab_counts"] = summary("A/B", r["ab"], "goal: >= 27/30 regression")
        print(f"  seconds per figure: mean {sum(r['seconds']) / len(r['seconds']):.1f} "
              f"(goal <= 60)")
        results["time"] = r
    if "counts" in what:
        r = counts(suite_a, suite_b, args.pairs, args.metric)
        print(f"{args.metric} (load average {load1():.1f}):")
        r["aa_counts"] = summary("A/A", r["aa"], "goal: identical or within 0.1%")
        r["ab_counts"] = summary("A/B", r["ab"], "goal: 30/30 regression")
        worst = max(abs(ratio - 1) for row in r["aa"] for (_, ratio, _) in row.values())
        print(f"  largest A/A change {worst:.4%}; seconds per figure: mean "
              f"{sum(r['seconds']) / len(r['seconds']):.1f} (goal <= 30)")
        results["counts"] = r
    if "forkjoin" in what:
        ew = replace(suite_a.figures[1], name="ew-t2", params=dict(
            suite_a.figures[1].params, threads=2))
        one = replace(suite_a, figures=[ew])
        many = replace(one, figures=[replace(ew, params=dict(ew.params, regions=REGIONS))])
        t = time_of(one, many, max(1, args.pairs // 3))
        c = counts(one, many, 1, args.metric)
        print(f"fork-join x{REGIONS}, same work (load average {load1():.1f}):")
        summary("time A/B", t["ab"], "goal: regression")
        summary(f"{args.metric} A/B", c["ab"], "counts see only the kernel's entries: "
                "its per-region set-up, not the fork-join")
        results["forkjoin"] = {"time": t, "counts": c}
    print(f"total {watch.elapsed():.0f} s")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(results, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
