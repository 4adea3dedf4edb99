"""`hwtune run MODEL --inputs FILE` stores every (policy, batch) it measures
(schema v8: a 'dynamic' run and its dynamic_runs rows) and prints through
the output layer (terminal, markdown, JSON); `hwtune report` shows the
throughput per model and policy and the batch-size curve in every format;
bad flags are one `error:` line with exit 2. Real engine, real database."""

import hashlib
import json
import os
import sqlite3

import pytest

from hwtune.db import ResultsDB, migrations

from dynamic_docs import MODEL, ROOT, SMALL, invoke, one_error_line, write_samples

COUNT = 12


def run(samples, db, *args):
    return invoke("run", MODEL, *SMALL, "--inputs", samples, "--iterations", "2",
                  "--threads", "1", *args, "--db", str(db))


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return write_samples(str(tmp_path_factory.mktemp("dyn") / "trees.jsonl"), COUNT)


@pytest.fixture(scope="module")
def stored(samples, tmp_path_factory):
    """Two runs: batches 1 and 4 under batched and serial, checked; then
    batch 2, unchecked."""
    db = tmp_path_factory.mktemp("db") / "results.db"
    first = run(samples, db, "--batch", "1,4", "--policy", "batched,serial", "--check",
                "--json")
    assert first.exit_code == 0, first.output
    second = run(samples, db, "--batch", "2", "--json")
    assert second.exit_code == 0, second.output
    return db, json.loads(first.stdout), json.loads(second.stdout)


def test_every_measured_config_is_a_stored_row(samples, stored):
    db, a, b = stored
    with open(samples, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    with ResultsDB.open(db) as d:
        run_row = d.run(a["run_id"])
        rows = d.dynamic_runs(run_id=a["run_id"])
        later = d.dynamic_runs(run_id=b["run_id"])
    assert run_row["kind"] == "dynamic" and run_row["status"] == "complete"
    assert run_row["options"]["samples_digest"] == digest
    assert [(r["policy"], r["batch"]) for r in rows] == [
        ("batched", 1), ("serial", 1), ("batched", 4), ("serial", 4)]
    for r, j in zip(rows, a["results"]):
        assert r["samples_digest"] == digest == a["samples_digest"]
        assert r["model_hash"] == a["model_hash"] and r["model"] == a["model"]
        assert (r["executors"], r["threads"], r["chunk"]) == (1, 1, 256)
        assert r["n_samples"] == COUNT and r["n_vertices"] == a["vertices"]
        assert r["config_source"] == j["config_source"] == "default+flags"
        assert r["check_status"] == "ok" and r["check_rel"] <= 1e-4
        assert len(r["seconds"]) == 2 and r["median_s"] == pytest.approx(j["median_s"])
        assert r["samples_per_s"] == pytest.approx(COUNT / r["median_s"])
        assert r["groups"] == j["groups"] > 0
    assert [r["check_status"] for r in later] == [None]
    # the serial rows carry the ratio, measured in the same run
    assert a["results"][0]["vs_serial"] == pytest.approx(
        a["results"][1]["median_s"] / a["results"][0]["median_s"])


def test_terminal_and_markdown_come_from_the_output_layer(samples, tmp_path):
    db = tmp_path / "r.db"
    md = run(samples, db, "--batch", "4", "--format", "markdown")
    assert md.exit_code == 0, md.output
    assert "| policy | batch | config |" in md.stdout
    assert "| batched | 4 | 1x1 c256 (default+flags) |" in md.stdout
    term = run(samples, db, "--batch", "4,2", "--policy", "serial")
    assert term.exit_code == 0, term.output
    lines = term.stdout.splitlines()
    assert lines[0].startswith("model:") and "load" in lines[2]
    assert any(line.startswith("policy") and "samples/s" in line for line in lines)
    assert sum(line.startswith("serial") for line in lines) == 2
    assert lines[-1].startswith("stored:   run ")
    with ResultsDB.open(db) as d:
        assert len(d.dynamic_runs(d.hosts()[0]["host_key"])) == 3


def test_report_shows_throughput_and_the_batch_curve(stored, tmp_path):
    db, a, b = stored
    res = invoke("report", "--db", str(db), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    [e] = doc["dynamic"]
    assert e["model"] == a["model"] and e["samples"] == COUNT and e["runs"] == 2
    assert [p["batch"] for p in e["curves"]["batched"]] == [1, 2, 4]
    assert [p["batch"] for p in e["curves"]["serial"]] == [1, 4]
    assert e["curves"]["batched"][1]["run_id"] == b["run_id"]
    assert any(f["key"].startswith("dyn:") for f in doc["figures"])
    assert any(s["key"].startswith("dyn:") for s in doc["history"])
    term = invoke("report", "--db", str(db))
    assert term.exit_code == 0, term.output
    assert "Dynamic models: best samples/s per policy" in term.stdout
    assert "samples/s vs batch" in term.stdout
    md = invoke("report", "--db", str(db), "--format", "markdown")
    assert "## Dynamic models: best samples/s" in md.stdout and "```text" in md.stdout
    page = tmp_path / "r.html"
    html = invoke("report", "--db", str(db), "--format", "html", "-o", str(page))
    assert html.exit_code == 0, html.output
    text = page.read_text()
    assert "id='dynamic'" in text and "samples/s vs batch" in text and "<svg" in text
    cmp = invoke("report", "--db", str(db), "--compare", f"run:{a['run_id']}",
                 f"run:{b['run_id']}", "--json")
    assert cmp.exit_code == 0, cmp.output
    keys = [r["key"] for r in json.loads(cmp.stdout)["compare"]["rows"]]
    assert any(k.endswith(":batched:b2") for k in keys)


def test_bad_flags_are_one_error_line(samples, tmp_path):
    db = tmp_path / "r.db"
    for args, needle in ((["--executors", "0"], "--executors"),
                         (["--threads", "100000"], "CPUs"),
                         (["--chunk", "3"], "--chunk"),
                         (["--json", "--format", "markdown"], "two formats"),
                         (["--batch", "0"], "--batch")):
        res = run(samples, db, *args)
        assert one_error_line(res) and needle in res.stderr, (args, res.output)
    lstm = os.path.join(ROOT, "configs", "models", "lstm_small.json")
    # --format is every run's now (--format markdown on a static model: test_cli_run.py)
    res = invoke("run", lstm, "--untuned", "--db", str(db))
    assert one_error_line(res) and "dynamic models" in res.stderr, res.output
    res = invoke("run", MODEL, *SMALL, "--inputs", str(tmp_path / "none.jsonl"), "--db", str(db))
    assert one_error_line(res), res.output
    assert not db.exists() or not ResultsDB.open(db).dynamic_runs()


def test_v7_database_migrates_to_v8_keeping_rows(tmp_path):
    from conftest import FINGERPRINT, schema_at
    path = tmp_path / "v7.db"
    with schema_at(7):
        with ResultsDB.open(path) as d:
            host = d.upsert_host(FINGERPRINT)
            rid = d.start_run(host, "run", {"model": "m"})
            d.finish_run(rid, "complete")
    with ResultsDB.open(path) as d:
        assert d.schema_version == migrations.LATEST_VERSION >= 8
        assert [m["version"] for m in d.applied_migrations()][-1] == migrations.LATEST_VERSION
        assert 8 in [m["version"] for m in d.applied_migrations()]
        assert d.run(rid)["options"] == {"model": "m"}
        assert d.dynamic_runs(host) == [] and d.dynamic_configs(host, "x") == []
        run_id = d.start_run(host, "dynamic", {})
        d.add_dynamic_run(run_id, dict(
            model="m", model_hash="h", inputs="f", samples_digest="s", n_samples=1,
            n_vertices=3, policy="batched", batch=1, executors=1, threads=1, chunk=256,
            pinned=True, config_source="default", seconds=[0.1, 0.2], median_s=0.15,
            samples_per_s=6.7, kernel_variant="generic", check_status="wrong_answer",
            check_rel=float("inf")))
        [row] = d.dynamic_runs(run_id=run_id)
        assert row["check_status"] == "wrong_answer" and row["check_rel"] is None
    conn = sqlite3.connect(path)
    conn.execute("UPDATE dynamic_runs SET seconds_json = 'x'")
    conn.commit()
    conn.close()
    from hwtune.db import integrity
    with ResultsDB.open(path) as d:
        found = integrity.find(d)
    assert [(p.table, p.action) for p in found.problems] == [("dynamic_runs", "drop the row")]


def test_dynamic_rows_travel_with_db_export_and_import(stored, tmp_path):
    db, a, _ = stored
    out = tmp_path / "records.jsonl"
    res = invoke("db", "export", "-o", str(out), "--db", str(db))
    assert res.exit_code == 0, res.output
    target = tmp_path / "other.db"
    for _ in range(2):  # the second import finds every row already there
        res = invoke("db", "import", str(out), "--db", str(target))
        assert res.exit_code == 0, res.output
    with ResultsDB.open(db) as src, ResultsDB.open(target) as dst:
        host = src.hosts()[0]["host_key"]
        want = [{k: v for k, v in r.items() if k not in ("id", "run_id")}
                for r in src.dynamic_runs(host)]
        got = [{k: v for k, v in r.items() if k not in ("id", "run_id")}
               for r in dst.dynamic_runs(host)]
    assert got == want and len(got) == 5
