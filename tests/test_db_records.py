"""Records that travel: `hwtune db export/import/merge`. A real tuning's
database round-trips through JSON Lines into an empty one that `hwtune run`
then runs tuned; merges lose no row, are idempotent, keep host keys and
settle conflicts by the measured time; damaged files change nothing."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from hwtune.db import ResultsDB
from hwtune.db import records

from conftest import FINGERPRINT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHNET = [os.path.join(ROOT, "configs", "models", "pathnet_small.json"), "--set", "batch=1",
           "--set", "image=8", "--set", "channels=8", "--set", "modules=2", "--set", "layers=2"]
TABLES = [k.table for k in records.KINDS]


def hwtune(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args],
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"hwtune {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def counts(path):
    con = sqlite3.connect(str(path))
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def dump(path):
    con = sqlite3.connect(str(path))
    try:
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall()))
                for t in TABLES}
    finally:
        con.close()


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory):
    """A database written by a real CONV tuning and a run of the tuned graph."""
    path = tmp_path_factory.mktemp("tuned") / "results.db"
    hwtune("tune-graph", *PATHNET, "--reps", "2", "--only", "conv", "--json", "--db", str(path))
    # A tuning that keeps the default stores no config: a saved user config
    # makes sure the export holds one either way.
    hwtune("run", *PATHNET, "--iterations", "2", "--json", "--save", "--db", str(path))
    return path


def fleet_db(path, *, model, best_s, cfg_s, threads=2, stamp="2026-01-01T00:00:00.000000Z"):
    """A database of one made-up host holding a tuned CONV subject, a graph
    with a tuned config (its tune_summary figure cfg_s) and a trial."""
    with ResultsDB.open(path) as db:
        host = db.upsert_host(dict(FINGERPRINT, cpu_model=model))
        run = db.start_run(host, "tune", {"model": "m"})
        doc = {"format_version": 1, "name": "tiny", "seed": 0,
               "inputs": [{"name": "x", "shape": [2]}], "params": [],
               "ops": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
        g = db.put_graph(doc)
        db.put_engine_config(host, g, executors=1, threads_per_executor=threads,
                             scheduler="sequential", pin=False, source="tuned")
        db.add_fact(run, "tune_summary", {"graph_hash": g, "tuned": {"median_s": cfg_s}})
        db.add_trial(run, host, tuner="conv", search="grid", subject="conv|w", isa="avx2",
                     threads=2, params={"oc_bn": threads}, status="ok", median_s=best_s,
                     samples=[best_s])
        db.put_tuned(host, tuner="conv", subject="conv|w", isa="avx2", threads=2, search="grid",
                     best_params={"oc_bn": threads}, best_s=best_s, trials=1, run_id=run)
        db.finish_run(run, "complete")
        db._conn.execute("UPDATE runs SET started_at = ?", [stamp])
        return host


def test_export_import_into_empty_db_runs_the_tuned_config(tuned_db, tmp_path):
    out = tmp_path / "records.jsonl"
    hwtune("db", "export", "-o", str(out), "--db", str(tuned_db))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["record"] == "header" and lines[0]["version"] == records.FORMAT_VERSION
    assert lines[-1]["record"] == "end"
    kinds = {x["record"] for x in lines}
    assert {"host", "graph", "config", "trial", "tuned", "run"} <= kinds
    assert any(x["record"] == "graph" and x["row"]["lowered_json"] for x in lines)

    empty = tmp_path / "empty.db"
    got = json.loads(hwtune("db", "import", str(out), "--json", "--db", str(empty)).stdout)
    assert counts(empty) == counts(tuned_db)
    assert sum(got["added"].values()) == sum(counts(tuned_db).values())
    # Importing again changes nothing.
    before = dump(empty)
    again = json.loads(hwtune("db", "import", str(out), "--json", "--db", str(empty)).stdout)
    assert again["added"] == {} and again["replaced"] == {}
    assert dump(empty) == before

    ran = json.loads(hwtune("run", *PATHNET, "--iterations", "2", "--check", "--json",
                            "--db", str(empty)).stdout)
    with ResultsDB.open(str(tuned_db)) as d:
        want = "tuned" if d._conn.execute(
            "SELECT count(*) FROM engine_configs WHERE source = 'tuned'").fetchone()[0] else "user"
    assert ran["config_source"] == want and ran["check"]["ok"]


def test_export_of_one_host(tuned_db, tmp_path):
    other = tmp_path / "other.db"
    shutil.copy(tuned_db, other)
    with ResultsDB.open(other) as db:
        stranger = db.upsert_host(dict(FINGERPRINT, cpu_model="Stranger"))
        db.start_run(stranger, "scan")
        mine = [h["host_key"] for h in db.hosts() if h["host_key"] != stranger][0]
    out = tmp_path / "mine.jsonl"
    hwtune("db", "export", "--host", mine, "-o", str(out), "--db", str(other))
    hosts = {json.loads(x).get("row", {}).get("host_key") for x in out.read_text().splitlines()}
    assert stranger not in hosts and mine in hosts
    bad = hwtune("db", "export", "--host", "nope", "-o", str(out), "--db", str(other),
                 check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: no host 'nope'")
    assert "Traceback" not in bad.stderr


def test_merge_loses_no_row_and_twice_changes_nothing(tuned_db, tmp_path):
    b = tmp_path / "b.db"
    fleet_db(b, model="Other CPU", best_s=0.5, cfg_s=0.7)
    c = tmp_path / "c.db"
    hwtune("db", "merge", str(tuned_db), str(b), "-o", str(c))
    ca, cb, cc = counts(tuned_db), counts(b), counts(c)
    # Disjoint hosts: every row of both, nothing more (the graphs may overlap).
    for t in TABLES:
        if t != "graphs":
            assert cc[t] == ca[t] + cb[t], t
    before = dump(c)
    hwtune("db", "merge", str(tuned_db), str(b), "-o", str(c))
    hwtune("db", "merge", str(b), str(tuned_db), "-o", str(c))
    assert dump(c) == before
    con = sqlite3.connect(str(c))
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    hosts = {r[0] for r in con.execute("SELECT host_key FROM hosts")}
    con.close()
    with ResultsDB.open_readonly(b) as db:
        assert {h["host_key"] for h in db.hosts()} <= hosts


@pytest.mark.parametrize("order", ["fast-first", "slow-first"])
def test_conflicts_settled_by_measured_time(tmp_path, order):
    fast, slow = tmp_path / "fast.db", tmp_path / "slow.db"
    fleet_db(fast, model="Same", best_s=0.1, cfg_s=0.2, threads=4,
             stamp="2026-01-01T00:00:00.000000Z")
    fleet_db(slow, model="Same", best_s=0.3, cfg_s=0.4, threads=1,
             stamp="2026-01-02T00:00:00.000000Z")
    out = tmp_path / "c.db"
    srcs = [fast, slow] if order == "fast-first" else [slow, fast]
    hwtune("db", "merge", *map(str, srcs), "-o", str(out))
    with ResultsDB.open_readonly(out) as db:
        host = db.hosts()[0]["host_key"]
        assert len(db.hosts()) == 1
        tuned = db.tuned(host, tuner="conv", subject="conv|w", isa="avx2", threads=2)
        assert tuned["best_s"] == 0.1 and tuned["best_params"] == {"oc_bn": 4}
        g = db._query("SELECT graph_hash FROM graphs")[0]["graph_hash"]
        assert db.engine_config(host, g, "tuned")["threads_per_executor"] == 4
        # Both runs and both trials are kept: history is never lost.
        assert len(db.trials(host)) == 2 and len(db.runs(host, "tune")) == 2
    before = dump(out)
    hwtune("db", "merge", *map(str, srcs[::-1]), "-o", str(out))
    assert dump(out) == before


def test_damaged_records_change_nothing(tuned_db, tmp_path):
    out = tmp_path / "r.jsonl"
    hwtune("db", "export", "-o", str(out), "--db", str(tuned_db))
    lines = out.read_text().splitlines()
    target = tmp_path / "t.db"
    fleet_db(target, model="Target", best_s=0.1, cfg_s=0.1)
    before = dump(target)
    cases = {
        "truncated": (lines[:-3], "truncated"),
        "garbage": (lines[:2] + ["{not json"] + lines[2:], "not JSON"),
        "no header": (lines[1:], "not an hwtune records file"),
        "newer": ([json.dumps(dict(json.loads(lines[0]), version=99))] + lines[1:],
                  "newer than this hwtune reads"),
        "orphan": ([lines[0]] + [x for x in lines[1:] if json.loads(x)["record"] != "run"],
                   "points at run"),
        "unknown column": ([lines[0], json.dumps({"record": "host", "row": {
            "host_key": "h", "colour": "red"}})] + lines[1:], "no column colour"),
    }
    for name, (text, message) in cases.items():
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("\n".join(text) + "\n")
        proc = hwtune("db", "import", str(bad), "--db", str(target), check=False)
        assert proc.returncode == 2, name
        assert proc.stderr.startswith("error: ") and message in proc.stderr, (name, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert dump(target) == before, name
    proc = hwtune("db", "merge", str(target), str(tmp_path / "missing.db"), "-o",
                  str(tmp_path / "m.db"), check=False)
    assert proc.returncode == 2 and "no database at" in proc.stderr
    proc = hwtune("db", "merge", str(target), "-o", str(target), check=False)
    assert proc.returncode == 2 and "both an input and the output" in proc.stderr
