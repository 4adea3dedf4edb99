"""`hwtune tune-graph MODEL --inputs FILE`: executors x threads x chunk on
the samples, then per-op threads at the row counts a pass runs at; every
trial stored with its status, a rerun resumes, the tuned config is stored
per (policy, batch) and `hwtune run --inputs` uses it unless --untuned.
Real engine, real database, no mocks."""

import json
import os

import pytest

from hwtune.db import ResultsDB
from hwtune.dynamic.executor import DynamicEngine, DynConfig, read_samples
from hwtune.dynamic.model import load_dynamic, model_hash
from hwtune.native.threads import allowed_cpus
from hwtune.tuners import dynamic_graph as dg
from hwtune.tuners.search import ERROR, OK, STATUSES

from dynamic_docs import MODEL, ROOT, SMALL, VARS, invoke, one_error_line, write_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return write_samples(str(tmp_path_factory.mktemp("dyn") / "trees.jsonl"))


@pytest.fixture(scope="module")
def model():
    return load_dynamic(os.path.join(ROOT, "configs", "dynamic", MODEL + ".json"), VARS)


@pytest.fixture(scope="module")
def tuned(samples, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "results.db"
    res = invoke("tune-graph", MODEL, *SMALL, "--inputs", samples, "--batch", "4", "--reps",
                 "1", "--db", str(db), "--json")
    assert res.exit_code == 0, res.output
    return db, json.loads(res.stdout)


def test_tuning_stores_trials_and_the_config_and_prints_the_ratio(tuned):
    db, doc = tuned
    n = len(dg.candidates(len(allowed_cpus()), 3))
    assert doc["stages"]["executors"]["trials"] == n
    hist = doc["histogram"]
    assert hist and all(int(r) & (int(r) - 1) == 0 for by in hist.values() for r in by)
    assert doc["default"]["check"]["ok"] and doc["tuned"]["check"]["ok"]
    assert doc["speedup"] == pytest.approx(doc["default"]["median_s"] / doc["tuned"]["median_s"])
    assert doc["reps"] == dg.FINAL_REPS
    with ResultsDB.open(db) as d:
        host = d.hosts()[0]["host_key"]
        trials = d.trials(host, tuner=dg.TUNER)
        [cfg] = d.dynamic_configs(host, doc["model_hash"], "tuned")
        run = d.run(doc["run_id"])
    assert len(trials) == n and {t["status"] for t in trials} <= set(STATUSES)
    assert all(t["run_id"] == doc["run_id"] for t in trials)
    assert run["kind"] == "tune" and run["status"] == "complete"
    chosen = doc["chosen_config"]
    assert (cfg["policy"], cfg["batch"]) == ("batched", 4)
    assert (cfg["executors"], cfg["threads"], cfg["chunk"]) == (
        chosen["executors"], chosen["threads"], chosen["chunk"])
    assert cfg["id"] == doc["config_id"]


def test_a_rerun_resumes_from_the_stored_trials(tuned, samples):
    db, first = tuned
    res = invoke("tune-graph", MODEL, *SMALL, "--inputs", samples, "--batch", "4", "--reps",
                 "1", "--db", str(db))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "ratio:" in out and "tuned vs default" in out and "row counts per op call" in out
    line = next(x for x in out.splitlines() if x.startswith("executors:"))
    n = first["stages"]["executors"]["trials"]
    assert f"({n} trials, 0 measured, {n} reused" in line


def test_run_uses_the_tuned_config_unless_untuned(tuned, samples):
    db, doc = tuned
    base = ["run", MODEL, *SMALL, "--inputs", samples, "--iterations", "1", "--db", str(db),
            "--json"]
    res = invoke(*base, "--batch", "4")
    assert res.exit_code == 0, res.output
    [r] = json.loads(res.stdout)["results"]
    with ResultsDB.open(db) as d:  # a rerun may have stored another config since
        [cfg] = d.dynamic_configs(d.hosts()[0]["host_key"], doc["model_hash"], "tuned")
    assert r["config_source"] == "tuned"
    assert (r["executors"], r["threads"], r["chunk"]) == (
        cfg["executors"], cfg["threads"], cfg["chunk"])
    res = invoke(*base, "--batch", "4", "--untuned")
    assert json.loads(res.stdout)["results"][0]["config_source"] == "default"
    res = invoke(*base, "--batch", "2")
    assert json.loads(res.stdout)["results"][0]["config_source"] == "default"
    assert "no tuned config for policy batched at batch 2" in res.stderr
    res = invoke(*base, "--batch", "4", "--chunk", "64")
    assert json.loads(res.stdout)["results"][0]["config_source"] == "tuned+flags"


def test_a_config_the_engine_refuses_fails_alone(model, samples):
    s = read_samples(model, samples)
    opts = dg.DynTuneOptions(batch=4)
    m = dg._PassMeasure(model, s, opts, 1, None)
    good = {"executors": 1, "threads": 1, "chunk": 64}
    bad = {"executors": 1, "threads": 1, "chunk": 8192}  # above the engine's largest chunk
    got = m.batch([good, bad])
    assert [o.status for o in got] == [OK, ERROR]
    assert "chunk" in got[1].note


def test_op_threads_are_climbed_at_the_observed_row_counts(model, samples, tmp_path):
    from conftest import FINGERPRINT
    from hwtune.tuners.context import TuneContext
    if len(allowed_cpus()) < 2:
        pytest.skip("needs 2 CPUs for a 2-thread team")
    s = read_samples(model, samples)
    with DynamicEngine(model, s, DynConfig(batch=4, chunk=8, threads=2)) as e:
        hist = e.histogram()
    rows = sorted({r for by in hist.values() for r in by})
    assert rows and max(rows) <= 8
    g = dg.rows_graph(model, 8, [op.name for op in model.graph.ops])
    assert all(g.shapes[t.name][0] == 8 for t in g.inputs)
    with ResultsDB.open(tmp_path / "r.db") as d:
        host = d.upsert_host(FINGERPRINT)
        run = d.start_run(host, "tune", {})
        ctx = TuneContext(d, run, host, cpus=allowed_cpus()[:2])
        op_threads, info, _ = dg._stage_op_threads(ctx, model, hist, 2)
        trials = d.trials(host, tuner="op-threads")
    assert info["trials"] > 0 and trials
    # every climbed workload is one of F's ops at a row count the pass runs at
    from hwtune.engine.runner import workload_keys
    seen = set()
    for r in rows:
        seen |= set(workload_keys(dg.rows_graph(model, r, [n for n in hist if r in hist[n]])))
    assert {t["subject"] for t in trials} <= seen
    assert all(set(by) <= set(rows) and all(1 <= t <= 2 for t in by.values())
               for by in op_threads.values())


def test_bad_tuning_input_is_one_error_line(samples, tmp_path):
    db = str(tmp_path / "r.db")
    for args, needle in ((["--batch", "0"], "--batch"), (["--policy", "greedy"], "--policy"),
                         (["--only", "sweep"], "--only"), (["--budget", "0"], "--budget")):
        res = invoke("tune-graph", MODEL, *SMALL, "--inputs", samples, *args, "--db", db)
        assert one_error_line(res) and needle in res.stderr, (args, res.output)
    res = invoke("tune-graph", MODEL, *SMALL, "--db", db)
    assert one_error_line(res) and "--inputs" in res.stderr, res.output
    lstm = os.path.join(ROOT, "configs", "models", "lstm_small.json")
    res = invoke("tune-graph", lstm, "--batch", "4", "--db", db)
    assert one_error_line(res) and "dynamic models" in res.stderr, res.output


def test_ctrl_c_marks_the_run_interrupted_and_keeps_the_trials(model, samples, tmp_path):
    from conftest import FINGERPRINT
    from hwtune.errors import Interrupted
    s = read_samples(model, samples)
    cpus = allowed_cpus()[:1]

    def stop_at_final(stage, message):
        if stage == "final":
            raise KeyboardInterrupt

    with ResultsDB.open(tmp_path / "r.db") as d:
        host = d.upsert_host(FINGERPRINT)
        opts = dg.DynTuneOptions(batch=4, reps=1)
        with pytest.raises(Interrupted, match="interrupted"):
            dg.tune_dynamic(d, host, model, s, opts, inputs=samples, model_path=MODEL,
                            cpus=cpus, progress=stop_at_final)
        [run] = [r for r in d.runs(host, "tune")]
        assert run["status"] == "interrupted"
        kept = d.trials(host, tuner=dg.TUNER)
        assert len(kept) == len(dg.candidates(1, 3))
        assert not d.dynamic_configs(host, model_hash(model))
        doc = dg.tune_dynamic(d, host, model, s, opts, inputs=samples, model_path=MODEL,
                              cpus=cpus)
    assert doc["stages"]["executors"]["measured"] == 0
    assert doc["stages"]["executors"]["reused"] == len(kept)
