"""hwtune report on a fixture results.db: the document, every format, and
the one-line errors."""

import json
import re

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.db import ResultsDB
from hwtune.errors import UsageError
from hwtune.report import build_report
from hwtune.report.export import render
from hwtune.report.text_charts import gantt_lines

from test_report_fixture import BLAS, CONV_TRIALS, GEMM, OP_COST, STORAGE, TUNED_TRIALS
from test_report_fixture import fixture_db  # noqa: F401 (a pytest fixture)


def hwtune(*args):
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def doc(fixture_db):
    path, hosts = fixture_db
    with ResultsDB.open(path) as db:
        return build_report(db, host=hosts["a"])


# -- the document ---------------------------------------------------------
def test_scan_section_has_scaling_saturation_and_the_corun_grid(doc):
    g = doc["scan"]["gemm"][0]
    assert [r["value"] for r in g["rows"]] == list(GEMM)
    assert [r["blas_value"] for r in g["rows"]] == list(BLAS)
    assert g["saturation"] == 3  # 250 -> 260 GFLOPS gains 4% < 10%
    mul = next(e for e in doc["scan"]["eltwise"] if e["op"] == "mul")
    assert mul["saturation"] == 2
    grid = doc["scan"]["corun"]["gemm"]["rows"]
    assert {(r["executors"], r["threads"], r["placement"]) for r in grid} == {
        (k, t, p) for k, t in ((1, 1), (1, 2), (2, 1), (1, 4), (2, 2), (4, 1))
        for p in ("pinned", "os")}


def test_model_section_latencies_config_and_top_ops(doc):
    (m,) = doc["models"]
    assert m["model"] == "tiny_cnn"
    assert m["default"]["median_s"] == 4.5e-3 and m["tuned"]["median_s"] == 3.0e-3
    assert m["speedup"] == pytest.approx(1.5)
    assert m["tuned"]["config"]["executors"] == 2
    assert list(m["stages"]) == ["sweep", "conv"]  # the order tune-graph runs them
    top = m["top_ops"]
    assert top["source"].startswith("profiled op costs")
    assert [o["op"] for o in top["ops"]] == sorted(OP_COST, key=lambda k: -OP_COST[k])
    assert top["ops"][0]["op_type"] == "conv2d"
    assert sum(o["share"] for o in top["ops"]) == pytest.approx(1.0, abs=1e-3)


def test_model_section_shows_the_runs_options_storage_without_password(doc):
    (m,) = doc["models"]
    assert m["options"] == {"search": "optuna", "reps": 5, "budget_s": 60.0,
                            "storage": STORAGE}
    for fmt in ("terminal", "markdown", "html"):
        text = " ".join(render("report", doc, fmt).split())
        assert f"storage {STORAGE}" in text and "budget 60 s" in text, fmt


def test_convergence_is_best_so_far_over_trials_in_order(doc):
    conv = {s["tuner"]: s for s in doc["models"][0]["convergence"]}
    sweep = conv["executor_sweep"]
    assert sweep["label"] == "executor_sweep: graph"
    assert [p["status"] for p in sweep["points"]].count("error") == 1 == sweep["failed"]
    best, expect = None, []
    for s in TUNED_TRIALS:  # a failed trial keeps the best so far
        best = s if best is None else (min(best, s) if s else best)
        expect.append(best)
    assert [p["best_s"] for p in sweep["points"]] == expect
    assert conv["conv_template"]["best_s"] == min(CONV_TRIALS)
    assert conv["conv_template"]["label"].startswith("conv_template: conv2d [1,16,32,32]")


def test_timeline_is_the_profiled_run_from_zero(doc):
    tl = doc["models"][0]["timeline"]
    assert tl["kind"] == "run" and tl["executors"] == [0, 1]
    assert min(e["start_s"] for e in tl["events"]) == 0.0
    assert tl["makespan_s"] == pytest.approx(2.05e-3)
    lines = gantt_lines(tl, width=41)
    # 41 cells of 50 us: conv1 fills executor 0 up to 1.1 ms, relu1 follows.
    assert lines[0].startswith("exec 0  │" + "C" * 22 + "RR")
    assert lines[1].startswith("exec 1  │" + "C" * 18 + "·")


def test_history_follows_each_figure_across_versions_and_dates(doc):
    h = {s["key"]: s for s in doc["history"]}
    g = h["gemm:64x512x512:top"]
    assert [p["value"] for p in g["points"]] == [pytest.approx(GEMM[-1] * 0.8), GEMM[-1]]
    assert g["versions"] == ["0.0.9", "0.1.0"]
    assert [p["date"][:10] for p in g["points"]] == ["2026-10-01", "2026-11-20"]
    assert g["change"] == pytest.approx(1.25)
    assert len(h["model:tiny_cnn:tuned"]["points"]) == 1


def test_compare_two_hosts_gives_ratios_in_the_better_direction(fixture_db):
    path, hosts = fixture_db
    with ResultsDB.open(path) as db:
        c = build_report(db, host=hosts["a"], compare=[hosts["b"]])["compare"]
    rows = {r["key"]: r for r in c["rows"]}
    assert [s["host_key"] for s in c["sides"]] == [hosts["a"], hosts["b"]]
    assert rows["gemm:64x512x512:top"]["ratio"] == pytest.approx(1.25)
    tuned = rows["model:tiny_cnn:tuned"]  # 3 ms -> 2 ms: lower is better
    assert tuned["ratio"] == pytest.approx(2 / 3, abs=1e-4)
    assert tuned["gain"] == pytest.approx(1.5)


def test_compare_dates_uses_what_was_stored_by_then(fixture_db):
    path, hosts = fixture_db
    with ResultsDB.open(path) as db:
        one = build_report(db, host=hosts["a"], compare=["2026-10-01"])["compare"]
        two = build_report(db, host=hosts["a"], compare=["2026-10-15", "2026-11-20"])["compare"]
    for c in (one, two):
        rows = {r["key"]: r for r in c["rows"]}
        assert rows["gemm:64x512x512:1t"]["a"] == pytest.approx(GEMM[0] * 0.8)
        assert rows["gemm:64x512x512:1t"]["ratio"] == pytest.approx(1.25)
        # Not tuned yet on the earlier date: only B has the model.
        assert rows["model:tiny_cnn:tuned"]["a"] is None
        assert rows["model:tiny_cnn:tuned"]["ratio"] is None
    assert one["sides"][1]["label"] == "latest"


# -- formats --------------------------------------------------------------
def test_json_is_complete_and_parseable(fixture_db, doc):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), "--host", hosts["a"], "--format", "json",
                       "--compare", hosts["b"])
    assert code == 0, out
    got = json.loads(out)
    assert set(got) == {"report_version", "generated_at", "hwtune_version", "db", "host",
                        "scan", "models", "runs", "training", "checks", "compares", "dynamic",
                        "figures",
                        "history",
                        "compare", "plan_validation"}
    assert got["host"]["cpu_model"] == "Fixture Xeon A"
    assert got["models"][0]["timeline"]["events"] and got["compare"]["rows"]
    assert {k: v for k, v in got.items() if k not in ("generated_at", "compare")} == \
        {k: v for k, v in doc.items() if k not in ("generated_at", "compare")}


def _md_tables(text):
    tables, cur, fence = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if not fence and line.startswith("|"):
            cur.append(line)
        elif cur:
            tables.append(cur)
            cur = []
    return tables + ([cur] if cur else []), fence


def _cells(line):
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_markdown_tables_are_well_formed(fixture_db):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), "--host", hosts["a"], "--format",
                       "markdown", "--compare", "2026-10-01")
    assert code == 0, out
    tables, open_fence = _md_tables(out)
    assert not open_fence
    assert len(tables) >= 8
    for t in tables:
        n = len(_cells(t[0]))
        assert all(len(_cells(row)) == n for row in t), t
        assert all(re.fullmatch(r"\s*-{3,}:?\s*", c) for c in _cells(t[1])), t[1]
    for heading in ("## Machine", "## Scan", "## Model tiny_cnn", "### Convergence",
                    "### Top ops by time", "### Executor timeline", "## History", "## Compare"):
        assert heading in out
    assert "┊ saturates at 3" in out  # the GEMM chart marks its saturation point


def test_terminal_fits_80_columns_on_a_wide_terminal(fixture_db, monkeypatch):
    path, hosts = fixture_db
    monkeypatch.setenv("COLUMNS", "200")
    code, out = hwtune("report", "--db", str(path), "--host", hosts["a"], "--compare",
                       hosts["b"])
    assert code == 0, out
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert "…" not in out  # nothing cropped to fit
    for text in ("Fixture Xeon A", "saturates at 3", "Co-running gemm executors",
                 "Model tiny_cnn", "1.50x the default's speed", "Convergence", "Top ops by time",
                 "exec 1  │", "History of", "Compare: A ="):
        assert text in out, text
    # Text charts drawn whole: axis line, then tick labels, then the legend.
    axis = [i for i, ln in enumerate(lines) if "└────" in ln]
    assert len(axis) >= 3 and all("threads" in lines[i + 1] or "trial" in lines[i + 1]
                                  for i in axis)


def test_render_terminal_plain_text_for_a_file(doc):
    text = render("report", doc, "terminal")
    assert "\x1b[" not in text and max(len(ln) for ln in text.splitlines()) <= 80


def test_html_is_self_contained_with_nonempty_charts(tmp_path, fixture_db):
    path, hosts = fixture_db
    out = tmp_path / "r.html"
    code, msg = hwtune("report", "--db", str(path), "--host", hosts["a"], "--format", "html",
                       "-o", str(out), "--compare", hosts["b"])
    assert code == 0, msg
    html = out.read_text()
    # The one URL in the page is a tune run's --storage, shown as text.
    assert f"storage {STORAGE}" in html
    assert "://" not in html.replace(STORAGE, "") and "<script" not in html
    assert "src=" not in html
    assert re.findall(r"href=['\"]([^'\"]*)", html) and all(
        h.startswith("#") for h in re.findall(r"href=['\"]([^'\"]*)", html))
    charts = re.findall(r'<svg class="chart" data-chart="([^"]+)"(.*?)</svg>', html, re.S)
    names = [c[0] for c in charts]
    for want in ("gemm-64x512x512", "eltwise-mul", "corun-gemm", "candidates-tiny-cnn",
                 "convergence-tiny-cnn", "top-ops-tiny-cnn", "timeline-tiny-cnn",
                 "history-gemm-64x512x512-top", "compare-ratios"):
        assert want in names, want
    for name, body in charts:
        assert re.search(r"<(path|rect|circle) ", body), name
        assert "no data" not in body, name
    assert 'class="mark"' in dict(charts)["gemm-64x512x512"]


# -- errors ---------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (("--host", "nope"), "--host 'nope' is not a stored host: choose one of"),
    (("--host", "intel-fixture"), "--host 'intel-fixture' matches several hosts"),
    (("--compare", "2026-13-45"), "is not a valid date"),
    (("--compare", "2026-01-01"), "has no scan, tuning, run, check or compare stored on or before 2026-01-01"),
    (("--compare", "a", "--compare", "b", "--compare", "c"), "takes one or two values"),
    (("--compare", "intel-fixture-epyc", "--compare", "2026-11-20"),
     "two hosts or two dates, not one of each"),
    (("--compare", "intel-fixture-xeon"), "needs two different hosts or dates"),
    (("--compare", "nohost"), "--host 'nohost' is not a stored host"),
])
def test_errors_are_one_line_exit_2(fixture_db, args, message):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), *(("--host", hosts["a"])
                                                       if "--host" not in args else ()), *args)
    assert code == 2, out
    assert out.startswith("error: ") and message in out and out.count("\n") == 1, out


def test_compare_value_error_names_the_flag(fixture_db):
    path, hosts = fixture_db
    with ResultsDB.open(path) as db, pytest.raises(UsageError, match="not a stored host"):
        build_report(db, host=hosts["a"], compare=["nohost"])


def test_empty_or_missing_database_is_a_one_line_error(tmp_path):
    code, out = hwtune("report", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "no results database at" in out and out.count("\n") == 1
    assert not (tmp_path / "none.db").exists()  # a report never creates one
    ResultsDB.open(tmp_path / "empty.db").close()
    code, out = hwtune("report", "--db", str(tmp_path / "empty.db"))
    assert code == 2 and "holds no results yet: run 'hwtune scan' first" in out


def test_this_machine_without_results_names_the_stored_hosts(fixture_db):
    path, _ = fixture_db
    code, out = hwtune("report", "--db", str(path))
    assert code == 2 and "this machine" in out and "pick --host from" in out


def test_html_needs_an_output_file(fixture_db):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), "--format", "html")
    assert code == 2 and "-o FILE" in out


def test_a_search_with_one_result_is_a_sentence_not_a_chart(doc):
    import copy

    from hwtune.report.views import convergence_note, has_curve
    m = copy.deepcopy(doc["models"][0])
    assert has_curve(m)
    for s in m["convergence"]:
        del s["points"][1:]
        s["trials"], s["best_s"] = 1, s["points"][0]["best_s"]
    assert not has_curve(m)
    assert convergence_note(m).startswith("executor_sweep: graph: 1 trial, best 5.00 ms")
    text = render("report", dict(doc, models=[m]), "markdown")
    assert "executor_sweep: graph: 1 trial" in text and "best so far" in text


def test_unwritable_output_is_a_one_line_error(fixture_db, tmp_path):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), "--host", hosts["a"], "--format",
                       "markdown", "-o", str(tmp_path / "no" / "such" / "dir.md"))
    assert code == 2 and "cannot write" in out and "does not exist" in out and out.count("\n") == 1
