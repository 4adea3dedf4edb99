"""tune-graph's confirmation of a claimed gain across processes.

The final comparison (final.py) samples every candidate inside the tuning
process, so its interval holds the noise between samples but not the
difference between one process and the next, which a user re-measuring
with `hwtune run` meets: on the 2-vCPU EPYC VM, pathnet_small's tuned corun
config printed 2.08x [2.00, 2.13] and re-measured 1.81x [1.42, 1.95] over 8
pairs of `hwtune run` processes (benchmarks/bench_reproduce.py). So when the
verdict picks anything but the default, the default, the incumbent and the
challenger run again in pairs of fresh processes (measure/processes.py);
the challenger replaces the incumbent only when that interval also lies
above 1.0, and the printed speedup is the one measured across processes.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

from hwtune.engine.runner import open_engine
from hwtune.errors import HwtuneError
from hwtune.measure import clock, processes
from hwtune.tuners import verdict as verdicts

# Pairs of processes: at most CONFIRM_PAIRS, never fewer than
# CONFIRM_MIN_PAIRS (a percentile bootstrap of 3 per-pair ratios spans
# their range: a gain shows only when every pair shows it).
CONFIRM_PAIRS = 6
CONFIRM_MIN_PAIRS = 3
# Timed runs per process: enough runs for ~0.1 s of samples, between 3
# (a 0.45 s inception_small run) and 50 (a 0.3 ms LSTM); the process'
# median is its figure.
CONFIRM_SAMPLE_S = 0.1
MIN_SAMPLES, MAX_SAMPLES = 3, 50
# Untimed runs first in each process (page faults, teams formed), as
# final.FINAL_WARMUP; one for runs of 0.1 s and more.
WARMUP, SLOW_WARMUP, SLOW_RUN_S = 2, 1, 0.1


def plan(run_s: float) -> Tuple[int, int]:
    """(warm-up runs, timed runs) of one process for a config of run_s."""
    samples = max(MIN_SAMPLES, min(MAX_SAMPLES, math.ceil(CONFIRM_SAMPLE_S / max(run_s, 1e-9))))
    return (SLOW_WARMUP if run_s >= SLOW_RUN_S else WARMUP), samples


# The share of a --budget the confirmation may reserve: a 3 s budget on
# pathnet_small (~20 ms a run) would otherwise go whole to its ~5 s minimum.
# With less, a gain is not confirmed and the incumbent stays.
BUDGET_SHARE = 0.25


def reserve(run_s: float, open_s: float, sides: int = 2,
            budget_s: Optional[float] = None) -> float:
    """Seconds the minimum confirmation costs a budget (at most
    BUDGET_SHARE of it)."""
    warmup, samples = plan(run_s)
    need = sides * CONFIRM_MIN_PAIRS * processes.worker_cost(open_s, run_s, warmup, samples)
    return need if budget_s is None else min(need, BUDGET_SHARE * budget_s)


def full_cost(run_s: float, open_s: float, sides: int = 2) -> float:
    """Seconds of a whole confirmation (CONFIRM_PAIRS pairs)."""
    warmup, samples = plan(run_s)
    return sides * CONFIRM_PAIRS * processes.worker_cost(open_s, run_s, warmup, samples)


def across_processes(default, incumbent, challenger, *, progress,
                     deadline: Optional[float] = None):
    """(chosen Candidate, speedup Ratio default/chosen, why lines).

    incumbent: what `hwtune run` uses without this run (the stored config,
    else the default); challenger: the verdict's choice (the incumbent
    itself when it was kept, then only the printed speedup is measured)."""
    sides = [default]
    if incumbent is not default:
        sides.append(incumbent)
    if challenger is not incumbent:
        sides.append(challenger)
    run_s = max(c.median_s or 0.0 for c in sides)
    warmup, samples = plan(run_s)
    name = "the stored tuned config" if incumbent is not default else "the default"
    if deadline is not None and clock.monotonic() + reserve(run_s, 0.0, len(sides)) > deadline:
        # Not even the minimum fits: an unconfirmed gain is no gain.
        if challenger is incumbent:
            return incumbent, verdicts.ratio(default.samples, incumbent.samples), [
                "confirm: no time left to measure the speedup across processes; the "
                "in-process interval is printed"]
        return incumbent, (verdicts.Ratio(1.0, 1.0, 1.0) if incumbent is default else
                           verdicts.ratio(default.samples, incumbent.samples)), [
            f"confirm: no time left in the budget to confirm '{challenger.label}' across "
            f"processes, so {name} is kept (a bigger --budget confirms it)"]
    try:
        meds = processes.paired_processes(
            [(c.graph, c.config, c.op_cost or None) for c in sides], CONFIRM_PAIRS,
            open_engine=open_engine, warmup=warmup, samples=samples, deadline=deadline, min_pairs=CONFIRM_MIN_PAIRS,
            on_pair=lambda p, n: progress("confirm", f"fresh processes, as `hwtune run`: "
                                                     f"pair {p}/{n}"))
    except HwtuneError as exc:
        return (challenger, verdicts.ratio(default.samples, challenger.samples),
                [f"confirm: not measured across processes ({exc}); the in-process interval "
                 f"stands"])
    for c, m in zip(sides, meds):
        c.process_s = list(m)
    n = len(meds[0])
    why: List[str] = []
    chosen = challenger
    if challenger is not incumbent:
        r = verdicts.ratio(incumbent.process_s, challenger.process_s)
        if r.significant:
            why.append(f"confirm: '{challenger.label}' ran {verdicts._x(r)} against {name} "
                       f"over {n} pairs of fresh processes")
        else:
            chosen = incumbent
            why.append(f"confirm: no significant gain across processes: '{challenger.label}' "
                       f"ran {verdicts._x(r)} against {name} over {n} pairs of fresh "
                       f"processes (as `hwtune run` runs it), so {name} is kept")
    speedup = (verdicts.Ratio(1.0, 1.0, 1.0) if chosen is default else
               verdicts.ratio(default.process_s, chosen.process_s))
    return chosen, speedup, why
