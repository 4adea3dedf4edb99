"""`hwtune check --compare A.json B.json`: two results of `hwtune check
--json`, decided by the gate's own rules with nothing measured.

A is the baseline, B the current run; each figure's raw samples are in
both files (`--json` keeps them). A time figure is decided by the
sequential test at a single, final look: its per-round values (the log of
each round's figure median, or of its ratio to the reference kernel beside
it with --relative) in A and B go through the same Yuen-Welch interval the
gate uses against a stored baseline, with the whole alpha spent at once
(there is only one look). Counted figures compare their counts against
count_threshold. Statuses, the overall verdict and the exit codes are the
gate's (0 pass, 1 regression, 2 error, 3 undecidable), and the report goes
through the same exporters (terminal, --json, --junit, --markdown).

Absolute times are compared only when both files come from the same host,
as the gate compares a baseline: otherwise --relative.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hwtune.check.baseline import HostMismatch
from hwtune.check.gate import EXIT, MODES, CheckReport, FigureOutcome, decide_one, overall
from hwtune.check.measure import FigureResult
from hwtune.check.sequential import SequentialTest
from hwtune.check.stats import Thresholds
from hwtune.check.suite import Suite
from hwtune.check.timed import baseline_values
from hwtune.errors import UsageError


def read_result(path) -> Dict[str, Any]:
    """The document of one `hwtune check --json` result; UsageError naming
    the file and what is wrong with it."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--compare: {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--compare: cannot read {p}: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"--compare: {p} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("figures"), list) or \
            "host_key" not in doc:
        raise UsageError(f"--compare: {p} is not an `hwtune check --json` result (no "
                         "\"figures\" list): write one with hwtune check --json > FILE")
    return doc


def _figures(doc: Dict[str, Any], path) -> Dict[str, FigureResult]:
    """name -> the run's own measurement of each figure (its raw samples)."""
    out: Dict[str, FigureResult] = {}
    for f in doc["figures"]:
        cur = f.get("current") if isinstance(f, dict) else None
        if cur is None:
            if isinstance(f, dict) and f.get("status") == "error":
                continue  # not measured: reported as missing from this side
            raise UsageError(f"--compare: {path} has no raw samples for figure "
                             f"{f.get('name') if isinstance(f, dict) else f!r}: write it with "
                             "hwtune check --json (which keeps them)")
        try:
            r = FigureResult.from_json(cur)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"--compare: {path}: malformed figure "
                             f"({type(exc).__name__}: {exc})") from None
        out[r.name] = r
    return out


def _suite(doc: Dict[str, Any]) -> Suite:
    """The thresholds the comparison decides by: the current run's (B)."""
    th = doc.get("thresholds") or {}
    base = Thresholds()
    try:
        thresholds = Thresholds(alpha=float(th.get("alpha", base.alpha)),
                                min_effect=float(th.get("min_effect", base.min_effect)),
                                level=float(th.get("level", base.level))).validate()
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--compare: bad thresholds in the current result: {exc}") from None
    suite = Suite(name=str(doc.get("suite") or "?"), path=doc.get("suite_path"), figures=[],
                  references=[], thresholds=thresholds)
    if th.get("large_effect") is not None:
        suite = replace(suite, large_effect=float(th["large_effect"]))
    if th.get("count_threshold") is not None:
        suite = replace(suite, count_threshold=float(th["count_threshold"]))
    return suite


def _values(f: FigureResult, relative: bool) -> Optional[List[float]]:
    """The per-round values as the gate reads a stored baseline (1/rate
    for a throughput probe)."""
    if relative and len(f.ref) != len(f.samples):
        return None
    return baseline_values(f.costs(), f.ref, f.params, absolute=not relative)


def decide_time(suite: Suite, cur: FigureResult, old: FigureResult, relative: bool):
    """The sequential test's verdict at one final look (all of alpha)."""
    a, b = _values(old, relative), _values(cur, relative)
    if a is None or b is None:
        return None
    n = max(1, len(b))
    test = SequentialTest(alpha=suite.thresholds.alpha, min_effect=suite.thresholds.min_effect,
                          min_rounds=n, max_rounds=n)
    return test.look(b, a, n, 1.0)


def _outcome(suite: Suite, name: str, cur: Optional[FigureResult], old: Optional[FigureResult],
             names: Sequence[str], mode: str, relative: bool) -> FigureOutcome:
    a_name, b_name = names
    if cur is None or cur.error or not cur.samples:
        kind, unit = (old.kind, old.unit) if old is not None else ("?", "s")
        why = (f"{b_name}: {cur.error}" if cur is not None and cur.error else
               f"not measured in {b_name}")
        return FigureOutcome(name, kind, unit, "error", why, cur, old)
    if old is None or old.error or not old.samples:
        why = (f"{a_name}: {old.error}" if old is not None and old.error else
               f"not in {a_name}")
        return FigureOutcome(name, cur.kind, cur.unit, "new", why, cur, None)
    if _same_measurement(cur, old):
        # One measurement on both sides (`--compare a.json a.json`): no
        # change by construction. A two-sample interval of a run against
        # itself is as wide as its own rounds are noisy (5 rounds of a 1.5 us
        # GEMM under load: 0.007-136x), which is no reason to call it
        # undecidable.
        from hwtune.check.stats import Verdict
        why = f"A and B hold the same {len(cur.samples)} samples: the same measurement"
        return FigureOutcome(name, cur.kind, cur.unit, "pass", why, cur, old,
                             Verdict("pass", 1.0, (1.0, 1.0), None, None, why))
    if cur.metric == "time" and old.metric == "time":
        cur = replace(cur)
        cur.decision = decide_time(suite, cur, old, relative)
        if cur.decision is None:
            return FigureOutcome(name, cur.kind, cur.unit, "error",
                                 "--relative needs the reference kernel's times beside every "
                                 "sample, and one of the files lacks them", cur, old)
    from hwtune.check.levels import has_levels
    # A recorded over several processes: B's level against their spread.
    return decide_one(suite, cur, cur, old, mode=mode,
                      relative=bool(relative) if has_levels(old) else None)


def _same_measurement(cur: FigureResult, old: FigureResult) -> bool:
    return (cur.kind == old.kind and cur.metric == old.metric and cur.samples == old.samples
            and cur.ref == old.ref and cur.unit == old.unit)


def compare_files(a_path, b_path, *, mode: str = "gate", relative: Optional[bool] = None,
                  undecidable_ok: bool = False,
                  figures: Optional[Sequence[str]] = None) -> CheckReport:
    """A (baseline) vs B (current), both `hwtune check --json` results.
    Raises UsageError (unreadable file, unknown figure, bad mode) and
    HostMismatch (absolute times of two hosts)."""
    if mode not in MODES:
        raise UsageError(f"invalid --mode {mode!r}: choose one of {', '.join(MODES)}")
    a_doc, b_doc = read_result(a_path), read_result(b_path)
    olds, curs = _figures(a_doc, a_path), _figures(b_doc, b_path)
    suite = _suite(b_doc)
    relative = bool(b_doc.get("relative")) if relative is None else bool(relative)
    a_host, b_host = str(a_doc["host_key"]), str(b_doc["host_key"])
    notices = [f"compared {os.fspath(a_path)} (A, baseline) with {os.fspath(b_path)} "
               "(B, current): nothing measured"]
    if a_host != b_host:
        if not relative:
            raise HostMismatch(f"{a_path} was measured on host {a_host}, {b_path} on host "
                               f"{b_host}: refusing to compare absolute times across "
                               "machines; compare with --relative")
        notices.append(f"A is from host {a_host}, B from host {b_host}: comparing relative "
                       "to the reference kernel only")
    if a_doc.get("suite") != b_doc.get("suite"):
        notices.append(f"A ran suite {a_doc.get('suite')!r}, B suite {b_doc.get('suite')!r}: "
                       "figures are matched by name, decided by B's thresholds")
    names = list(dict.fromkeys(list(curs) + list(olds)))
    if figures:
        unknown = [n for n in figures if n not in names]
        if unknown:
            raise UsageError(f"unknown figure {unknown[0]!r} in {a_path} and {b_path}: choose "
                             f"from {', '.join(sorted(names))}")
        names = [n for n in names if n in figures]
    labels = (Path(a_path).name, Path(b_path).name)
    outcomes = [_outcome(suite, n, curs.get(n), olds.get(n), labels, mode, relative)
                for n in names]
    status = overall(outcomes, mode)
    for o in outcomes:
        if o.status == "improvement":
            notices.append(f"{o.name} improved: {o.reason}")
    return CheckReport(
        suite=suite, mode=mode, relative=relative, host_key=b_host, status=status,
        exit_code=0 if status == "undecidable" and undecidable_ok else EXIT[status],
        outcomes=outcomes, notices=notices, undecidable_ok=undecidable_ok,
        baseline_info={"source": os.fspath(a_path), "host_key": a_host,
                       "created_at": a_doc.get("created_at") or "?",
                       "hwtune_version": a_doc.get("hwtune_version") or "?"})
