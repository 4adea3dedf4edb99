"""results.db schema v2: migration from a v1 file keeps every row; graphs,
engine configs, op profiles and run traces round-trip."""

import shutil
import sqlite3
from pathlib import Path

import pytest

from hwtune.db import ResultsDB, migrations
from hwtune.db.keys import canonical_json, graph_hash, workload_key
from hwtune.errors import UsageError

FP = {
    "cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2", "sockets": 1,
    "physical_cores": 4, "logical_cpus": 8, "numa_nodes": 1,
    "isa": {"avx2": True}, "volatile": {"cpu_mhz": 3000.0},
}
DOC = {"format_version": 1, "name": "tiny", "seed": 0,
       "inputs": [{"name": "x", "shape": [2, 3]}], "params": [],
       "ops": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
V1_TABLES = ("hosts", "runs", "measurements", "run_facts", "hwtune_meta")
REPO_DB = Path(__file__).resolve().parents[1] / "results.db"


def _dump(path, tables):
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    finally:
        conn.close()


def _make_v1(path, monkeypatch):
    """A v1 file written by today's code with only migration 1 known."""
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
        m.setattr(migrations, "LATEST_VERSION", 1)
        with ResultsDB.open(path) as d:
            assert d.schema_version == 1
            key = d.upsert_host(FP)
            run = d.start_run(key, "scan", {"quick": True})
            d.add_measurement(run, bench="gemm", op="sgemm", params={"m": 8}, kernel_variant="avx2",
                              threads=1, samples=[1e-3, 2e-3], median_s=1.5e-3, mad_s=5e-4,
                              rel_spread=0.3, value=1.0, unit="GFLOP/s")
            d.add_fact(run, "saturation", {"gemm": 2})
            d.finish_run(run, "complete")




def test_migration_from_v1_keeps_every_row(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    _make_v1(path, monkeypatch)
    before = _dump(path, V1_TABLES)
    assert before["measurements"] and before["run_facts"]
    with ResultsDB.open(path) as d:
        assert d.schema_version == migrations.LATEST_VERSION >= 2
        assert [m["version"] for m in d.applied_migrations()][:2] == [1, 2]
    assert _dump(path, V1_TABLES) == before
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"graphs", "engine_configs", "op_profiles", "run_traces"} <= names


@pytest.mark.skipif(not REPO_DB.exists(), reason="no committed results.db")
def test_migration_of_the_committed_v1_database(tmp_path):
    path = tmp_path / "results.db"
    shutil.copy(REPO_DB, path)  # never touch the committed file itself
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    tables = [t for t in V1_TABLES if t != "hwtune_meta"]
    before = _dump(path, tables)
    with ResultsDB.open(path) as d:
        assert d.schema_version == migrations.LATEST_VERSION
    assert _dump(path, tables) == before, f"rows changed migrating from v{version}"


def test_migration_idempotent(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    _make_v1(path, monkeypatch)
    with ResultsDB.open(path) as d:
        first = d.applied_migrations()
    with ResultsDB.open(path) as d:
        assert d.applied_migrations() == first
    assert [m["version"] for m in first] == [v for v, _, _ in migrations.MIGRATIONS]


def test_graph_hash_is_canonical():
    reordered = dict(reversed(list(DOC.items())))
    assert graph_hash(reordered) == graph_hash(DOC)
    assert canonical_json(reordered) == canonical_json(DOC)
    assert graph_hash(dict(DOC, seed=1)) != graph_hash(DOC)
    assert len(graph_hash(DOC)) == 64


def test_workload_key_ignores_names_not_shapes():
    a = workload_key("gemm", [(64, 512), (512, 512)], {"trans_b": False})
    assert a == workload_key("gemm", [[64, 512], [512, 512]], {"trans_b": False})
    assert a != workload_key("gemm", [(32, 512), (512, 512)], {"trans_b": False})
    assert a != workload_key("gemm", [(64, 512), (512, 512)], {"trans_b": True})
    assert a.startswith("gemm|")


def test_graph_round_trip_and_dedup(db):
    h = db.put_graph(DOC)
    assert db.put_graph(dict(reversed(list(DOC.items())))) == h
    row = db.graph(h)
    assert row["expanded"] == DOC and row["name"] == "tiny" and row["ops"] == 1
    assert db._query("SELECT count(*) AS n FROM graphs")[0]["n"] == 1
    assert db.graph("0" * 64) is None
    with pytest.raises(UsageError):
        db.put_graph({"name": "no ops"})


def test_engine_config_round_trip_and_replace(db, host):
    h = db.put_graph(DOC)
    cid = db.put_engine_config(host, h, executors=2, threads_per_executor=1,
                               scheduler="critical-path", pin=True, op_threads={"y": 1},
                               op_params={"y": {"oc_bn": 16}}, op_priority={"y": 3.5},
                               source="tuned")
    got = db.engine_config(host, h, "tuned")
    assert got["id"] == cid and got["executors"] == 2 and got["threads_per_executor"] == 1
    assert got["scheduler"] == "critical-path" and got["pin"] is True
    assert got["op_threads"] == {"y": 1} and got["op_params"] == {"y": {"oc_bn": 16}}
    assert got["op_priority"] == {"y": 3.5}
    assert db.engine_config(host, h, "user") is None
    again = db.put_engine_config(host, h, executors=1, threads_per_executor=2,
                                 scheduler="sequential", pin=False, source="tuned")
    assert again == cid
    got = db.engine_config(host, h, "tuned")
    assert got["executors"] == 1 and got["op_threads"] == {} and got["pin"] is False
    uid = db.put_engine_config(host, h, executors=1, threads_per_executor=1,
                               scheduler="shared-queue", pin=False, source="user")
    assert uid != cid


@pytest.mark.parametrize("kw,match", [
    (dict(scheduler="fifo"), "unknown scheduler"),
    (dict(source="magic"), "unknown config source"),
    (dict(executors=0), "executors must be"),
    (dict(threads_per_executor=True), "threads_per_executor must be"),
])
def test_engine_config_rejects_bad_values(db, host, kw, match):
    h = db.put_graph(DOC)
    args = dict(executors=1, threads_per_executor=1, scheduler="sequential", pin=False,
                source="user")
    args.update(kw)
    with pytest.raises(UsageError, match=match):
        db.put_engine_config(host, h, **args)


def test_engine_config_needs_known_host_and_graph(db, host):
    args = dict(executors=1, threads_per_executor=1, scheduler="sequential", pin=False)
    with pytest.raises(UsageError, match="unknown graph"):
        db.put_engine_config(host, "f" * 64, **args)
    with pytest.raises(UsageError, match="unknown host"):
        db.put_engine_config("nohost", db.put_graph(DOC), **args)


def test_op_profile_latest_wins(db, host):
    wk = workload_key("relu", [(2, 3)], {})
    db.add_op_profile(host, wk, "relu", threads=1, median_s=2e-6, mad_s=1e-7, n=9)
    second = db.add_op_profile(host, wk, "relu", threads=1, median_s=1e-6, mad_s=float("nan"),
                               n=9)
    db.add_op_profile(host, wk, "relu", threads=2, median_s=5e-7, mad_s=0.0, n=9)
    got = db.op_profile(host, wk, threads=1)
    assert got["id"] == second and got["median_s"] == 1e-6 and got["mad_s"] is None
    assert db.op_profile(host, wk, threads=2)["median_s"] == 5e-7
    assert db.op_profile(host, wk, threads=4) is None


def test_trace_round_trip(db, host):
    run = db.start_run(host, "run")
    events = [dict(op_name="b", op_type="add", executor=1, threads=1, start_s=2.0, end_s=2.5),
              dict(op_name="a", op_type="gemm", executor=0, threads=2, start_s=1.0, end_s=3.0)]
    assert db.add_trace(run, 0, events) == 2
    got = db.trace(run)
    assert [(r["op_name"], r["executor"], r["threads"], r["start_s"], r["end_s"]) for r in got] \
        == [("a", 0, 2, 1.0, 3.0), ("b", 1, 1, 2.0, 2.5)]
    assert db.trace(run, iteration=1) == []
    with pytest.raises(UsageError, match="lacks"):
        db.add_trace(run, 0, [dict(op_name="x")])
    assert len(db.trace(run)) == 2  # a refused batch stores nothing
