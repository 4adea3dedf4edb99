"""Check reports as text: the terminal summary, JUnit XML (one test case per
figure), an append-friendly Markdown section, JSON."""

from __future__ import annotations

import json
import math
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

from hwtune.check.gate import CheckReport, FigureOutcome
from hwtune.errors import UsageError

ICON = {"pass": "ok", "improvement": "faster", "regression": "REGRESSION", "warn": "slower",
        "undecidable": "undecidable", "new": "new", "error": "ERROR", "recorded": "recorded"}
HEADLINE = {"pass": "PASS", "regression": "REGRESSION", "undecidable": "UNDECIDABLE",
            "error": "ERROR", "recorded": "BASELINE RECORDED"}


def fmt_value(v: Optional[float], unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        for scale, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if v >= scale * 0.9995:  # 999.7 us rounds to 3 digits as 1 ms, not 1e+03 us
                return f"{v / scale:.3g} {u}"
        return f"{v * 1e9:.3g} ns"
    return f"{v:.3g} {unit}"


def _change(o: FigureOutcome) -> str:
    v = o.verdict
    return "-" if v is None or v.ratio is None else f"{v.ratio - 1:+.1%}"


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1%}"


def _pct0(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.0%}" if x < 100 else ">9999%")


def _p(o: FigureOutcome) -> str:
    if o.verdict is None or o.verdict.p is None:
        return "-"
    p = o.verdict.p
    return f"{p:.0e}" if p < 1e-3 else f"{p:.2g}"


def headline(r: CheckReport) -> str:
    c = r.counts()
    parts = [f"{n} {s}" for s, n in sorted(c.items())]
    mode = f"{r.mode}{', relative' if r.relative else ''}"
    return (f"hwtune check: {HEADLINE[r.status]} - suite {r.suite.name} ({mode}), "
            f"{', '.join(parts) or 'no figures'}, {r.elapsed_s:.0f} s")


def render_terminal(r: CheckReport, console) -> None:
    """One screen: a line per figure, then the verdict and what to do."""
    from rich.table import Table
    th = r.suite.thresholds
    # No box, one space between columns: seven columns fit in 80.
    t = Table(title=headline(r), title_justify="left", box=None, padding=(0, 1, 0, 0),
              header_style="bold")
    t.add_column("figure", overflow="ellipsis", no_wrap=True, max_width=20)
    t.add_column("baseline", justify="right", no_wrap=True)
    t.add_column("current", justify="right", no_wrap=True)
    # Relative mode compares ratios to the reference kernel, not the medians
    # shown beside it.
    t.add_column("rel chg" if r.relative else "change", justify="right", no_wrap=True)
    t.add_column("p", justify="right", no_wrap=True)
    t.add_column("noise", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True, min_width=11)
    for o in r.outcomes:
        style = {"regression": "bold red", "error": "bold red", "undecidable": "yellow",
                 "warn": "yellow", "new": "yellow", "improvement": "green"}.get(o.status)
        t.add_row(o.name, fmt_value(_med(o.baseline), o.unit),
                  fmt_value(_med(o.current), o.unit), _change(o), _p(o),
                  _pct0(o.verdict.noise if o.verdict else None), ICON[o.status], style=style)
    console.print(t)
    console.print(f"thresholds: alpha {th.alpha:g} (one-sided Mann-Whitney U), min effect "
                  f"{th.min_effect:.0%}" + (f", fail at {r.suite.large_effect:.0%} "
                                            "(record-or-report)"
                                            if r.mode == "record-or-report" else "")
                  + (f"; host noise floor {r.noise_floor:.1%}" if r.noise_floor is not None
                     else ""), highlight=False)
    if r.baseline_info:
        b = r.baseline_info
        console.print(f"baseline:   {b['source']} ({b['created_at']}, hwtune "
                      f"{b['hwtune_version']})", highlight=False)
    for dest in r.recorded_to:
        console.print(f"recorded:   {dest}", highlight=False)
    for o in r.outcomes:
        if o.status in ("regression", "error", "undecidable", "new", "warn"):
            console.print(f"  {o.name}: {o.reason}", highlight=False, markup=False)
    for n in r.notices:
        console.print(f"note: {n}", highlight=False, markup=False)
    if r.status == "undecidable":
        console.print("the machine was too noisy (or figures lack a baseline) to decide: rerun "
                      "on a quieter machine, raise suite.samples, or use --relative",
                      highlight=False)


def _med(f) -> Optional[float]:
    from hwtune.scan.stats import median
    return median(f.samples) if f is not None and f.samples else None


# -- JUnit -------------------------------------------------------------------
def junit_xml(r: CheckReport) -> str:
    """JUnit XML in the Jenkins xUnit junit-10.xsd dialect: a regression is a
    <failure>; an error, and in gate mode an undecidable figure, an <error>
    (both fail the gate); record-or-report's undecidable figures <skipped>."""
    cases: List[ET.Element] = []
    failures = errors = skipped = 0
    for o in r.outcomes:
        tc = ET.Element("testcase", name=o.name, classname=f"hwtune.check.{r.suite.name}",
                        time=_time(o))
        if o.status == "regression":
            failures += 1
            ET.SubElement(tc, "failure", type="regression", message=o.reason).text = \
                _details(o)
        elif o.status == "error" or (o.status in ("undecidable", "new") and r.mode == "gate"):
            errors += 1
            ET.SubElement(tc, "error", type=o.status, message=o.reason).text = _details(o)
        elif o.status in ("undecidable", "new"):
            skipped += 1
            ET.SubElement(tc, "skipped", type=o.status, message=o.reason)
        ET.SubElement(tc, "system-out").text = _details(o)
        cases.append(tc)
    total_time = f"{r.elapsed_s:.3f}"
    root = ET.Element("testsuites", name="hwtune check", tests=str(len(cases)),
                      failures=str(failures), errors=str(errors), time=total_time)
    ts = ET.SubElement(root, "testsuite", name=f"hwtune check {r.suite.name}",
                       tests=str(len(cases)), failures=str(failures), errors=str(errors),
                       skipped=str(skipped), time=total_time,
                       timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
                       hostname=socket.gethostname())
    props = ET.SubElement(ts, "properties")
    th = r.suite.thresholds
    for k, v in (("host_key", r.host_key), ("mode", r.mode), ("relative", str(r.relative)),
                 ("status", r.status), ("alpha", f"{th.alpha:g}"),
                 ("min_effect", f"{th.min_effect:g}"),
                 ("noise_floor", "" if r.noise_floor is None else f"{r.noise_floor:.4f}"),
                 ("baseline", (r.baseline_info or {}).get("source", ""))):
        ET.SubElement(props, "property", name=k, value=str(v))
    ts.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _time(o: FigureOutcome) -> str:
    # Time spent measuring the figure's samples (time figures only).
    f = o.current
    if f is None or f.higher_is_better or not f.samples:
        return "0.000"
    inner = f.params.get("inner") or f.params.get("iterations_per_sample") or 1
    return f"{sum(f.samples) * inner:.3f}"


def _details(o: FigureOutcome) -> str:
    v = o.verdict
    lines = [f"{o.name} ({o.kind}): {o.status}: {o.reason}",
             f"baseline median {fmt_value(_med(o.baseline), o.unit)} "
             f"(n={len(o.baseline.samples) if o.baseline else 0}), current median "
             f"{fmt_value(_med(o.current), o.unit)} "
             f"(n={len(o.current.samples) if o.current else 0})"]
    if v is not None and v.ratio is not None:
        lines.append(f"cost ratio {v.ratio:.4f}, CI {v.ci[0]:.4f}-{v.ci[1]:.4f}, "
                     f"p={v.p:.3g}, noise floor {v.noise:.2%}")
    return "\n".join(lines)


# -- Markdown ----------------------------------------------------------------
def markdown(r: CheckReport) -> str:
    """A self-contained section (heading, table, notes) that can be appended
    to a CI job summary after other sections."""
    th = r.suite.thresholds
    out = [f"### {headline(r)}", ""]
    out.append(f"Host `{r.host_key[:12]}`, mode `{r.mode}`"
               + (", relative to the reference kernel" if r.relative else "")
               + f"; alpha {th.alpha:g}, min effect {th.min_effect:.0%}"
               + (f", host noise floor {r.noise_floor:.1%}" if r.noise_floor is not None
                  else "") + ".")
    if r.baseline_info:
        out.append(f"Baseline: `{r.baseline_info['source']}` "
                   f"({r.baseline_info['created_at']}).")
    change = "change vs reference" if r.relative else "change"
    out += ["", f"| figure | baseline | current | {change} | 95% CI of ratio | p | noise | "
            "verdict |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    for o in r.outcomes:
        v = o.verdict
        ci = "-" if v is None or v.ci is None else f"{v.ci[0]:.3f}-{v.ci[1]:.3f}"
        verdict = ICON[o.status]
        if o.status in ("regression", "error"):
            verdict = f"**{verdict}**"
        out.append(f"| `{_md(o.name)}` | {fmt_value(_med(o.baseline), o.unit)} | "
                   f"{fmt_value(_med(o.current), o.unit)} | {_change(o)} | {ci} | {_p(o)} | "
                   f"{_pct(v.noise if v else None)} | {verdict} |")
    notes = [f"- `{_md(o.name)}`: {_md(o.reason)}" for o in r.outcomes
             if o.status in ("regression", "error", "undecidable", "new", "warn")]
    notes += [f"- {_md(n)}" for n in r.notices]
    notes += [f"- recorded to `{d}`" for d in r.recorded_to]
    if notes:
        out += [""] + notes
    return "\n".join(out) + "\n\n"


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_text(path, text: str, append: bool = False) -> None:
    p = Path(path)
    if not p.parent.is_dir():
        raise UsageError(f"cannot write {p}: directory {p.parent} does not exist")
    try:
        with open(p, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {p}: {exc}") from None


def _finite(x):
    """JSON has no inf/NaN: an unmeasurable ratio is null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def to_json_text(r: CheckReport) -> str:
    return json.dumps(_finite(r.to_json(samples=True)), indent=2, allow_nan=False, default=str)
