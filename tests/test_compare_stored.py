"""`hwtune compare` results are stored (a run of kind 'compare', one
measurement per side) and `hwtune report` shows them over time."""

import importlib.util
import json

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli

from conftest import rows, tiny_matmul

pytestmark = pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                                reason="onnxruntime not installed")

TINY = tiny_matmul("tiny-stored", 5)


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def test_compare_is_stored_and_reported_over_time(tmp_path):
    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    db = tmp_path / "r.db"
    for _ in range(2):
        r = invoke("compare", model, "--db", db, "--with", "ort", "--reps", 2)
        assert r.exit_code == 0, r.output
        assert f"in {db} (hwtune report shows it over time)" in r.output
    runs = rows(db, "SELECT run_id, status FROM runs WHERE kind = 'compare'")
    assert len(runs) == 2 and all(st == "complete" for _, st in runs)
    ops = rows(db, "SELECT op, n_samples FROM measurements WHERE bench = 'compare' "
                   "AND run_id = ?", runs[-1][0])
    assert sorted(op for op, _ in ops) == ["tiny-stored:hwtune", "tiny-stored:ort"]
    assert all(n == 2 for _, n in ops)
    doc = json.loads(invoke("report", "--db", db, "--json").stdout)
    (e,) = doc["compares"]
    assert e["model"] == "tiny-stored" and e["compares"] == 2 and len(e["history"]) == 2
    assert [s["key"] for s in e["sides"]] == ["hwtune", "ort"]
    out = " ".join(invoke("report", "--db", db).output.split())
    assert "Latest comparison of 1 model" in out and "tiny-stored" in out
    assert "hwtune" in out and ("x faster" in out or "x slower" in out)
    md = invoke("report", "--db", db, "--format", "markdown").output
    assert "Latest comparison of 1 model" in md
