"""Counted figures: run hwtune.check.count for a build (this interpreter, or
another one with --against) under callgrind or with perf_event_open
counters, and compare counts without statistics.

Which counter: `cycles` and `instructions` use the hardware counters when
this machine has them (hwtune.measure.counting.hardware_counters);
`instructions` falls back to callgrind's instruction count, and
`estimated-cycles` is always callgrind's (instructions and simulated cache
misses, weighted). Under valgrind the kernels run their AVX2 variant at
most (valgrind 3.19 has no AVX-512; HWTUNE_ISA=avx512 is lowered to avx2),
with a fixed simulated cache hierarchy so that the same code gives the same
count on any host: I1 and D1 32 KiB 8-way, LL 8 MiB 16-way, 64-byte lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

from hwtune.check.count import TOGGLES
from hwtune.check.measure import FigureResult
from hwtune.check.suite import Figure, Suite
from hwtune.errors import UsageError
from hwtune.measure import clock, counting

CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]
# Functions kept per counted figure for the breakdown (largest first).
KEEP_FUNCTIONS = 25


def counter_for(metric: str) -> Tuple[str, str]:
    """('perf' | 'callgrind', why) for a counted metric on this machine;
    UsageError when nothing here can count it."""
    hw, why = counting.hardware_counters()
    if metric in ("cycles", "instructions") and hw:
        return "perf", "hardware counters (perf_event_open)"
    if metric == "cycles":
        raise UsageError(f"metric cycles needs hardware counters and this machine has none "
                         f"({why}): use --metric estimated-cycles (valgrind)")
    if counting.valgrind() is None:
        raise UsageError(f"metric {metric} needs valgrind here ({why or 'no counters'}): "
                         "install it (Debian: apt-get install valgrind)")
    return "callgrind", "valgrind callgrind" + ("" if hw else f" (no hardware counters: {why})")


def _isa_for_valgrind(isa: Optional[str]) -> str:
    from hwtune.native.isa import selected_isa
    want = isa or os.environ.get("HWTUNE_ISA") or selected_isa()
    return "avx2" if want == "avx512" else want


def count_figures(figs: List[Figure], metric: str, suite: Suite, *,
                  python: Optional[str] = None, label: str = "current"
                  ) -> Dict[str, FigureResult]:
    """Count every figure once in one process of `python` (default: this
    interpreter); results carry per-call counts in params['counts'] and the
    largest functions in params['functions']."""
    counter, how = counter_for(metric)
    version = counting.valgrind_version() if counter == "callgrind" else "perf_event_open"
    python = python or sys.executable
    out: Dict[str, FigureResult] = {}
    with tempfile.TemporaryDirectory(prefix="hwtune-count-") as tmp:
        spec = os.path.join(tmp, "spec.json")
        res_path = os.path.join(tmp, "out.json")
        cg = os.path.join(tmp, "callgrind.out")
        isa = _isa_for_valgrind(suite.isa) if counter == "callgrind" else suite.isa
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"reps": suite.count_reps, "metric": metric, "counter": counter,
                       "isa": isa, "figures": [g.to_json() for g in figs]}, f)
        env = dict(os.environ)
        argv = [python, "-m", "hwtune.check.count", spec, res_path]
        if counter == "callgrind":
            toggles = sorted({TOGGLES[g.kind] for g in figs})
            argv = counting.callgrind_argv(cg, toggles) + CACHES + argv
            env["HWTUNE_ISA"] = isa
        # Parked, not spinning, pool workers: spinning under valgrind only
        # burns simulated instructions outside the counted functions, and
        # perf counters would count it, as long as the other thread takes.
        env["HWTUNE_POOL_SPIN_US"] = "0"
        start = clock.monotonic()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
        if proc.returncode != 0 or not os.path.exists(res_path):
            tail = (proc.stderr or "").strip().splitlines()
            raise UsageError(f"counting the {label} build failed (exit {proc.returncode}): "
                             f"{tail[-1] if tail else 'no message'}")
        with open(res_path, encoding="utf-8") as f:
            got = json.load(f)
        # An older build's counter reports no per-figure time: its share of
        # the whole process (interpreter start-up and valgrind's included).
        share = (clock.monotonic() - start) / max(1, len(figs))
        dumps = {d.label: d for d in counting.read_dumps(cg)} if counter == "callgrind" else {}
        if counter == "callgrind" and got.get("marks") != 2:
            raise UsageError("the build has no counting marks (valgrind's headers were missing "
                             "when it was built): install valgrind, then reinstall hwtune")
        for g in figs:
            r = FigureResult(g.name, g.kind, dict(g.params), "count", False)
            info = got["figures"].get(g.name, {})
            r.wall_s = float(info.get("wall_s", share))
            calls = float(info.get("calls") or 1)
            if counter == "callgrind":
                prof = dumps.get(g.name)
                if prof is None:
                    r.error = "callgrind wrote no counts for this figure"
                    out[g.name] = r
                    continue
                counts = {k: v / calls for k, v in prof.totals.items()}
                funcs = sorted(prof.functions.items(),
                               key=lambda kv: -counting.metric_value(metric, kv[1]))
                r.params["functions"] = {
                    n: {k: v / calls for k, v in ev.items()} for n, ev in funcs[:KEEP_FUNCTIONS]}
            else:
                counts = {k: v / calls for k, v in info.get("counts", {}).items()}
            value = counting.metric_value(metric, counts)
            r.samples = [value]
            r.params.update({"metric": metric, "counter": counter, "counted_by": how,
                             "counter_version": version, "counts": counts, "calls": calls,
                             "isa": isa})
            if value <= 0:
                r.error = f"counted nothing ({metric} = {value:g})"
            out[g.name] = r
    return out


def compare_counts(cur: FigureResult, old: FigureResult, threshold: float
                   ) -> Tuple[str, float, str]:
    """(status, ratio, reason) of a counted figure: regression above
    +threshold, improvement below -threshold, else pass (any change named)."""
    metric = cur.metric
    a, b = old.samples[0], cur.samples[0]
    ratio = b / a if a > 0 else float("inf")
    change = ratio - 1.0
    what = f"{metric} {a:,.0f} -> {b:,.0f} per call ({change:+.2%})"
    if old.params.get("counter") != cur.params.get("counter") or old.metric != metric:
        return "error", ratio, (f"the baseline counted {old.metric} with "
                                f"{old.params.get('counter')}, this run {metric} with "
                                f"{cur.params.get('counter')}: record it again")
    if change > threshold:
        rows = counting.grew(old.params.get("functions", {}), cur.params.get("functions", {}),
                             metric)
        grown = ", ".join(f"{n} {x:,.0f} -> {y:,.0f}" for n, x, y in rows[:3] if y > x)
        return "regression", ratio, what + (f"; grew: {grown}" if grown else "")
    if change < -threshold:
        return "improvement", ratio, what + ": fewer"
    if change == 0:
        return "pass", ratio, f"{metric} identical ({b:,.0f} per call)"
    return "pass", ratio, what + f", within the {threshold:.1%} threshold"
