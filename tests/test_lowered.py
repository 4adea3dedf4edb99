"""The lowered graph document (graphs.lowered_json, schema v3) that the C
runner rebuilds the engine graph from: it must say exactly what
lower_graph() tells the C builder, survive the database round trip, and
the v3 migration must keep every existing row."""

import json
import os
import sqlite3

import pytest

from hwtune.db import ResultsDB, migrations
from hwtune.db.keys import canonical_json
from hwtune.engine import lower_graph
from hwtune.engine.lowered import lowered_doc
from hwtune.errors import UsageError
from hwtune.graph import load_model

from conftest import schema_at

ROOT = os.path.join(os.path.dirname(__file__), "..")
# Inception has every attribute kind: ints, pairs, strings (padding,
# layout) and floats; the LSTM has many small ops and the "data"-free inits.
MODELS = ["inception_small", "lstm_small", "resnet18"]

FP = {"cpu_model": "Test CPU", "vendor": "GenuineTest", "isa_best": "generic",
      "sockets": 1, "physical_cores": 2, "logical_cpus": 2, "numa_nodes": 1}


def _model(name):
    return load_model(os.path.join(ROOT, "configs", "models", name + ".json"))


@pytest.mark.parametrize("name", MODELS)
def test_doc_matches_the_c_graph(name):
    graph = _model(name)
    doc = lowered_doc(graph)
    assert json.loads(canonical_json(doc)) == doc  # plain JSON, nothing lost
    with lower_graph(graph) as ng:
        assert len(doc["tensors"]) == ng.n_tensors and len(doc["ops"]) == ng.n_ops
        for name_, tid in ng.tensor_ids.items():
            t = doc["tensors"][tid]
            assert t["name"] == name_ and tuple(t["shape"]) == tuple(graph.shapes[name_])
        kinds = {t["name"]: t["kind"] for t in doc["tensors"]}
        assert {kinds[t.name] for t in graph.inputs} == {"input"}
        assert {kinds[t.name] for t in graph.params} <= {"param"}
        assert {kinds[n] for n in graph.outputs} == {"output"}
        n_attrs = 0
        for i, (op, d) in enumerate(zip(graph.ops, doc["ops"])):
            assert (d["name"], d["type"]) == (op.name, op.op)
            assert d["inputs"] == [ng.tensor_ids[n] for n in op.inputs]
            assert d["outputs"] == [ng.tensor_ids[n] for n in op.outputs]
            assert not set(d["ints"]) & set(d["floats"])
            for key in op.resolved:
                want = ng.get_attr(i, key)  # what the C builder was told
                got = d["ints"].get(key, d["floats"].get(key))
                assert got == want, (op.name, key)
                n_attrs += want is not None
        assert n_attrs > 0


def test_strings_are_char_codes_and_inits_kept():
    graph = _model("inception_small")
    doc = lowered_doc(graph)
    strings = [(op.name, k, v) for op in graph.ops for k, v in op.resolved.items()
               if isinstance(v, str)]
    assert strings, "inception_small should carry string attributes"
    ops = {d["name"]: d for d in doc["ops"]}
    for op_name, key, value in strings:
        assert ops[op_name]["ints"][key] == [ord(c) for c in value]
    inited = {t["name"]: t.get("init") for t in doc["tensors"]}
    for t in graph.inputs + graph.params:
        spec = {k: v for k, v in t.init.items() if k != "data"}
        assert (inited[t.name] or {}) == spec
    for t in doc["tensors"]:
        if t["kind"] in ("activation", "output"):
            assert "init" not in t


def test_unvalidated_graph_refused():
    graph = load_model(os.path.join(ROOT, "configs", "models", "lstm_small.json"),
                       validate=False)
    with pytest.raises(Exception, match="not validated"):
        lowered_doc(graph)


def test_put_lowered_round_trip(tmp_path):
    graph = _model("lstm_small")
    doc = lowered_doc(graph)
    with ResultsDB.open(tmp_path / "results.db") as db:
        key = db.put_graph(graph.to_json())
        assert db.graph(key)["lowered"] is None
        db.put_lowered(key, doc)
        assert db.graph(key)["lowered"] == doc
        db.put_lowered(key, doc)  # idempotent
        with pytest.raises(UsageError, match="unknown graph"):
            db.put_lowered("0" * 64, doc)
        with pytest.raises(UsageError, match="tensors and ops"):
            db.put_lowered(key, {"ops": []})
    raw = sqlite3.connect(tmp_path / "results.db").execute(
        "SELECT lowered_json FROM graphs WHERE graph_hash = ?", [key]).fetchone()[0]
    assert raw == canonical_json(doc)


def test_v3_migration_keeps_rows(tmp_path):
    path = tmp_path / "results.db"
    graph = _model("lstm_small")
    with schema_at(2):
        with ResultsDB.open(path) as db:
            host = db.upsert_host(FP)
            key = db.put_graph(graph.to_json())
            # A v2 row, written as hwtune of schema v2 wrote it (today's
            # put_engine_config knows later columns).
            cid = db._conn.execute(
                "INSERT INTO engine_configs (host_key, graph_hash, executors, "
                "threads_per_executor, scheduler, pin, source, hwtune_version, created_at) "
                "VALUES "
                "(?, ?, 2, 1, 'critical-path', 1, 'tuned', '0.1', '2026-11-01T00:00:00Z')",
                [host, key]).lastrowid
            db._conn.commit()
            assert db.schema_version == 2
    conn = sqlite3.connect(path)
    before = conn.execute("SELECT * FROM graphs").fetchall()
    conn.close()
    with ResultsDB.open(path) as db:
        assert db.schema_version == migrations.LATEST_VERSION >= 3
        assert [m["version"] for m in db.applied_migrations()][:3] == [1, 2, 3]
        row = db.graph(key)
        assert row["lowered"] is None and row["expanded"] == graph.to_json()
        assert db.engine_config(host, key, "tuned")["id"] == cid
        db.put_lowered(key, lowered_doc(graph))
    conn = sqlite3.connect(path)
    after = conn.execute("SELECT * FROM graphs").fetchall()
    assert [r[:-1] for r in after] == before  # old columns unchanged, lowered_json appended
