"""`hwtune check --compare A.json B.json`: two saved `--json` results decided
by the gate's rules and exit codes, with nothing measured. The documents
are the gate's own JSON (CheckReport.to_json) around figures with known
samples, so every verdict is known in advance."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hwtune.check.compare_files import compare_files
from hwtune.check.gate import CheckReport, FigureOutcome
from hwtune.check.measure import FigureResult
from hwtune.check.suite import parse_suite
from hwtune.cli.main import cli
from hwtune.errors import HwtuneError

SUITE = parse_suite({"suite": {"name": "t"}, "thresholds": {"alpha": 0.01, "min_effect": 0.05},
                     "figure": [{"kind": "gemm", "M": 8, "K": 16, "N": 8, "name": "g"}]})
CHUNK = 3  # samples per round


def timed(name, scale=1.0, seed=0, rounds=15, rate=False, kind="gemm"):
    """A time figure of `rounds` rounds: samples around 1 ms x scale with
    1% noise (or around 100 GFLOPS / scale for a rate), a 1 ms reference."""
    rng = np.random.default_rng(seed)
    n = rounds * CHUNK
    noise = rng.lognormal(0.0, 0.01, n)
    samples = [float(x) for x in (100.0 / scale * noise if rate else 1e-3 * scale * noise)]
    params = {"threads": 1, "metric": "time", "ends": list(range(CHUNK, n + 1, CHUNK)),
              "kept": [1] * rounds, "rounds": rounds}
    return FigureResult(name, "fma_peak" if rate else kind, params, "GFLOPS" if rate else "s",
                        rate, samples, [1e-3] * n)


def counted(name, count):
    return FigureResult(name, "gemm", {"metric": "estimated-cycles", "counter": "callgrind",
                                       "calls": 3}, "count", False, [float(count)])


def write(path, figs, host="hostA", relative=False):
    outs = [FigureOutcome(f.name, f.kind, f.unit, "recorded", "recorded", f, None)
            for f in figs]
    r = CheckReport(SUITE, "gate", relative, host, "recorded", 0, outs)
    path.write_text(json.dumps(r.to_json()))
    return str(path)


def check(*args):
    r = CliRunner().invoke(cli, ["check", *args])
    return r.exit_code, r.output


@pytest.fixture
def base(tmp_path):
    return write(tmp_path / "a.json", [timed("g"), timed("peak", rate=True, seed=3),
                                       counted("c", 1e6)])


def test_same_speed_passes(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", seed=1), timed("peak", rate=True, seed=4),
                                    counted("c", 1e6)])
    code, out = check("--compare", base, b)
    assert code == 0, out
    assert "PASS" in out and "nothing measured" in " ".join(out.split())


def test_a_slower_figure_is_a_regression_exit_1_in_every_format(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", 1.3, seed=1), timed("peak", rate=True, seed=4),
                                    counted("c", 1e6)])
    junit, md = tmp_path / "c.xml", tmp_path / "c.md"
    code, out = check("--compare", base, b, "--junit", str(junit), "--markdown", str(md))
    assert code == 1 and "REGRESSION" in out, out
    assert junit.read_text().count("<failure") == 1 and "| `g` |" in md.read_text()
    code, out = check("--compare", base, b, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and doc["status"] == "regression"
    g = next(f for f in doc["figures"] if f["name"] == "g")
    assert g["status"] == "regression" and g["ratio"] == pytest.approx(1.3, rel=0.02)
    assert g["ci"][0] > 1.0


def test_a_lower_rate_and_more_counts_are_regressions(tmp_path, base):
    # a throughput probe 30% slower means a lower rate: the gate compares 1/rate
    b = write(tmp_path / "b.json", [timed("g", seed=1), timed("peak", 1.3, rate=True, seed=4),
                                    counted("c", 1.05e6)])
    r = compare_files(base, b)
    st = {o.name: o.status for o in r.outcomes}
    assert st == {"g": "pass", "peak": "regression", "c": "regression"} and r.exit_code == 1


def test_an_improvement_passes_with_a_note(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", 0.7, seed=1), timed("peak", 0.7, rate=True,
                                                                   seed=4), counted("c", 9e5)])
    r = compare_files(base, b)
    assert r.status == "pass" and r.exit_code == 0
    assert {o.status for o in r.outcomes} == {"improvement"}
    assert sum("improved" in n for n in r.notices) == 3


def test_too_few_rounds_is_undecidable_exit_3(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", seed=1, rounds=2),
                                    timed("peak", rate=True, seed=4), counted("c", 1e6)])
    code, out = check("--compare", base, b)
    assert code == 3 and "UNDECIDABLE" in out, out
    code, _ = check("--compare", base, b, "--undecidable-ok")
    assert code == 0


def test_record_or_report_fails_only_from_large_effect(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", 1.1, seed=1), timed("peak", rate=True, seed=4),
                                    counted("c", 1e6)])
    assert compare_files(base, b).exit_code == 1
    r = compare_files(base, b, mode="record-or-report")  # large_effect 25%
    assert r.exit_code == 0 and {o.name: o.status for o in r.outcomes}["g"] == "warn"


def test_missing_figures_and_errors(tmp_path, base):
    broken = FigureResult("g", "gemm", {"metric": "time"}, "s", False, error="HWT_EISA: refused")
    b = write(tmp_path / "b.json", [broken, counted("c", 1e6), counted("new one", 5)])
    r = compare_files(base, b)
    st = {o.name: (o.status, o.reason) for o in r.outcomes}
    assert st["g"][0] == "error" and "refused" in st["g"][1]
    assert st["peak"][0] == "error" and "not measured in b.json" in st["peak"][1]
    assert st["new one"] == ("new", "not in a.json")
    assert r.exit_code == 2


def test_hosts_differ_absolute_refused_relative_allowed(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", seed=1), timed("peak", rate=True, seed=4),
                                    counted("c", 1e6)], host="hostB")
    code, out = check("--compare", base, b)
    assert code == 2 and out.startswith("error: ") and "--relative" in out, out
    code, out = check("--compare", base, b, "--relative")
    assert code == 0, out
    assert "hostB" in " ".join(out.split())


def test_figure_selects_and_unknown_figure_is_an_error(tmp_path, base):
    b = write(tmp_path / "b.json", [timed("g", 1.3, seed=1), timed("peak", rate=True, seed=4),
                                    counted("c", 1e6)])
    code, _ = check("--compare", base, b, "--figure", "c")
    assert code == 0
    code, out = check("--compare", base, b, "--figure", "nope")
    assert code == 2 and "unknown figure 'nope'" in out


@pytest.mark.parametrize("content, words", [
    ("{", "not valid JSON"),
    ('{"format": "hwtune-check-baseline"}', "not an `hwtune check --json` result"),
    ('{"host_key": "h", "figures": [{"name": "g", "status": "pass"}]}', "no raw samples"),
])
def test_bad_files_are_one_line_errors(tmp_path, base, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out = check("--compare", base, str(bad))
    assert code == 2 and out.startswith("error: ") and words in out, out
    assert out.strip().count("\n") == 0
    code, out = check("--compare", base, str(tmp_path / "missing.json"))
    assert code == 2 and "does not exist" in out


def test_compare_takes_no_measuring_option(tmp_path, base):
    for extra in (["--update-baseline"], ["--against", "python3"], ["--baseline", base],
                  ["--max-seconds", "3"]):
        code, out = check("--compare", base, base, *extra)
        assert code == 2 and "measures nothing" in out, (extra, out)
    with pytest.raises(HwtuneError):
        compare_files(base, base, mode="nope")


def test_a_result_compared_with_itself_passes(tmp_path):
    """`--compare a.json a.json`: the same measurement on both sides is no
    change, however noisy its rounds were (it exited 3, undecidable)."""
    import numpy as np
    rng = np.random.default_rng(1)
    noisy = [float(x) for x in rng.lognormal(-13, 1.5, 10)]  # rounds that spread 100x
    doc = {"suite": "t", "host_key": "h", "relative": False, "mode": "gate",
           "thresholds": {"alpha": 0.01, "min_effect": 0.05},
           "figures": [{"name": "g", "status": "pass", "current": {
               "name": "g", "kind": "gemm", "params": {"threads": 1, "chunk": 2}, "unit": "s",
               "higher_is_better": False, "samples": noisy, "ref": [1e-6] * 10}}]}
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    from hwtune.check.compare_files import compare_files
    r = compare_files(a, a)
    assert r.status == "pass" and r.exit_code == 0, [o.reason for o in r.outcomes]
    assert "same measurement" in r.outcomes[0].reason
    # a different run with the same samples scaled is still decided by the test
    doc["figures"][0]["current"]["samples"] = [x * 3 for x in noisy]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    assert compare_files(a, b).outcomes[0].status != "pass"
