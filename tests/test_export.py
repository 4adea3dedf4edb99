"""The output layer's contract: every exporter renders every kind of
document it claims, the click layer's choices come from the registry, and
`hwtune report --json` is `--format json`."""

import io
import json

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.db import ResultsDB
from hwtune.engine.config import EngineConfig
from hwtune.errors import UsageError
from hwtune.report import build_report
from hwtune.report.export import EXPORTERS, exporter, formats, render, write
from hwtune.tuners.final import Candidate
from hwtune.tuners.pipeline import StageReport, TuneResult

from plan_fixture import plan_doc
from test_check_output import make_report
from test_report_fixture import fixture_db  # noqa: F401 (a pytest fixture)


def tune_doc():
    """tune-graph's document, from a real TuneResult (its to_json is the
    contract the exporters read)."""
    default = Candidate("default", EngineConfig(1, 2, "sequential"), None,
                        median_s=4.2e-2, mad_s=1e-3, samples=[4.2e-2] * 3)
    tuned = Candidate("tuned", EngineConfig(2, 1, "critical-path", op_threads={"a": 1},
                                            op_params={"c": {"oc_bn": 8}}), None,
                      median_s=3.0e-2, mad_s=2e-3, samples=[3.0e-2] * 3)
    sweep = Candidate("sweep", EngineConfig(2, 1, "critical-path"), None, median_s=3.3e-2)
    res = TuneResult(run_id=3, default=default, chosen=tuned, candidates=[default, sweep, tuned],
                     stages={"sweep": StageReport(1.0, 2, 2, 0)},
                     why=["sweep: 2 x 1 was fastest"], tuning_s=3.0, config_id=1)
    doc = {"model": "lstm-small", "graph_hash": "00c86f4442cb77", "ops": 1040, "db": "r.db"}
    doc.update(res.to_json())
    return doc


def compare_doc():
    """hwtune compare's result, a real CompareResult (the exporters read its
    fields; --json its to_json)."""
    from hwtune.compare.run import CompareResult, SideResult
    sides = [SideResult("hwtune", "hwtune", "C engine, 1 executor x 2 threads", [1e-3] * 3,
                        1e-3, 1e-5, 1.0),
             SideResult("ort", "ONNX Runtime", "onnxruntime 1.32.0, 2 intra-op threads",
                        [2e-3] * 3, 2e-3, 2e-5, 2.0, True, 3e-7, "y"),
             SideResult("torch", "PyTorch", "torch 2.13.0 eager", [3e-3] * 3, 3e-3, 3e-5, 3.0,
                        False, 2e-2, "y")]
    return CompareResult("tiny", "tiny.onnx", 3, "seeded", 2, 3, "AMD EPYC", "avx2",
                         [0.5, 0.4, 0.3], [0.6, 0.5, 0.4], sides)


def run_doc():
    """hwtune run's document (its --json): a sub-millisecond model, so the
    latencies read in µs."""
    samples = [2.6e-6, 2.5e-6, 2.7e-6, 2.6e-6, 9.0e-6]
    return {"model": "tiny", "graph_hash": "2dd124387035cad2", "ops": 6,
            "config": {"executors": 1, "threads": 2}, "config_text": "1 executor x 2 threads",
            "config_source": "default", "iterations": 5, "warmup": 3, "db": "r.db",
            "trace": None, "notice": None, "outputs_file": None, "knobs_text": None,
            "run_id": 4, "flops": 34000,
            "latency_s": {"median": 2.6e-6, "mad": 0.1e-6, "min": 2.5e-6, "max": 9e-6,
                          "rel_spread": 0.04, "samples": samples},
            "throughput": {"runs_per_s": 384615.4, "gflops": 13.1}, "noisy": False,
            "check": None}


@pytest.fixture(scope="module")
def documents(fixture_db, tmp_path_factory):
    from dynamic_docs import dynamic_documents
    path, hosts = fixture_db
    with ResultsDB.open(path) as db:
        report = build_report(db, host=hosts["a"], compare=[hosts["b"]])
    run, tune = dynamic_documents(tmp_path_factory.mktemp("dynamic"))
    return {"scan": report["scan"], "report": report, "check": make_report(),
            "tune": tune_doc(), "compare": compare_doc(), "run": run_doc(),
            "plan": plan_doc(), "dynamic": run, "dynamic-tune": tune}


def test_run_reads_small_latencies_in_microseconds(documents):
    """One unit rule everywhere (fmt.seconds): 2.6 µs, not 0.003 ms +- 0.000 ms;
    percentiles beside the median; markdown too (hwtune run --format markdown)."""
    text = render("run", documents["run"], "terminal")
    assert "median 2.6 µs +- 0.1 µs" in text and " ms" not in text
    assert "p50 2.6 µs, p90" in text and "p99 8.7 µs" in text
    md = render("run", documents["run"], "markdown")
    assert md.startswith("### hwtune run: tiny") and "| latency | median 2.6 µs" in md
    both = render("run", {"runs": [documents["run"], documents["run"]]}, "terminal")
    assert both.count("latency:") == 2


def test_every_kind_has_a_json_and_a_terminal_exporter():
    for kind in ("scan", "report", "check", "tune", "compare", "plan", "dynamic",
                 "dynamic-tune", "run"):
        assert {"json", "terminal"} <= set(formats(kind)), kind
    assert formats("report") == ("terminal", "markdown", "json", "html")
    assert formats("check") == ("terminal", "markdown", "json", "junit")


@pytest.mark.parametrize("fmt,kind", [(f, k) for f, e in EXPORTERS.items() for k in e.kinds])
def test_every_exporter_renders_every_kind_it_claims(documents, fmt, kind):
    text = render(kind, documents[kind], fmt)
    assert text.strip() and text.endswith("\n")
    assert "\x1b[" not in text  # a file never gets colour codes
    if fmt == "json":
        json.loads(text)
    # lines never wrapped (the one-line-per-fact summaries may be longer)
    if fmt == "terminal" and kind not in ("tune", "compare", "dynamic", "dynamic-tune", "run"):
        assert max(len(ln) for ln in text.splitlines()) <= 80
    out = io.StringIO()
    write(kind, documents[kind], fmt, out)  # what a command prints on a pipe
    assert out.getvalue().strip()


def test_unknown_or_unsupported_format_names_the_choices():
    with pytest.raises(UsageError, match="choose one of terminal, json"):
        exporter("html", "scan")
    with pytest.raises(UsageError, match="'yaml'"):
        exporter("yaml", "report")


def test_json_turns_non_finite_numbers_into_null(documents):
    scan = dict(documents["scan"], saturation_threshold=float("nan"))
    assert json.loads(render("scan", scan, "json"))["saturation_threshold"] is None


def test_tune_summary_on_a_terminal(documents):
    text = render("tune", documents["tune"], "terminal")
    lines = text.splitlines()
    assert lines[0] == "model:     lstm-small (1040 ops, graph 00c86f4442cb)"
    assert lines[1].startswith("default:   42.00 ms +- 1.00 ms (1 executor x 2 threads, "
                               "sequential")
    # one verdict: the stored config `hwtune run` uses, its own figure and its speedup
    assert lines[2].startswith("tuned:     30.00 ms +- 2.00 ms (2 executors x 1 thread, "
                               "critical-path, pinned; per-op threads for 1 op, CONV params "
                               "for 1 op); 1.40x the default's speed")
    assert lines[3] == "also measured (one process): sweep 33.00 ms"  # neither default nor tuned
    assert "  - sweep: 2 x 1 was fastest" in lines
    assert "stored:    tuned config 1, run 3 in r.db" in lines
    assert sum(ln.startswith("tuned:") for ln in lines) == 1


def hwtune(*args):
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_report_json_flag_is_format_json(fixture_db):
    path, hosts = fixture_db
    common = ("report", "--db", str(path), "--host", hosts["a"])
    code, flag = hwtune(*common, "--json")
    assert code == 0, flag
    code, option = hwtune(*common, "--format", "json")
    assert code == 0, option
    a, b = json.loads(flag), json.loads(option)
    assert a.pop("generated_at") and b.pop("generated_at") and a == b
    code, both = hwtune(*common, "--format", "json", "--json")
    assert code == 0 and json.loads(both)["host"] == a["host"]


def test_report_json_with_another_format_is_a_one_line_error(fixture_db):
    path, hosts = fixture_db
    code, out = hwtune("report", "--db", str(path), "--host", hosts["a"], "--json",
                       "--format", "markdown")
    assert code == 2 and "--json and --format markdown" in out


def test_report_help_shows_both_ways_to_get_json():
    code, out = hwtune("report", "--help")
    assert code == 0 and "--json" in out and "same as --json" in out
    assert "hwtune report --json > report.json" in out


def test_compare_reads_the_same_in_terminal_and_markdown():
    doc = compare_doc()
    for fmt in ("terminal", "markdown"):
        text = render("compare", doc, fmt)
        assert "2.00x" in text and "3.00x" in text, fmt
        assert "WRONG (max rel. diff 2.0e-02 on y)" in text, fmt
        assert "ok (max rel. diff 3.0e-07 on y)" in text, fmt
        assert "0.50/0.40/0.30" in text, fmt
    assert json.loads(render("compare", doc, "json"))["sides"][1]["ratio"] == 2.0
