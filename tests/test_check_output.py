"""Baselines (file and results.db round trips, host refusal) and the report
formats (JUnit against the Jenkins junit-10.xsd, Markdown, JSON, terminal)."""

import json
from pathlib import Path

import numpy as np
import pytest
import xmlschema  # test extra: validates --junit against the vendored XSD

from hwtune.check import baseline as bl
from hwtune.check.gate import CheckReport, decide, overall
from hwtune.check.measure import FigureResult
from hwtune.check.suite import parse_suite
from hwtune.check.sequential import Decision
from hwtune.db import ResultsDB
from hwtune.errors import UsageError
from hwtune.report.export import render
from hwtune.report.files import write_file

XSD = Path(__file__).resolve().parent / "data" / "junit-10.xsd"
SUITE = parse_suite({
    "suite": {"name": "t", "min_rounds": 5},
    "figure": [{"kind": "gemm", "M": 8, "K": 16, "N": 8, "name": "fast"},
               {"kind": "gemm", "M": 8, "K": 32, "N": 8, "name": "slowed"},
               {"kind": "eltwise", "op": "mul", "n": 4096, "name": "noisy"},
               {"kind": "fma_peak", "name": "peak"},
               {"kind": "eltwise", "op": "add", "n": 4096, "name": "added <&> later"},
               {"kind": "eltwise", "op": "sub", "n": 4096, "name": "broken"}],
})


def fig(name, samples, kind="gemm", rate=False, ref=None):
    return FigureResult(name, kind, {"threads": 1, "inner": 4}, "GFLOPS" if rate else "s",
                        rate, [float(x) for x in samples],
                        [float(r) for r in (ref if ref is not None else [1e-3] * len(samples))])


def make_results():
    rng = np.random.default_rng(0)
    base = {"fast": fig("fast", rng.normal(1e-3, 1e-6, 15)),
            "slowed": fig("slowed", rng.normal(1e-3, 1e-6, 15)),
            "noisy": fig("noisy", rng.lognormal(-7, 0.4, 15), "eltwise"),
            "peak": fig("peak", rng.normal(100, 0.1, 15), "fma_peak", rate=True),
            "broken": fig("broken", rng.normal(1e-3, 1e-6, 15), "eltwise")}
    cur = {"fast": fig("fast", rng.normal(1e-3, 1e-6, 15)),
           "slowed": fig("slowed", rng.normal(1.2e-3, 1e-6, 15)),
           "noisy": fig("noisy", rng.lognormal(-7, 0.4, 15), "eltwise"),
           "peak": fig("peak", rng.normal(85, 0.1, 15), "fma_peak", rate=True),
           "added <&> later": fig("added <&> later", rng.normal(1e-3, 1e-6, 15), "eltwise"),
           "broken": FigureResult("broken", "eltwise", {}, "s", False, error="HWT_EISA: refused")}
    return base, cur


# The sequential test's verdicts, as measure_suite leaves them on each time
# figure (the test itself: test_check_sequential.py).
DECISIONS = {
    "fast": Decision("pass", 1.0, (0.99, 1.01), 0.5, 15, 3, "+0.0%; any slowdown is below 5%"),
    "slowed": Decision("regression", 1.2, (1.15, 1.25), 1e-6, 15, 3, "+20.0% slower"),
    "noisy": Decision("undecidable", 1.05, (0.8, 1.3), 0.3, 15, 3, "CI still spans 5%"),
    "peak": Decision("regression", 1.18, (1.1, 1.25), 1e-5, 15, 3, "+18.0% slower"),
}


def make_report(mode="gate"):
    base, cur = make_results()
    for name, d in DECISIONS.items():
        cur[name].decision = d
        cur[name].params.update(rounds=5, chunk=3)
    b = bl.Baseline("hostA", "t", base, source="base.json")
    outs = decide(SUITE, cur, b, mode=mode)
    st = overall(outs, mode)
    return CheckReport(SUITE, mode, False, "hostA", st, {"regression": 1}.get(st, 2), outs,
                       baseline_info={"source": "base.json", "host_key": "hostA",
                                      "created_at": "2026-01-01", "hwtune_version": "0"},
                       noise_floor=0.01, run_id=1, elapsed_s=1.5)


def test_decide_statuses():
    r = make_report()
    by = {o.name: o.status for o in r.outcomes}
    assert by == {"fast": "pass", "slowed": "regression", "noisy": "undecidable",
                  "peak": "regression", "added <&> later": "new", "broken": "error"}
    assert r.status == "error"  # an error outranks the regression
    by_ror = {o.name: o.status for o in make_report("record-or-report").outcomes}
    assert by_ror["slowed"] == "warn" and by_ror["peak"] == "warn"  # < 25%: not failing


def test_overall_precedence():
    r = make_report()
    no_err = [o for o in r.outcomes if o.status != "error"]
    assert overall(no_err, "gate") == "regression"
    only_noisy = [o for o in no_err if o.status in ("pass", "undecidable")]
    assert overall(only_noisy, "gate") == "undecidable"
    assert overall(only_noisy, "record-or-report") == "pass"
    assert overall([o for o in no_err if o.status == "pass"], "gate") == "pass"


def test_junit_valid_against_schema(tmp_path):
    schema = xmlschema.XMLSchema(str(XSD))
    for mode in ("gate", "record-or-report"):
        text = render("check", make_report(mode), "junit")
        schema.validate(text)  # raises on any violation
        doc = schema.to_dict(text)
        suite = doc["testsuite"][0]
        assert len(suite["testcase"]) == len(SUITE.figures)
    root = schema.to_dict(render("check", make_report(), "junit"))["testsuite"][0]
    cases = {c["@name"]: c for c in root["testcase"]}
    assert "failure" in cases["slowed"] and "error" in cases["broken"]
    assert "error" in cases["noisy"]  # gate mode: undecidable fails the job
    assert "failure" not in cases["fast"] and "error" not in cases["fast"]
    assert root["@failures"] == "2" and root["@errors"] == "3"


def test_markdown_appends(tmp_path):
    r = make_report()
    md = render("check", r, "markdown")
    assert md.startswith("### hwtune check: ERROR")
    assert "| figure | baseline | current |" in md
    assert "| `slowed` |" in md and "**REGRESSION**" in md
    assert "added <&> later" in md
    out = tmp_path / "summary.md"
    write_file(out, "# job\n\n")
    write_file(out, md, append=True)
    write_file(out, md, append=True)
    text = out.read_text()
    assert text.startswith("# job") and text.count("### hwtune check") == 2
    with pytest.raises(UsageError, match="does not exist"):
        write_file(tmp_path / "no" / "x.md", md)


def test_json_and_terminal():
    r = make_report()
    doc = json.loads(render("check", r, "json"))
    assert doc["status"] == "error" and doc["exit_code"] == 2
    assert {f["name"] for f in doc["figures"]} == {f.name for f in SUITE.figures}
    slowed = next(f for f in doc["figures"] if f["name"] == "slowed")
    assert slowed["ratio"] == pytest.approx(1.2, abs=0.01)
    assert len(slowed["current"]["samples"]) == 15  # raw samples kept
    lines = render("check", r, "terminal").splitlines()
    assert max(len(x) for x in lines) <= 80
    assert sum("REGRESSION" in x for x in lines) >= 2


def test_baseline_file_round_trip(tmp_path):
    base, _ = make_results()
    b = bl.Baseline("hostA", "t", base, host={"cpu_model": "Xeon"})
    p = tmp_path / "perf-baseline.json"
    bl.write_file(b, p)
    got = bl.read_file(p)
    assert got.host_key == "hostA" and got.suite == "t"
    assert {n: f.samples for n, f in got.figures.items()} == \
        {n: f.samples for n, f in base.items()}
    assert got.figures["peak"].higher_is_better and got.inner_hints()["fast"] == 4
    assert list(tmp_path.iterdir()) == [p]  # no temp file left


def test_baseline_file_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist.*--update-baseline"):
        bl.read_file(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        bl.read_file(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(UsageError, match="not an hwtune check baseline"):
        bl.read_file(bad)
    bad.write_text(json.dumps({"format": bl.FILE_FORMAT, "version": 1, "host_key": "h",
                               "suite": "t", "figures": [{"name": "x"}]}))
    with pytest.raises(UsageError, match="malformed baseline"):
        bl.read_file(bad)
    bad.write_text(json.dumps({"format": bl.FILE_FORMAT, "version": 99}))
    with pytest.raises(UsageError, match="newer"):
        bl.read_file(bad)


def test_host_mismatch_refused_unless_relative():
    b = bl.Baseline("hostA", "t", {}, host={"cpu_model": "EPYC"}, source="b.json")
    assert bl.check_host(b, "hostA", relative=False) is None
    with pytest.raises(bl.HostMismatch, match="refusing.*--relative") as e:
        bl.check_host(b, "hostB", relative=False)
    assert e.value.exit_code == 2 and "EPYC" in str(e.value)
    assert "relative" in bl.check_host(b, "hostB", relative=True)


def test_baseline_db_round_trip(tmp_path):
    from hwtune.db.migrations import LATEST_VERSION
    base, _ = make_results()
    with ResultsDB.open(tmp_path / "results.db") as db:
        assert db.schema_version == LATEST_VERSION >= 5
        key = db.upsert_host({"cpu_model": "Xeon test", "vendor": "x", "logical_cpus": 2,
                              "physical_cores": 2, "sockets": 1, "isa_best": "avx512"})
        assert bl.load_db(db, key, "t") is None
        b1 = bl.Baseline(key, "t", base, suite_doc={"min_rounds": 5})
        bl.save_db(db, b1)
        base2 = dict(base, fast=fig("fast", [2e-3] * 15))
        bl.save_db(db, bl.Baseline(key, "t", base2))
        got = bl.load_db(db, key, "t")
        assert got.figures["fast"].samples == [2e-3] * 15  # the latest wins
        assert got.figures["slowed"].samples == base["slowed"].samples
        assert got.figures["slowed"].ref == base["slowed"].ref
        assert got.figures["peak"].higher_is_better
        assert got.host["cpu_model"] == "Xeon test"
        assert bl.load_db(db, key, "other") is None
        assert bl.any_db_baseline(db, "t") == key


def test_junit_time_is_wall_seconds_of_measuring():
    """JUnit's time attribute is the wall time spent measuring the figure
    (seconds), for time, rate and counted figures alike; never a count (a
    cycle count of 6588486 read as 76 days on a CI dashboard)."""
    import xml.etree.ElementTree as ET
    r = make_report()
    by = {o.name: o for o in r.outcomes}
    by["fast"].current.wall_s = 0.25
    by["peak"].current.wall_s = 0.5  # a rate: it took time to measure too
    counted = FigureResult("counted", "gemm", {"metric": "estimated-cycles", "calls": 4.0},
                           "count", False, [6588486.0], wall_s=1.75)
    legacy = FigureResult("legacy-count", "gemm", {"metric": "instructions"}, "count", False,
                          [6588486.0])  # from a --json file written before wall_s
    from hwtune.check.gate import FigureOutcome
    r.outcomes += [FigureOutcome("counted", "gemm", "count", "pass", "identical", counted, None),
                   FigureOutcome("legacy-count", "gemm", "count", "pass", "identical", legacy,
                                 None)]
    times = {tc.get("name"): float(tc.get("time"))
             for tc in ET.fromstring(render("check", r, "junit")).iter("testcase")}
    assert times["fast"] == 0.25 and times["peak"] == 0.5 and times["counted"] == 1.75
    assert times["legacy-count"] == 0.0
    assert times["broken"] == 0.0  # an error before any measuring: no time recorded
    # the wall time survives the --json round trip (check --compare reads it)
    assert FigureResult.from_json(counted.to_json()).wall_s == 1.75


def test_wide_console_keeps_whole_figure_names_and_markdown_the_whole_host_key():
    """Piped with COLUMNS=200 a figure name is not cut to 20 columns; at 80
    it is (seven columns must fit); the markdown names the host key whole
    (its hash is what tells two hosts of one CPU model apart)."""
    import io

    from rich.console import Console

    from hwtune.report.export.terminal import print_check
    r = make_report()
    long = "gemm-64x512x512-t1-with-a-long-tail"
    r.outcomes[0].name = long
    wide = Console(file=io.StringIO(), width=200, color_system=None)
    print_check(wide, r)
    assert long in wide.file.getvalue()
    narrow = Console(file=io.StringIO(), width=80, color_system=None)
    print_check(narrow, r)
    assert long not in narrow.file.getvalue().split("\n  ")[0]  # the table cuts it at 80
    r.host_key = "amd-epyc-2c-601ffda2b475"
    assert "`amd-epyc-2c-601ffda2b475`" in render("check", r, "markdown")


def test_a_regression_not_confirmed_in_fresh_processes_does_not_fail(monkeypatch):
    """The gate fails on a regression only when the re-measure in fresh
    processes says regression too (scripted here; real in test_check_cli)."""
    from hwtune.check import remeasure
    from hwtune.check.gate import confirm_regressions
    r = make_report()
    base, _ = make_results()
    b = bl.Baseline("hostA", "t", base, source="base.json")
    calls = []

    def scripted(verdict):
        def fake(suite, fig, ref, old, *, relative, inner_hints=None, python=None):
            calls.append(fig.name)
            again = FigureResult(fig.name, fig.kind, {}, "s", False, [1e-3] * 5, [1e-3] * 5,
                                 wall_s=0.5)
            return verdict, again
        return fake
    # slowed: +20% in this process; fresh processes measure +0.4%
    monkeypatch.setattr(remeasure, "remeasure", scripted(
        Decision("pass", 1.004, (0.99, 1.02), 0.4, 12, 2, "+0.4%; any slowdown is below 5%")))
    outs = confirm_regressions(SUITE, r.outcomes, b, mode="gate", relative=False)
    by = {o.name: o for o in outs}
    assert calls == ["slowed", "peak"]  # only the regressions, each once
    assert by["slowed"].status == "pass" and by["slowed"].reason.startswith("not confirmed: ")
    assert "fresh processes" in by["slowed"].reason and by["slowed"].current.wall_s >= 0.5
    assert overall(outs, "gate") == "error"  # 'broken' still errors; no regression left
    # confirmed: stays a regression, both measurements named
    r = make_report()
    monkeypatch.setattr(remeasure, "remeasure", scripted(
        Decision("regression", 1.19, (1.15, 1.23), 1e-6, 12, 2, "+19.0% slower")))
    by = {o.name: o for o in confirm_regressions(SUITE, r.outcomes, b, mode="gate",
                                                 relative=False)}
    assert by["slowed"].status == "regression"
    assert "+20.0% slower; again in fresh processes: +19.0% slower" in by["slowed"].reason
    # the re-measure cannot decide: undecidable (exit 3), never a regression (exit 1)
    r = make_report()
    monkeypatch.setattr(remeasure, "remeasure", scripted(
        Decision("undecidable", 1.1, (0.9, 1.4), 0.2, 40, 5, "CI still spans 5%")))
    by = {o.name: o for o in confirm_regressions(SUITE, r.outcomes, b, mode="gate",
                                                 relative=False)}
    assert by["slowed"].status == "undecidable"
