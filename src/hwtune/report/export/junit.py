"""The JUnit XML format (Jenkins xUnit junit-10.xsd dialect), for CI systems
that show test results: `hwtune check`, one test case per figure."""

import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import List

from hwtune.report import verdicts
from hwtune.report.export.base import Exporter


def check(r) -> str:
    """A regression is a <failure>; an error, and in gate mode an
    undecidable figure, an <error> (both fail the gate); record-or-report's
    undecidable figures <skipped>."""
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


def _time(o) -> str:
    """Seconds spent measuring the figure (JUnit's time is wall seconds; a
    dashboard adds them up): its measured wall time, for time, rate and
    counted figures alike. A result read from an older --json file has none:
    a time figure's samples still add up to its timed calls (seconds), a
    rate or a count says nothing about time (0)."""
    f = o.current
    if f is None:
        return "0.000"
    if f.wall_s is not None:
        return f"{f.wall_s:.3f}"
    if f.higher_is_better or not f.samples or f.metric != "time" or f.unit != "s":
        return "0.000"
    inner = f.params.get("inner") or f.params.get("iterations_per_sample") or 1
    return f"{sum(f.samples) * inner:.3f}"


def _details(o) -> str:
    v = o.verdict
    lines = [f"{o.name} ({o.kind}): {o.status}: {o.reason}",
             f"baseline median {verdicts.value(verdicts.med(o.baseline), o.unit)} "
             f"(n={len(o.baseline.samples) if o.baseline else 0}), current median "
             f"{verdicts.value(verdicts.med(o.current), o.unit)} "
             f"(n={len(o.current.samples) if o.current else 0})"]
    if v is not None and v.ratio is not None:
        lines.append(f"cost ratio {v.ratio:.4f}"
                     + (f", CI {v.ci[0]:.4f}-{v.ci[1]:.4f}" if v.ci else "")
                     + (f", p={v.p:.3g}" if v.p is not None else "")
                     + (f", noise floor {v.noise:.2%}" if v.noise is not None else ""))
    lines.append(f"decided by {verdicts.decided_by(o, long=True)}")
    return "\n".join(lines)


EXPORTER = Exporter("junit", {"check": check})
