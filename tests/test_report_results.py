"""`hwtune run` and `hwtune check` results in `hwtune report`: the latest of
each graph and suite with their history, their figures in the history, and
`--compare run:ID run:ID` for two runs of any day."""

import json
import os
import subprocess
import sys

import pytest

from hwtune.db import ResultsDB

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LSTM = [os.path.join(ROOT, "configs", "models", "lstm_small.json"), "--set", "seq=3",
        "--set", "hidden=32", "--set", "batch=4", "--set", "layers=2"]


def hwtune(*args, db, check=True):
    proc = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"hwtune {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """Two `hwtune run`s of one graph (only runs: no scan, no tuning) and a
    stored check run shaped as `hwtune check` stores it."""
    path = tmp_path_factory.mktemp("results") / "results.db"
    ids = [json.loads(hwtune("run", *LSTM, "--iterations", "5", "--check", "--json",
                             db=path).stdout)["run_id"] for _ in range(2)]
    with ResultsDB.open(path) as d:
        host = d.hosts()[0]["host_key"]
        for status, med in (("pass", 1.0e-3), ("regression", 1.5e-3)):
            run = d.start_run(host, "check", {"suite": "ci"})
            d.add_fact(run, "check", {
                "suite": "ci", "mode": "gate", "status": status,
                "exit_code": 0 if status == "pass" else 1,
                "counts": {status if status == "pass" else "regression": 1},
                "figures": [{"name": "gemm", "unit": "s", "status": status, "ratio": med / 1e-3,
                             "current_median": med, "baseline_median": 1.0e-3}]})
            d.finish_run(run, "complete")
            ids.append(run)
    return path, host, ids


def test_runs_and_checks_are_in_the_report(db):
    path, host, (r1, r2, c1, c2) = db
    doc = json.loads(hwtune("report", "--json", "--host", host, db=path).stdout)
    (run,) = doc["runs"]
    assert run["run_id"] == r2 and run["runs"] == 2 and run["check_ok"] is True
    assert [h["run_id"] for h in run["history"]] == [r1, r2]
    with ResultsDB.open_snapshot(path) as d:
        assert run["median_s"] == d.measurements(r2, bench="graph")[0]["median_s"]
    (check,) = doc["checks"]
    assert check["run_id"] == c2 and check["status"] == "regression" and check["checks"] == 2
    assert [h["status"] for h in check["history"]] == ["pass", "regression"]
    keys = {s["key"]: s for s in doc["history"]}
    assert len(keys["run:lstm-small:latency"]["points"]) == 2
    assert keys["check:ci:gemm"]["change"] == 1.5
    text = hwtune("report", "--host", host, db=path).stdout
    assert "Latest run of 1 graph" in text and "Latest check of 1 suite" in text
    md = hwtune("report", "--host", host, "--format", "markdown", db=path).stdout
    assert "## Latest run of 1 graph" in md and "| lstm-small |" in md
    html = path.parent / "r.html"
    hwtune("report", "--host", host, "--format", "html", "-o", str(html), db=path)
    assert "id='results'" in html.read_text()


def test_compare_two_runs_of_the_same_day(db):
    path, host, (r1, r2, c1, c2) = db
    doc = json.loads(hwtune("report", "--json", "--host", host, "--compare", f"run:{r1}",
                            f"run:{r2}", db=path).stdout)
    c = doc["compare"]
    assert [s["run_id"] for s in c["sides"]] == [r1, r2]
    row = next(r for r in c["rows"] if r["key"] == "run:lstm-small:latency")
    with ResultsDB.open_snapshot(path) as d:
        a, b = (d.measurements(i, bench="graph")[0]["median_s"] for i in (r1, r2))
    assert row["a"] == a and row["b"] == b and row["ratio"] == round(b / a, 4)
    # two runs compared: the report is that comparison, not the host's report with
    # it at the end (266 lines before)
    text = hwtune("report", "--host", host, "--compare", f"run:{r1}", f"run:{r2}",
                  db=path).stdout
    lines = text.splitlines()
    assert any(ln.startswith("Compare: A = run") for ln in lines[:4])
    assert "lstm-small run latency" in text
    assert "History" not in text and len(lines) < 20
    md = hwtune("report", "--host", host, "--compare", f"run:{r1}", f"run:{r2}", "--format",
                "markdown", db=path).stdout
    assert md.startswith(f"# hwtune report: run {r1}") and "## Compare" in md
    doc = json.loads(hwtune("report", "--json", "--host", host, "--compare", f"run:{c1}",
                            "--compare", f"run:{c2}", db=path).stdout)
    (row,) = doc["compare"]["rows"]
    assert row["ratio"] == 1.5 and row["gain"] == round(1 / 1.5, 4)
    for args, message in (([f"run:{r1}", f"run:{r1}"], "two different runs"),
                          ([f"run:{r1}", f"run:{c1}"], "compare two of one kind"),
                          (["run:x", f"run:{r1}"], "numeric run id"),
                          ([f"run:{r1}", "run:999"], "no run 999"),
                          ([f"run:{r1}"], "takes two runs")):
        proc = hwtune("report", "--host", host, "--compare", *args, db=path, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr
    proc = hwtune("report", "--host", host, f"run:{r1}", db=path, check=False)
    assert proc.returncode == 2 and "values to compare follow --compare" in proc.stderr
