"""`hwtune check` without the click layer: measure a suite, compare it with
the baseline of this host (or with another build, interleaved), decide,
and store the run.

Modes: 'gate' (default) compares and fails on any significant regression
beyond the suite's min_effect; 'record-or-report' (for a project's own CI on
a shared machine) records a baseline when this host has none, otherwise
compares and fails only on a significant regression of at least
large_effect, and never on an undecidable figure. --update-baseline
measures and records, with no comparison. `against` (a Python interpreter
of another hwtune build) compares the two builds on this machine now, with
no baseline: time figures in two worker processes round by round, counted
figures counted in both.

A baseline file holds one entry per host. CI runs on whichever machine it
gets, always on a clean clone, so in record-or-report a host the file has
no entry for records its own (and passes) instead of failing because the
machine changed; the same run is compared, relative to the reference
kernels, with the entry of another host of the same kernel ISA, as advice
only (a different microarchitecture moves kernel-to-reference ratios too).
Counted figures (instructions, estimated cycles under valgrind at a fixed
kernel ISA) do not depend on the host: they are compared with any host's
entry of the same ISA and counter, and they gate.

Exit codes: 0 pass (an improvement is a pass, with a note), 1 regression,
2 error, 3 undecidable (0 with undecidable_ok).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

from hwtune import __version__
from hwtune.check import baseline as bl
from hwtune.check.measure import FigureResult, measure_suite
from hwtune.check.stats import Verdict
from hwtune.check.suite import COUNTABLE, Suite
from hwtune.db.lifecycle import finishing
from hwtune.db.timestamps import utc_now
from hwtune.errors import UsageError
from hwtune.measure import clock
from hwtune.scan import stats

MODES = ("gate", "record-or-report")
EXIT = {"pass": 0, "recorded": 0, "regression": 1, "error": 2, "undecidable": 3}


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

    @property
    def metric(self) -> str:
        f = self.current or self.baseline
        return f.metric if f is not None else "time"

    @property
    def samples_taken(self) -> Dict[str, Any]:
        """What decided: the metric, and the rounds (time) or calls (counts)."""
        f = self.current
        p = f.params if f is not None else {}
        if self.metric == "time":
            return {"metric": "time", "rounds": p.get("rounds"), "samples": len(f.samples)
                    if f is not None else 0, "discarded_rounds": p.get("discarded"),
                    "chunk": p.get("chunk"), "sampling_s": p.get("sampling_s")}
        return {"metric": self.metric, "counter": p.get("counter"), "calls": p.get("calls"),
                "samples": 1 if f is not None and f.samples else 0}

    def to_json(self, samples: bool = True) -> Dict[str, Any]:
        v = self.verdict
        out = {"name": self.name, "kind": self.kind, "unit": self.unit, "status": self.status,
               "reason": self.reason, "metric": self.metric, "decided_by": self.samples_taken,
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
    against: Optional[Dict[str, Any]] = None    # the other build (paired mode)
    undecidable_ok: bool = False
    created_at: str = field(default_factory=utc_now)

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
                               "large_effect": self.suite.large_effect, "level": th.level,
                               "count_threshold": self.suite.count_threshold},
                "hwtune_version": __version__, "created_at": self.created_at,
                "noise_floor": self.noise_floor, "baseline": self.baseline_info,
                "recorded_to": self.recorded_to, "notices": self.notices,
                "run_id": self.run_id, "elapsed_s": self.elapsed_s, "against": self.against,
                "references": {n: f.to_json() for n, f in self.references.items()}
                if samples else None,
                "figures": [o.to_json(samples) for o in self.outcomes]}


def _verdict(d, noise=None) -> Verdict:
    return Verdict(d.status, d.ratio if d.ratio == d.ratio else None,
                   d.ci if d.ci[0] == d.ci[0] else None,
                   d.p if d.p == d.p else None, noise, d.reason)


def _outcome(f, status: str, reason: str, cur, old, v=None) -> "FigureOutcome":
    return FigureOutcome(f.name, f.kind, f.unit if status != "count" else "count", status,
                         reason, cur, old, v)


def _mode_rule(suite: Suite, mode: str, status: str, ratio: Optional[float], reason: str):
    """record-or-report fails only from large_effect; undecidable warns."""
    if mode != "record-or-report":
        return status, reason
    if status == "regression" and ratio is not None and ratio - 1 < suite.large_effect:
        return "warn", f"{reason}; below the {suite.large_effect:.0%} record-or-report " \
                       "failure threshold"
    if status == "undecidable":
        return "warn", reason
    return status, reason


def level_decision(suite: Suite, cur: FigureResult, old: FigureResult, relative: bool,
                   again: Optional[FigureResult] = None):
    """The time verdict of cur (and its re-measure `again`) against a
    baseline that recorded levels over several processes (levels.py), or
    None when the baseline has too few (one run: the sequential test's
    verdict stands). Sets cur.decision and keeps the level in cur.params."""
    from hwtune.check import levels
    base = levels.stored(old.params)
    if len(base) < levels.MIN_LEVELS:
        return None
    runs = [r for r in (cur, again) if r is not None]
    lv = [levels.level_of(r.costs(), r.ref, r.params) for r in runs]
    if any(x is None for x in lv):
        return None
    for r, x in zip(runs, lv):
        r.params["level"] = x.to_json()
    th = suite.thresholds
    cur.decision = levels.decide(base, lv, relative=relative, alpha=th.alpha,
                                 min_effect=th.min_effect)
    return cur.decision


def decide_one(suite: Suite, f, cur: Optional[FigureResult], old: Optional[FigureResult], *,
               mode: str = "gate", relative: Optional[bool] = None) -> FigureOutcome:
    """The outcome of one figure: its time decision (against a baseline of
    several processes: levels.py, when `relative` is given; else the one
    taken while sampling), or its counts against the baseline's."""
    from hwtune.check.counted import compare_counts
    if cur is None or cur.error or not cur.samples:
        why = cur.error if cur is not None and cur.error else "not measured"
        return FigureOutcome(f.name, f.kind, f.unit, "error", why, cur, old)
    if old is None or not old.samples:
        return FigureOutcome(f.name, f.kind, cur.unit, "new",
                             "not in the baseline: record it with --update-baseline", cur, old)
    if old.kind != cur.kind or old.metric != cur.metric:
        return FigureOutcome(f.name, f.kind, cur.unit, "error",
                             f"the baseline's {f.name} is a {old.kind} figure measured by "
                             f"{old.metric}, this run's by {cur.metric}: record it again with "
                             "--update-baseline", cur, old)
    if cur.metric != "time":
        # Counts repeat exactly: count_threshold is the rule in every mode
        # (large_effect is for the noise of time figures).
        status, ratio, reason = compare_counts(cur, old, suite.count_threshold)
        return FigureOutcome(f.name, f.kind, cur.unit, status, reason, cur, old,
                             Verdict(status, ratio, None, None, None, reason))
    d = level_decision(suite, cur, old, relative) if relative is not None else None
    d = d or cur.decision
    if d is None:
        from hwtune.check import levels
        if relative is not None and levels.has_levels(old):
            return FigureOutcome(f.name, f.kind, f.unit, "undecidable", TOO_FEW_ROUNDS, cur, old)
        return FigureOutcome(f.name, f.kind, f.unit, "undecidable",
                             "the baseline has no usable rounds for this figure: record it "
                             "again with --update-baseline", cur, old)
    status, reason = _mode_rule(suite, mode, d.status, d.ratio, d.reason)
    return FigureOutcome(f.name, f.kind, f.unit, status, reason, cur, old, _verdict(d))


def decide(suite: Suite, current: Dict[str, FigureResult], base: bl.Baseline, *,
           mode: str = "gate", relative: Optional[bool] = None) -> List[FigureOutcome]:
    """One outcome per suite figure."""
    return [decide_one(suite, f, current.get(f.name), base.figures.get(f.name), mode=mode,
                       relative=relative) for f in suite.figures]


def overall(outcomes: List[FigureOutcome], mode: str) -> str:
    """error, else regression, else (gate mode) undecidable, else pass: an
    improvement is a pass."""
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
        timed = r.metric == "time" and not r.higher_is_better
        db.add_measurement(
            run_id, bench="check", op=r.name, params=dict(r.params, kind=r.kind, ref=r.ref),
            kernel_variant=variant, threads=max(1, int(r.params.get("threads", 1))),
            samples=r.samples, median_s=med if timed else None,
            mad_s=stats.mad(r.samples) if timed else None,
            rel_spread=stats.rel_spread(r.samples), value=med, unit=r.unit)


def measure_all(suite: Suite, *, db=None, host_key=None, baseline=None, record=False,
                relative=False, progress=None, levels: bool = False
                ) -> Dict[str, FigureResult]:
    """This build's results for every figure: time figures sampled (until
    decided against baseline, or precise enough to record), counted figures
    counted, by metric."""
    from hwtune.check.counted import count_figures
    out = measure_suite(suite, db=db, host_key=host_key,
                        inner_hints=baseline.inner_hints() if baseline else None,
                        progress=progress, baseline=baseline, record=record,
                        relative=relative, levels=levels)
    for m, figs in suite.counted().items():
        if progress:
            progress(0, 1, f"counting {len(figs)} figure(s) ({m})")
        out.update(count_figures(figs, m, suite))
    return out


def run_check(suite: Suite, *, db, mode: str = "gate", baseline_file: Optional[str] = None,
              update_baseline: bool = False, relative: Optional[bool] = None,
              against: Optional[str] = None, undecidable_ok: bool = False,
              progress=None, warn=None, processes: Optional[int] = None) -> CheckReport:
    """Measure, compare and store one check run; returns the report (the
    caller prints it and exits with report.exit_code). Raises UsageError
    (bad mode, no baseline in 'gate' mode, unreadable file), HostMismatch."""
    from hwtune import machine
    from hwtune.native.isa import selected_isa

    if mode not in MODES:
        raise UsageError(f"invalid --mode {mode!r}: choose one of {', '.join(MODES)}")
    if against is not None and (update_baseline or baseline_file):
        raise UsageError("--against compares two builds now: it takes no --baseline and no "
                         "--update-baseline")
    relative = suite.relative if relative is None else bool(relative)
    watch = clock.Stopwatch()
    fp = machine.fingerprint()
    host_key = db.upsert_host(fp)
    isa = selected_isa()
    notices: List[str] = []

    base: Optional[bl.Baseline] = None
    entries: Dict[str, bl.Baseline] = {}   # every host's entry of baseline_file
    if not update_baseline and against is None:
        if baseline_file is not None:
            # record-or-report records into a missing file; a file that is
            # there but unreadable is an error in every mode.
            if mode == "gate" or os.path.exists(baseline_file):
                entries = bl.read_entries(baseline_file)
                base = entries.get(host_key)
                if base is None and (relative or mode == "gate"):
                    base = bl.other_host(entries, host_key, isa) or max(
                        entries.values(), key=lambda b: b.created_at)
                elif base is None:
                    notices.append(f"baseline {baseline_file} has no entry for this host "
                                   f"({host_key}): recording one beside the others; counted "
                                   "figures are compared with another host's counts")
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
        elif mode == "gate":
            where = f"--baseline {baseline_file}" if baseline_file else str(db.path)
            raise UsageError(f"no baseline of suite {suite.name!r} for this host in {where}: "
                             "record one with hwtune check --update-baseline (or use --mode "
                             "record-or-report, or compare with another build: --against)")
    recording = base is None and against is None
    options = {"suite": suite.name, "suite_path": suite.path, "mode": mode,
               "relative": relative, "baseline_file": baseline_file,
               "update_baseline": update_baseline, "recording": recording,
               "against": against}
    run_id = db.start_run(host_key, "check", options)
    with finishing(db, run_id, "check run"):
        report = CheckReport(suite=suite, mode=mode, relative=relative, host_key=host_key,
                             status="pass", exit_code=0, notices=notices, run_id=run_id,
                             undecidable_ok=undecidable_ok)
        if against is not None:
            from hwtune.check.paired import measure_paired
            olds, results, info = measure_paired(suite, against, progress=progress)
            report.against = info
            _store(db, run_id, results, selected_isa())
            report.outcomes = [decide_paired(suite, f, results.get(f.name),
                                             olds.get(f.name), mode=mode)
                               for f in suite.figures]
            report.status = overall(report.outcomes, mode)
        else:
            from hwtune.check import levels as lv
            results = measure_all(suite, db=db, host_key=host_key, baseline=base,
                                  record=recording, relative=relative, progress=progress,
                                  levels=recording and int(
                                      processes or suite.processes or lv.PROCESSES)
                                  >= lv.MIN_LEVELS)
            _store(db, run_id, results, selected_isa())
            report.references = {r.name: results[r.name] for r in suite.references
                                 if r.name in results}
            if recording:
                record_levels(suite, results, processes=processes, progress=progress)
                _record(report, suite, results, db, fp, host_key, baseline_file, isa)
                if entries and not update_baseline:
                    _counts_across_hosts(report, suite, results, entries, host_key)
            else:
                report.baseline_info = {"source": base.source, "host_key": base.host_key,
                                        "created_at": base.created_at,
                                        "hwtune_version": base.hwtune_version}
                outcomes = decide(suite, results, base, mode=mode, relative=relative)
                if relative is not None:
                    outcomes = retry_too_few_rounds(suite, outcomes, base, mode=mode,
                                                    relative=relative, progress=progress)
                report.outcomes = confirm_regressions(suite, outcomes, base, mode=mode,
                                                      relative=relative, progress=progress)
                report.status = overall(report.outcomes, mode)
        for o in report.outcomes:
            if o.status in ("undecidable", "warn") and warn:
                warn(f"{o.name}: {o.reason}")
            if o.status == "improvement":
                report.notices.append(f"{o.name} improved: {o.reason}")
        report.exit_code = 0 if report.status == "undecidable" and undecidable_ok \
            else EXIT[report.status]
        report.elapsed_s = watch.elapsed()
        db.add_fact(run_id, "check", report.to_json(samples=False))
        return report


# Fresh processes tried for one level of a recorded baseline before the
# recording fails. A fresh process on a loaded machine can keep fewer than
# the 3 usable rounds a level needs (seen in CI: the docs' tiny suite, 3 to 8
# rounds in 5 s, its element-wise figure under `pytest -n 2`), which failed
# the whole recording; each level still comes from one fresh process.
FRESH_TRIES = 3


def record_levels(suite: Suite, results: Dict[str, FigureResult], *,
                  processes: Optional[int] = None, progress=None) -> None:
    """A baseline's distribution (levels.py): each time figure's level in
    this process and in processes - 1 fresh worker processes, kept in its
    params["levels"]. Model figures keep one run (a worker has no
    results.db, so it would run another config)."""
    from hwtune.check import levels
    from hwtune.check.remeasure import record_level
    from hwtune.check.suite import reference_for
    k = int(processes or suite.processes or levels.PROCESSES)
    if k < 1:
        raise UsageError(f"invalid processes {k}: must be >= 1")
    for f in suite.figures:
        r = results.get(f.name)
        if r is None or r.error or not r.samples or r.metric != "time" or f.kind == "model" \
                or len(r.ref) != len(r.samples):
            continue
        first = levels.level_of(r.costs(), r.ref, r.params)
        if first is None or k < levels.MIN_LEVELS:
            continue
        got = [first]
        hints = {f.name: r.params.get("inner")} if isinstance(r.params.get("inner"), int) \
            else {}
        ref = reference_for(suite, f)
        if isinstance(results.get(ref.name) and results[ref.name].params.get("inner"), int):
            hints[ref.name] = results[ref.name].params["inner"]
        watch = clock.Stopwatch()
        for i in range(k - 1):
            if progress:
                progress(i, k - 1, f"{f.name} in fresh process {i + 2}/{k}")
            for _ in range(FRESH_TRIES):
                lv, res = record_level(suite, f, ref, inner_hints=hints)
                if lv is not None:
                    break
            if lv is None:
                raise UsageError(f"not recording a baseline: {f.name} failed in "
                                 f"{FRESH_TRIES} fresh processes in a row "
                                 f"({res.error or 'too few rounds'})")
            got.append(lv)
        r.params["levels"] = [x.to_json() for x in got]
        r.wall_s = (r.wall_s or 0.0) + watch.elapsed()


# A check against a baseline of levels whose own run kept fewer undisturbed
# rounds than a level needs (a loaded machine: the clean-clone CI of c407636
# failed test_check_levels this way under `pytest -n auto`, with the gate's
# "undecidable", while the run before passed) is measured again in fresh
# processes, up to FRESH_TRIES, as a recording's fresh process is.
TOO_FEW_ROUNDS = "this run kept too few undisturbed rounds for a level (a loaded machine)"


def retry_too_few_rounds(suite: Suite, outcomes: List[FigureOutcome], base: bl.Baseline, *,
                         mode: str, relative: bool, progress=None) -> List[FigureOutcome]:
    """Each outcome left undecidable by TOO_FEW_ROUNDS, decided by a level
    taken in fresh processes (remeasure.py), at most FRESH_TRIES of them."""
    from hwtune.check.remeasure import can_remeasure, remeasure
    from hwtune.check.suite import reference_for
    figs = {f.name: f for f in suite.figures}
    out = []
    for o in outcomes:
        fig = figs.get(o.name)
        if o.status != "undecidable" or o.reason != TOO_FEW_ROUNDS or fig is None or \
                not can_remeasure(fig, o.baseline):
            out.append(o)
            continue
        for i in range(FRESH_TRIES):
            if progress:
                progress(i, FRESH_TRIES, f"{o.name} again, in fresh processes")
            d, again = remeasure(suite, fig, reference_for(suite, fig), o.baseline,
                                 relative=relative, inner_hints=base.inner_hints())
            if d is None:
                break
            d = level_decision(suite, again, o.baseline, relative)
            if d is None:
                continue
            status, reason = _mode_rule(suite, mode, d.status, d.ratio, d.reason)
            o = replace(o, status=status, verdict=_verdict(d), current=again,
                        reason=f"{TOO_FEW_ROUNDS}; in fresh processes: {reason}")
            break
        out.append(o)
    return out


def confirm_regressions(suite: Suite, outcomes: List[FigureOutcome], base: bl.Baseline, *,
                        mode: str, relative: bool, progress=None) -> List[FigureOutcome]:
    """Each time figure that would fail the build as a regression, measured
    again in fresh processes against the same baseline (remeasure.py): it
    stays a regression only when that measurement says so too."""
    from hwtune.check.remeasure import can_remeasure, remeasure
    from hwtune.check.suite import reference_for
    figs = {f.name: f for f in suite.figures}
    out = []
    for o in outcomes:
        fig = figs.get(o.name)
        # Against a baseline of several processes, a figure that is slower
        # by min_effect but not significantly so (a pass) is measured again
        # too: the two runs together may show it.
        suspect = o.status == "regression" or (
            o.verdict is not None and o.verdict.ratio is not None
            and o.baseline is not None and "levels" in o.baseline.params
            and o.verdict.ratio - 1 >= suite.thresholds.min_effect)
        if not suspect or fig is None or o.current is None or \
                not can_remeasure(fig, o.baseline):
            out.append(o)
            continue
        if progress:
            progress(0, 1, f"{o.name} again, in fresh processes")
        d, again = remeasure(suite, fig, reference_for(suite, fig), o.baseline,
                             relative=relative, inner_hints=base.inner_hints())
        first = o.reason
        o.current.wall_s = (o.current.wall_s or 0.0) + (again.wall_s or 0.0)
        if d is None:
            o.reason = f"{first}; not re-measured ({again.error})"
            out.append(o)
            continue
        d = level_decision(suite, o.current, o.baseline, relative, again) or d
        if isinstance(d, str):  # levels, but the re-measure gave too few rounds
            o.reason = f"{first}; not re-measured (too few undisturbed rounds)"
            out.append(o)
            continue
        o.current.params["remeasure"] = {
            "status": d.status, "ratio": d.ratio if d.ratio == d.ratio else None,
            "ci": list(d.ci) if d.ci[0] == d.ci[0] else None, "reason": d.reason,
            "samples": again.samples, "ref": again.ref, "wall_s": again.wall_s}
        status, reason = _mode_rule(suite, mode, d.status, d.ratio, d.reason)
        if status == "regression":
            o = replace(o, status=status, verdict=_verdict(d),
                        reason=f"{first}; again in fresh processes: {reason}")
        elif status in ("pass", "improvement") and o.status == "pass":
            o = replace(o, verdict=_verdict(d),
                        reason=f"{first}; with a second run in fresh processes: {reason}")
        elif status in ("pass", "improvement"):
            o = replace(o, status="pass", verdict=_verdict(d),
                        reason=f"not confirmed: {first} in this process, but {reason} "
                               "measured again in fresh processes")
        else:
            o = replace(o, status=status, verdict=_verdict(d),
                        reason=f"{first} in this process; in fresh processes: {reason}")
        out.append(o)
    return out


def decide_paired(suite: Suite, f, cur: Optional[FigureResult], old: Optional[FigureResult],
                  *, mode: str) -> FigureOutcome:
    """A figure measured in both builds (old: the --against build)."""
    if old is not None and old.error and (cur is None or not cur.error):
        return FigureOutcome(f.name, f.kind, f.unit, "error", f"the other build: {old.error}",
                             cur, old)
    if cur is not None and cur.metric == "time" and not cur.error and cur.samples:
        d = cur.decision
        status, reason = _mode_rule(suite, mode, d.status, d.ratio, d.reason)
        return FigureOutcome(f.name, f.kind, f.unit, status, reason, cur, old, _verdict(d))
    return decide_one(suite, f, cur, old, mode=mode)


def _counts_across_hosts(report: CheckReport, suite: Suite, results: Dict[str, FigureResult],
                        entries: Dict[str, bl.Baseline], host_key: str) -> None:
    """On a host the baseline file has no entry for: compare each counted
    figure with another host's count of the same figure by the same counter,
    kernel ISA and counter version. Under valgrind the counts do not depend
    on the host: the kernel ISA is fixed (at most AVX2), the simulated
    caches are fixed (counted.CACHES), and valgrind answers CPUID with its
    own CPU model, so the kernels' cache-derived blocking sees the same
    sizes everywhere (measured: glibc reads a 256 KiB L2 under valgrind on
    this AMD EPYC, whose L2 is 512 KiB). So these gate on any machine."""
    def same(a: FigureResult, b: FigureResult) -> bool:
        keys = ("counter", "isa", "counter_version")
        return a.metric == b.metric and a.kind == b.kind and \
            all(a.params.get(k) == b.params.get(k) for k in keys)

    others = sorted((b for k, b in entries.items() if k != host_key),
                    key=lambda b: b.created_at, reverse=True)
    outs = []
    for i, f in enumerate(suite.figures):
        cur = results.get(f.name)
        if cur is None or cur.metric == "time" or cur.error or not cur.samples:
            outs.append(report.outcomes[i])
            continue
        old, src = next(((b.figures[f.name], b) for b in others
                         if f.name in b.figures and b.figures[f.name].samples
                         and same(cur, b.figures[f.name])), (None, None))
        if old is None:
            outs.append(report.outcomes[i])
            continue
        o = decide_one(suite, f, cur, old, mode=report.mode)
        o.reason = f"{o.reason} (vs host {src.host_key})"
        outs.append(o)
    report.outcomes = outs
    if any(o.status == "regression" for o in outs):
        report.status = "regression"


def _record(report: CheckReport, suite: Suite, results, db, fp, host_key, baseline_file,
            isa: str = ""):
    failed = [r.name for r in results.values() if r.error]
    if failed:
        raise UsageError(f"not recording a baseline: figure{'s' if len(failed) > 1 else ''}"
                         f" {', '.join(failed)} failed ({results[failed[0]].error})")
    new = bl.Baseline(host_key=host_key, suite=suite.name, figures=results,
                      host=bl.host_summary(fp), isa=isa, suite_doc=suite.to_json(),
                      source=baseline_file or str(db.path))
    if baseline_file is not None:
        bl.write_file(new, baseline_file)
        report.recorded_to.append(baseline_file)
    else:
        bid = bl.save_db(db, new, report.run_id)
        report.recorded_to.append(f"{db.path} (baseline {bid})")
    report.status = "recorded"
    report.outcomes = []
    for f in suite.figures:
        r = results[f.name]
        how = (f"{r.params.get('rounds')} rounds ({len(r.samples)} samples, "
               f"{r.params.get('discarded', 0)} discarded)" if r.metric == "time" else
               f"{r.metric} {r.samples[0]:,.0f} per call ({r.params.get('counter')})")
        report.outcomes.append(FigureOutcome(f.name, f.kind, r.unit, "recorded",
                                             f"recorded: {how}", r, None))


def with_figures(suite: Suite, names: Optional[List[str]]) -> Suite:
    return suite.select(names) if names else suite


def with_metric(suite: Suite, metric: Optional[str]) -> Suite:
    """--metric: every figure that can be measured that way (the others
    keep theirs: a model figure can only be timed)."""
    if metric is None:
        return suite
    figs = [replace(f, metric=metric if (metric == "time" or f.kind in COUNTABLE) else "time")
            for f in suite.figures]
    return replace(suite, figures=figs, metric="time")


def with_max_seconds(suite: Suite, seconds: Optional[float]) -> Suite:
    if seconds is None:
        return suite
    if not 0 < seconds <= 3600:
        raise UsageError(f"invalid --max-seconds {seconds}: must be in (0, 3600]")
    return replace(suite, max_seconds=float(seconds))
