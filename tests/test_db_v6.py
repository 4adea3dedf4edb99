"""Schema v6: engine_configs without the CHECK on scheduler names. A
database of every older schema version, with a row in every table, migrates
keeping every row, every column value and the op_profiles links into the
rebuilt table; afterwards a scheduler name is checked against the engine's
scheduler table by whoever writes or reads it, not by SQL."""

import sqlite3

import pytest

from hwtune.db import ResultsDB, migrations
from hwtune.engine.config import resolve
from hwtune.errors import UsageError
from hwtune.native.sched import names

from conftest import schema_at

# A value for every column any schema version has (a column a version lacks
# is skipped); tables are filled parents first so foreign keys hold.
VALUES = {
    "host_key": "h1", "cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2",
    "sockets": 1, "physical_cores": 2, "logical_cpus": 2, "numa_nodes": 1,
    "fingerprint_json": "{}", "first_seen": "t0", "last_seen": "t1", "run_id": 1,
    "kind": "tune", "hwtune_version": "0.1", "started_at": "t0", "finished_at": "t1",
    "status": "ok", "options_json": "{}", "note": "n", "pid": 1, "hostname": "box",
    "kernel_variant": "avx2", "bench": "graph", "op": "g", "params_json": "{\"a\": 1}",
    "threads": 2, "executors": 2, "pinned": 1, "n_samples": 2, "samples_json": "[1, 2]",
    "median_s": 1.5, "mad_s": 0.5, "rel_spread": 0.3, "value": 2.0, "unit": "GFLOP/s",
    "created_at": "t2", "key": "k", "value_json": "{}", "graph_hash": "g1", "name": "tiny",
    "ops": 1, "expanded_json": "{}", "lowered_json": None, "threads_per_executor": 1,
    "scheduler": "critical-path", "pin": 1, "op_threads_json": "{\"y\": 1}",
    "op_params_json": "{}", "op_priority_json": "{\"y\": 2.0}", "op_cost_json": "{\"y\": 1e-3}",
    "op_candidates_json": "{\"y\": [[1, 1e-3]]}", "source": "tuned", "workload_key": "w",
    "op_type": "relu", "n": 3, "config_id": 7, "iteration": 0, "op_name": "y", "executor": 0,
    "start_s": 0.0, "end_s": 1.0, "tuner": "executor_sweep", "search": "grid",
    "subject": "g1", "isa": "avx2", "best_params_json": "{}", "best_s": 1.0, "trials": 1,
    "suite": "ci", "suite_json": "{}", "baseline_id": 1, "figure": "f", "higher_is_better": 1,
    "ref_json": "[]",
}
# Per table, values that differ from VALUES (status and id choices).
OVERRIDES = {
    "runs": {"status": "complete"},
    "engine_configs": {"id": 7},
    "check_baselines": {"id": 1},
}
ORDER = ("hosts", "runs", "measurements", "run_facts", "graphs", "engine_configs",
         "op_profiles", "run_traces", "tuning_trials", "tuned_subjects", "check_baselines",
         "check_baseline_figures")


def _tables(conn):
    return [t for t in ORDER
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                            [t]).fetchone()]


def _fill(path):
    """A row in every data table this version has."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    for table in _tables(conn):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        row = {c: OVERRIDES.get(table, {}).get(c, VALUES.get(c)) for c in cols
               if c in VALUES or c in OVERRIDES.get(table, {})}
        conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                     f"({', '.join('?' * len(row))})", list(row.values()))
    conn.commit()
    conn.close()


def _dump(path):
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return {t: [dict(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY rowid")]
                for t in _tables(conn)}
    finally:
        conn.close()


def _make(path, version):
    with schema_at(version):
        with ResultsDB.open(path) as d:
            assert d.schema_version == version
    _fill(path)


@pytest.mark.parametrize("version", [v for v, _, _ in migrations.MIGRATIONS
                                     if v < migrations.LATEST_VERSION])
def test_every_older_version_migrates_keeping_every_row(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    _make(path, version)
    before = _dump(path)
    assert all(before.values()), "every table holds a row"
    with ResultsDB.open(path) as d:
        assert d.schema_version == migrations.LATEST_VERSION >= 6
        assert [m["version"] for m in d.applied_migrations()] == \
            [v for v, _, _ in migrations.MIGRATIONS]
    after = _dump(path)
    for table, rows in before.items():
        assert len(after[table]) == len(rows), table
        for old, new in zip(rows, after[table]):
            assert {c: new[c] for c in old} == old, f"{table} changed migrating from v{version}"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    if "op_profiles" in before:  # the link into the rebuilt engine_configs
        assert after["op_profiles"][0]["config_id"] == after["engine_configs"][0]["id"] == 7


def test_scheduler_names_are_the_engine_tables_not_sql(tmp_path):
    """Any name fits the column now; ResultsDB writes only names of the
    engine's table, and reading a name this hwtune lacks (a config written
    by a newer one) is a clear error that names the way out."""
    with ResultsDB.open(tmp_path / "r.db") as db:
        host = db.upsert_host({"cpu_model": "T", "vendor": "v", "isa_best": "avx2",
                               "sockets": 1, "physical_cores": 2, "logical_cpus": 2,
                               "numa_nodes": 1})
        doc = {"format_version": 1, "name": "tiny", "seed": 0,
               "inputs": [{"name": "x", "shape": [2]}], "params": [],
               "ops": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
        key = db.put_graph(doc)
        for name in names():
            db.put_engine_config(host, key, executors=1, threads_per_executor=1,
                                 scheduler=name, pin=False, source="user")
        with pytest.raises(UsageError, match=r"unknown scheduler 'critical_path' \(did you mean "
                                             r"'critical-path'\?\)"):
            db.put_engine_config(host, key, executors=1, threads_per_executor=1,
                                 scheduler="critical_path", pin=False, source="user")
        db._conn.execute("UPDATE engine_configs SET scheduler = 'from-the-future'")
        db._conn.commit()
        with pytest.raises(UsageError, match="'from-the-future', unknown to this hwtune.*"
                                             "pass --scheduler"):
            resolve(db, host, key, {}, cpus=[0, 1])
        got = resolve(db, host, key, {"scheduler": names()[0]}, cpus=[0, 1])
        assert got.config.scheduler == names()[0]
