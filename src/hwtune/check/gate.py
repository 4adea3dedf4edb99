"""`hwtune check` without the click layer: measure a suite, compare it with
the baseline of this host, decide, and store the run.

Modes: 'gate' (default) compares and fails on any significant regression
beyond the suite's min_effect; 'record-or-report' (for a project's own CI on
a shared machine) records a baseline when this host has none, otherwise
compares and fails only on a significant regression of at least
large_effect, and never on an undecidable figure. --update-baseline
measures and records, with no comparison.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

from hwtune.check import baseline as bl
from hwtune.check.measure import FigureResult, measure_suite
from hwtune.check.stats import Verdict, compare
from hwtune.check.suite import Suite
from hwtune.db.lifecycle import finishing
from hwtune.errors import UsageError
from hwtune.measure import clock
from hwtune.scan import stats

MODES = ("gate", "record-or-report")
EXIT = {"pass": 0, "recorded": 0, "regression": 1, "undecidable": 2, "error": 2}


@dataclass
class FigureOutcome:
    name: str
    kind: str
    unit: str
    status: str   # pass | regression | improvement | undecidable | new | error | warn
    reason: str
    current: Optional[FigureResult]
    baseline: Optional[FigureResult]
    verdict: Optional[Verdict] = None

    def to_json(self, samples: bool = True) -> Dict[str, Any]:
        v = self.verdict
        out = {"name": self.name, "kind": self.kind, "unit": self.unit, "status": self.status,
               "reason": self.reason,
               "ratio": v.ratio if v else None, "ci": list(v.ci) if v and v.ci else None,
               "p": v.p if v else None, "noise_floor": v.noise if v else None,
               "current_median": _med(self.current), "baseline_median": _med(self.baseline)}
        if samples:
            out["current"] = self.current.to_json() if self.current else None
            out["baseline"] = self.baseline.to_json() if self.baseline else None
        return out


def _med(f: Optional[FigureResult]) -> Optional[float]:
    return stats.median(f.samples) if f is not None and f.samples else None


@dataclass
class CheckReport:
    suite: Suite
    mode: str
    relative: bool
    host_key: str
    status: str                 # pass | regression | undecidable | error | recorded
    exit_code: int
    outcomes: List[FigureOutcome] = field(default_factory=list)
    references: Dict[str, FigureResult] = field(default_factory=dict)
    baseline_info: Optional[Dict[str, Any]] = None
    recorded_to: List[str] = field(default_factory=list)
    notices: List[str] = field(default_factory=list)
    noise_floor: Optional[float] = None
    run_id: Optional[int] = None
    elapsed_s: float = 0.0

    def counts(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for o in self.outcomes:
            out[o.status] = out.get(o.status, 0) + 1
        return out

    def to_json(self, samples: bool = True) -> Dict[str, Any]:
        th = self.suite.thresholds
        return {"suite": self.suite.name, "suite_path": self.suite.path, "mode": self.mode,
                "relative": self.relative, "host_key": self.host_key, "status": self.status,
                "exit_code": self.exit_code, "counts": self.counts(),
                "thresholds": {"alpha": th.alpha, "min_effect": th.min_effect,
                               "large_effect": self.suite.large_effect, "level": th.level},
                "noise_floor": self.noise_floor, "baseline": self.baseline_info,
                "recorded_to": self.recorded_to, "notices": self.notices,
                "run_id": self.run_id, "elapsed_s": self.elapsed_s,
                "references": {n: f.to_json() for n, f in self.references.items()}
                if samples else None,
                "figures": [o.to_json(samples) for o in self.outcomes]}


def reference_drift(cur: FigureResult, old: FigureResult) -> float:
    """How much slower (+) or faster (-) the figure's reference kernel ran
    in this run than in the baseline's: the machine's own between-run
    change. 0 when either side has no reference timings, or when they used
    different references (then nothing is known)."""
    same_ref = cur.params.get("reference") == old.params.get("reference")
    if not (cur.ref and old.ref and same_ref):
        return 0.0
    a, b = stats.median(cur.ref), stats.median(old.ref)
    return a / b - 1.0 if a > 0 and b > 0 else 0.0


def decide(suite: Suite, current: Dict[str, FigureResult], base: bl.Baseline, *,
           relative: bool, mode: str = "gate") -> List[FigureOutcome]:
    """One outcome per suite figure from raw samples on both sides."""
    out = []
    for f in suite.figures:
        cur, old = current.get(f.name), base.figures.get(f.name)
        if cur is None or cur.error or not cur.samples:
            why = cur.error if cur is not None and cur.error else "not measured"
            out.append(FigureOutcome(f.name, f.kind, f.unit, "error", why, cur, old))
            continue
        if old is None or not old.samples:
            out.append(FigureOutcome(f.name, f.kind, f.unit, "new",
                                     "not in the baseline: record it with --update-baseline",
                                     cur, old))
            continue
        if old.kind != cur.kind or old.higher_is_better != cur.higher_is_better:
            out.append(FigureOutcome(f.name, f.kind, f.unit, "error",
                                     f"the baseline's {f.name} is a {old.kind} figure: record "
                                     "it again with --update-baseline", cur, old))
            continue
        if relative and (len(old.ref) != len(old.samples) or not all(r > 0 for r in old.ref)):
            out.append(FigureOutcome(f.name, f.kind, f.unit, "undecidable",
                                     "the baseline has no reference timings for relative mode",
                                     cur, old))
            continue
        v = compare(cur.costs(relative), old.costs(relative), suite.thresholds,
                    drift=0.0 if relative else reference_drift(cur, old))
        status, reason = v.status, v.reason
        if mode == "record-or-report" and status == "regression" \
                and v.ratio - 1 < suite.large_effect:
            status, reason = "warn", f"{reason}; below the {suite.large_effect:.0%} " \
                                     "record-or-report failure threshold"
        out.append(FigureOutcome(f.name, f.kind, f.unit, status, reason, cur, old, v))
    return out


def confirm(suite: Suite, outcomes: List[FigureOutcome], base: bl.Baseline, *,
            relative: bool, mode: str, measure) -> List[FigureOutcome]:
    """Measure every figure that looks regressed once more and keep the
    regression only if the new samples show it too.

    A neighbour's burst that covers one figure's rounds reads as a
    regression of that figure alone; a code change slows it in every run.
    Measured on the shared 2-core box with best-of-5 samples: a 2-thread
    element-wise figure read +32% in one A/A run and +1% in the next.
    Requiring the second run to pass the whole decision again (noise floor
    included) dropped the detection of a real 10% slowdown from 29/30 to
    22/30 there; requiring it to be significantly slower by min_effect again
    keeps the burst out and the slowdown in.
    measure(sub_suite) returns fresh results for the figures of sub_suite."""
    suspects = [o.name for o in outcomes if o.status == "regression"]
    if not suspects:
        return outcomes
    again = decide(suite.select(suspects), measure(suite.select(suspects)), base,
                   relative=relative, mode=mode)
    second = {o.name: o for o in again}
    th = suite.thresholds
    out = []
    for o in outcomes:
        o2 = second.get(o.name)
        v2 = o2.verdict if o2 is not None else None
        # The question now is "is it still there?", not "can this run alone
        # decide?": significantly slower by min_effect again is enough (the
        # noise floor already had its say in the first decision).
        still = v2 is not None and v2.p is not None and v2.ratio is not None \
            and v2.p < th.alpha and v2.ratio - 1 >= th.min_effect
        if o2 is not None and not still:
            o = replace(o, status="undecidable" if mode == "gate" else "warn",
                        reason=f"{o.reason}, but not when measured again "
                               f"({o2.reason}): a passing load burst")
        out.append(o)
    return out


def overall(outcomes: List[FigureOutcome], mode: str) -> str:
    st = {o.status for o in outcomes}
    if "error" in st:
        return "error"
    if "regression" in st:
        return "regression"
    if mode == "gate" and st & {"undecidable", "new"}:
        return "undecidable"
    return "pass"


def _store(db, run_id: int, results: Dict[str, FigureResult], variant: str) -> None:
    for r in results.values():
        if r.error or not r.samples:
            db.add_measurement(run_id, bench="check", op=r.name, params=r.params,
                               kernel_variant=variant, threads=max(1, int(r.params.get(
                                   "threads", 1))), samples=[], median_s=None, mad_s=None,
                               rel_spread=None, value=None, unit=r.unit, status="error",
                               note=r.error)
            continue
        med = stats.median(r.samples)
        timed = not r.higher_is_better
        db.add_measurement(
            run_id, bench="check", op=r.name, params=dict(r.params, kind=r.kind, ref=r.ref),
            kernel_variant=variant, threads=max(1, int(r.params.get("threads", 1))),
            samples=r.samples, median_s=med if timed else None,
            mad_s=stats.mad(r.samples) if timed else None,
            rel_spread=stats.rel_spread(r.samples), value=med, unit=r.unit)


def run_check(suite: Suite, *, db, mode: str = "gate", baseline_file: Optional[str] = None,
              update_baseline: bool = False, relative: Optional[bool] = None,
              progress=None, warn=None) -> CheckReport:
    """Measure, compare and store one check run; returns the report (the
    caller prints it and exits with report.exit_code). Raises UsageError
    (bad mode, no baseline in 'gate' mode, unreadable file), HostMismatch."""
    from hwtune import machine
    from hwtune.native.isa import selected_isa

    if mode not in MODES:
        raise UsageError(f"invalid --mode {mode!r}: choose one of {', '.join(MODES)}")
    relative = suite.relative if relative is None else bool(relative)
    watch = clock.Stopwatch()
    fp = machine.fingerprint()
    host_key = db.upsert_host(fp)
    notices: List[str] = []

    base: Optional[bl.Baseline] = None
    if not update_baseline:
        if baseline_file is not None:
            # record-or-report records into a missing file; a file that is
            # there but unreadable is an error in every mode.
            if mode == "gate" or os.path.exists(baseline_file):
                base = bl.read_file(baseline_file)
        else:
            base = bl.load_db(db, host_key, suite.name)
            if base is None:
                other = bl.any_db_baseline(db, suite.name)
                if other is not None and relative:
                    base = bl.load_db(db, other, suite.name)
        if base is not None:
            note = bl.check_host(base, host_key, relative)
            if note:
                notices.append(note)
            if base.suite != suite.name:
                notices.append(f"baseline {base.source} was recorded for suite {base.suite!r}, "
                               f"this is suite {suite.name!r}: figures are compared by name "
                               "(record this suite's own with --update-baseline)")
        elif mode == "gate":
            where = f"--baseline {baseline_file}" if baseline_file else str(db.path)
            raise UsageError(f"no baseline of suite {suite.name!r} for this host in {where}: "
                             "record one with hwtune check --update-baseline (or use --mode "
                             "record-or-report)")
    recording = base is None
    options = {"suite": suite.name, "suite_path": suite.path, "mode": mode,
               "relative": relative, "baseline_file": baseline_file,
               "update_baseline": update_baseline, "recording": recording}
    run_id = db.start_run(host_key, "check", options)
    with finishing(db, run_id, "check run"):
        results = measure_suite(suite, db=db, host_key=host_key,
                                inner_hints=base.inner_hints() if base else None,
                                progress=progress)
        _store(db, run_id, results, selected_isa())
        report = CheckReport(suite=suite, mode=mode, relative=relative, host_key=host_key,
                             status="pass", exit_code=0,
                             references={r.name: results[r.name] for r in suite.references
                                         if r.name in results},
                             notices=notices, run_id=run_id)
        if recording:
            failed = [r.name for r in results.values() if r.error]
            if failed:
                raise UsageError(f"not recording a baseline: figure{'s' if len(failed) > 1 else ''}"
                                 f" {', '.join(failed)} failed ({results[failed[0]].error})")
            new = bl.Baseline(host_key=host_key, suite=suite.name, figures=results,
                              host=bl.host_summary(fp), suite_doc=suite.to_json(),
                              source=baseline_file or str(db.path))
            if baseline_file is not None:
                bl.write_file(new, baseline_file)
                report.recorded_to.append(baseline_file)
            else:
                bid = bl.save_db(db, new, run_id)
                report.recorded_to.append(f"{db.path} (baseline {bid})")
            report.status = "recorded"
            report.outcomes = [FigureOutcome(f.name, f.kind, f.unit, "recorded",
                                             f"{len(results[f.name].samples)} samples recorded",
                                             results[f.name], None) for f in suite.figures]
        else:
            report.baseline_info = {"source": base.source, "host_key": base.host_key,
                                    "created_at": base.created_at,
                                    "hwtune_version": base.hwtune_version}
            outs = decide(suite, results, base, relative=relative, mode=mode)
            report.outcomes = confirm(
                suite, outs, base, relative=relative, mode=mode,
                measure=lambda sub: measure_suite(sub, db=db, host_key=host_key,
                                                  inner_hints=base.inner_hints()))
            report.status = overall(report.outcomes, mode)
            floors = [o.verdict.noise for o in report.outcomes
                      if o.verdict is not None and o.verdict.noise is not None]
            report.noise_floor = stats.median(floors) if floors else None
            for o in report.outcomes:
                if o.status in ("undecidable", "warn") and warn:
                    warn(f"{o.name}: {o.reason}")
        report.exit_code = EXIT[report.status]
        report.elapsed_s = watch.elapsed()
        db.add_fact(run_id, "check", report.to_json(samples=False))
        return report


def with_figures(suite: Suite, names: Optional[List[str]]) -> Suite:
    return suite.select(names) if names else suite


def with_samples(suite: Suite, samples: Optional[int]) -> Suite:
    if samples is None:
        return suite
    if samples < 3:
        raise UsageError(f"invalid --samples {samples}: need >= 3 per figure")
    return replace(suite, samples=samples, rounds=min(suite.rounds, samples))
