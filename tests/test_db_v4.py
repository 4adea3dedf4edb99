"""Schema v4 (tuning): the migration from v3 keeps engine configs and the
op_profiles links into them; trials and tuned subjects round-trip."""

import sqlite3

import pytest

from hwtune.db import ResultsDB, migrations
from hwtune.errors import UsageError

from conftest import schema_at

FP = {"cpu_model": "Test CPU", "vendor": "GenuineIntel", "isa_best": "avx2", "sockets": 1,
      "physical_cores": 2, "logical_cpus": 2, "numa_nodes": 1}
GRAPH = {"name": "g", "inputs": [], "params": [], "ops": [], "outputs": []}


def test_v3_to_v4_keeps_configs_and_profile_links(tmp_path):
    path = tmp_path / "results.db"
    with schema_at(3):
        with ResultsDB.open(path) as db:
            host = db.upsert_host(FP)
            key = db.put_graph(GRAPH)
            cid = db._conn.execute(
                "INSERT INTO engine_configs (host_key, graph_hash, executors, "
                "threads_per_executor, scheduler, pin, op_threads_json, source, "
                "hwtune_version, created_at) VALUES "
                "(?, ?, 2, 1, 'critical-path', 1, ?, 'tuned', '0.1', 'x')",
                [host, key, '{"a": 1}']).lastrowid
            db._conn.commit()
            pid = db.add_op_profile(host, "add|[4]|{}", "add", threads=1, median_s=1e-6, mad_s=0.0,
                                    n=3, config_id=cid)
            assert db.schema_version == 3
    with ResultsDB.open(path) as db:
        assert db.schema_version == migrations.LATEST_VERSION >= 4
        row = db.engine_config(host, key, "tuned")
        assert row["id"] == cid and row["op_threads"] == {"a": 1}
        assert row["op_cost"] == {} and row["op_candidates"] == {} and row["lowered"] is None
        link = db._conn.execute("SELECT config_id FROM op_profiles WHERE id = ?",
                                [pid]).fetchone()[0]
        assert link == cid
        assert db._conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # The rebuilt table accepts Strategy 3's scheduler.
        db.put_engine_config(host, key, executors=1, threads_per_executor=2, scheduler="corun",
                             pin=True, op_candidates={"a": [[1, 1e-6], [2, 2e-6]]},
                             lowered={"tensors": [], "ops": []}, source="user")
        got = db.engine_config(host, key, "user")
        assert got["scheduler"] == "corun" and got["op_candidates"]["a"][1] == [2, 2e-6]
        assert got["lowered"] == {"tensors": [], "ops": []}


def test_trials_round_trip_and_lookup(tmp_path):
    with ResultsDB.open(tmp_path / "r.db") as db:
        host = db.upsert_host(FP)
        run = db.start_run(host, "tune", {})
        common = dict(tuner="conv", subject="conv2d|[1,8,8,8]", isa="avx2", threads=2)
        db.add_trial(run, host, search="grid", params={"b": 2, "a": 1}, status="ok",
                     median_s=1e-3, mad_s=1e-5, samples=[1e-3, 1.1e-3], **common)
        db.add_trial(run, host, search="grid", params={"a": 3, "b": 2}, status="wrong_answer",
                     note="max error 0.5", **common)
        # Key order does not matter: params are stored canonically.
        hit = db.trial(host, params={"a": 1, "b": 2}, **common)
        assert hit["status"] == "ok" and hit["samples"] == [1e-3, 1.1e-3] and hit["n"] == 2
        assert db.trial(host, params={"a": 1, "b": 2}, **dict(common, threads=1)) is None
        rows = db.trials(host, tuner="conv")
        assert [r["status"] for r in rows] == ["ok", "wrong_answer"]
        assert rows[1]["median_s"] is None and rows[1]["note"] == "max error 0.5"
        with pytest.raises(UsageError, match="unknown trial status"):
            db.add_trial(run, host, search="grid", params={}, status="great", **common)
        db.put_tuned(host, search="grid", best_params={"a": 1}, best_s=1e-3, trials=2,
                     run_id=run, **common)
        db.put_tuned(host, search="optuna", best_params={"a": 2}, best_s=9e-4, trials=5,
                     run_id=run, **common)
        best = db.tuned(host, **common)
        assert best["search"] == "optuna" and best["best_params"] == {"a": 2}
        n = sqlite3.connect(str(db.path)).execute("SELECT count(*) FROM tuned_subjects")
        assert n.fetchone()[0] == 1
