"""`hwtune run`: one-line usage errors with exit 2 before results.db is
touched; with the C engine present, real runs of small graphs under every
scheduler and layout that fits, --json, --trace, and what is stored."""

import importlib.util
import json

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.native.threads import allowed_cpus

from conftest import rows, write_model

NCPU = len(allowed_cpus())
HAVE_ENGINE = importlib.util.find_spec("hwtune.native.engine") is not None
needs_engine = pytest.mark.skipif(not HAVE_ENGINE, reason="C engine binding not in this build")

# Two independent matmul chains: something for a second executor to do.
TINY = {
    "format_version": 1, "name": "two-chains", "seed": 7,
    "inputs": [{"name": "x", "shape": [16, 32]}],
    "params": [{"name": "w1", "shape": [32, 32]}, {"name": "w2", "shape": [32, 32]},
               {"name": "w3", "shape": [32, 16]}, {"name": "w4", "shape": [32, 16]},
               {"name": "b", "shape": [16]}],
    "ops": [{"name": "h1", "op": "matmul", "inputs": ["x", "w1"]},
            {"name": "h2", "op": "matmul", "inputs": ["x", "w2"]},
            {"name": "y1", "op": "matmul", "inputs": ["h1", "w3", "b"]},
            {"name": "y2", "op": "matmul", "inputs": ["h2", "w4"]}],
    "outputs": ["y1", "y2"],
}


@pytest.fixture
def model(tmp_path):
    return write_model(tmp_path, TINY)


def invoke(*args):
    return CliRunner().invoke(cli, ["run", *map(str, args)], catch_exceptions=False)


def one_line_error(res, *needles):
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and res.stderr.strip().splitlines()[-1] == lines[0], res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_model(tmp_path):
    db = tmp_path / "r.db"
    one_line_error(invoke(tmp_path / "nope.json", "--db", db), "cannot read")
    assert not db.exists()


def test_malformed_model(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "ops": [}')
    one_line_error(invoke(bad, "--db", tmp_path / "r.db"), "malformed JSON")


def test_invalid_model_graph(tmp_path):
    doc = dict(TINY, ops=TINY["ops"] + [{"name": "z", "op": "matmul", "inputs": ["y1", "w9"]}])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    one_line_error(invoke(bad, "--db", tmp_path / "r.db"), "w9")


@pytest.mark.parametrize("args,needles", [
    (["--threads", NCPU + 1], ["--threads", f"may use {NCPU} CPU"]),
    (["--executors", NCPU + 1, "--threads", 1], ["--executors", "<= "]),
    (["--executors", 2, "--scheduler", "sequential"], ["--scheduler sequential"]),
    (["--threads", 0], ["--threads 0"]),
    (["--scheduler", "fifo"], ["--scheduler 'fifo'", "critical-path"]),
    (["--iterations", 0], ["--iterations 0"]),
    (["--warmup", -1], ["--warmup -1"]),
    (["--trace", "/nonexistent-dir/t.json"], ["--trace"]),
])
def test_impossible_settings_fail_before_the_db(model, tmp_path, args, needles):
    db = tmp_path / "r.db"
    one_line_error(invoke(model, "--db", db, *args), *needles)
    assert not db.exists()


def test_op_profiles_feed_critical_path_costs(model, tmp_path):
    """Profiles are keyed by workload: h1 and h2 (same shapes) share one."""
    from hwtune.db import ResultsDB
    from hwtune.engine.config import EngineConfig
    from hwtune.engine.runner import profiled_costs, store_op_profiles
    from hwtune.engine.trace import OpEvent
    from hwtune.graph import load_model
    graph = load_model(model)
    cfg = EngineConfig(executors=2, threads=1, scheduler="critical-path")
    runs = [[OpEvent("h1", "matmul", 0, 1, 0.0, 1e-3), OpEvent("h2", "matmul", 1, 1, 0.0, 3e-3),
             OpEvent("y1", "matmul", 0, 1, 3e-3, 5e-3)],
            [OpEvent("h1", "matmul", 0, 1, 0.0, 2e-3), OpEvent("h2", "matmul", 1, 1, 0.0, 2e-3),
             OpEvent("y1", "matmul", 0, 1, 3e-3, 4e-3)]]
    with ResultsDB.open(tmp_path / "r.db") as db:
        host = db.upsert_host({"cpu_model": "T", "logical_cpus": 2})
        assert store_op_profiles(db, host, graph, cfg, runs, None) == 2
        assert profiled_costs(db, host, graph, cfg) is None  # y2 never profiled
        runs[0].append(OpEvent("y2", "matmul", 1, 1, 3e-3, 3.5e-3))
        store_op_profiles(db, host, graph, cfg, runs[:1], None)
        costs = profiled_costs(db, host, graph, cfg)
        # h: median of 1, 3, 2, 2 ms; y1: the latest profile (run 0 alone) wins
        assert costs == pytest.approx({"h1": 2e-3, "h2": 2e-3, "y1": 2e-3, "y2": 0.5e-3})
        # another layout has no profiles yet
        assert profiled_costs(db, host, graph, EngineConfig(threads=2)) is None


@pytest.mark.skipif(HAVE_ENGINE, reason="the engine is present")
def test_without_engine_one_line(model, tmp_path):
    db = tmp_path / "r.db"
    one_line_error(invoke(model, "--db", db), "engine not available")
    assert not db.exists()


@needs_engine
def test_json_run_is_stored(model, tmp_path):
    db = tmp_path / "r.db"
    res = invoke(model, "--db", db, "--iterations", 5, "--warmup", 1, "--json")
    assert res.exit_code == 0, res.output + res.stderr
    out = json.loads(res.stdout)
    assert out["model"] == "two-chains" and out["ops"] == 4
    assert out["config_source"] == "default" and "default" in out["notice"]
    lat = out["latency_s"]
    assert len(lat["samples"]) == 5 and 0 < lat["min"] <= lat["median"] <= lat["max"]
    assert out["throughput"]["runs_per_s"] == pytest.approx(1 / lat["median"])
    flops = 2 * 16 * 32 * 32 * 2 + 2 * 16 * 32 * 16 * 2
    assert out["flops"] >= flops
    (run_id, kind, status), = rows(db, "SELECT run_id, kind, status FROM runs")
    assert (run_id, kind, status) == (out["run_id"], "run", "complete")
    (bench, op, params, n), = rows(db, "SELECT bench, op, params_json, n_samples "
                                       "FROM measurements")
    assert (bench, op, n) == ("graph", "two-chains", 5)
    assert json.loads(params)["graph_hash"] == out["graph_hash"]
    assert rows(db, "SELECT name, ops FROM graphs") == [("two-chains", 4)]


@needs_engine
def test_check_against_numpy(model, tmp_path):
    db = tmp_path / "r.db"
    res = invoke(model, "--db", db, "--iterations", 2, "--check", "--json")
    assert res.exit_code == 0, res.output + res.stderr
    c = json.loads(res.stdout)["check"]
    assert c["ok"] and c["rel"] <= c["tolerance"] and c["max_ref"] > 0
    assert json.loads(rows(db, "SELECT value_json FROM run_facts WHERE key = 'check'")[0][0]) == c


def test_check_flags_a_wrong_output(model):
    """The comparison itself: one wrong element is a mismatch."""
    from hwtune.engine.runner import check_outputs
    from hwtune.graph import load_model, run_reference
    graph = load_model(model)
    outs = {k: v.copy() for k, v in run_reference(graph).items()}
    assert check_outputs(outs, graph)["ok"]
    outs["y2"][3, 5] += 0.01 * abs(outs["y2"]).max()
    c = check_outputs(outs, graph)
    assert not c["ok"] and c["output"] == "y2" and c["rel"] == pytest.approx(0.01, rel=1e-3)
    outs["y2"][0, 0] = float("nan")
    assert not check_outputs(outs, graph)["ok"]


def test_check_matches_nan_and_infinities_the_reference_has_too(model, monkeypatch):
    """A NaN or infinity the model itself computes (an overflowing weight,
    found by benchmarks/fuzz_onnx.py) is in the reference too: the check
    compares the finite rest (it refused such a run: the fact was not
    storable as JSON). One on one side only is a mismatch, and its run
    fails the check with the one line that says so."""
    import numpy as np
    import hwtune.graph
    from hwtune.engine.runner import check_outputs
    from hwtune.graph import load_model, run_reference
    graph = load_model(model)
    ref = run_reference(graph)
    ref["y2"][0, :3] = [np.inf, -np.inf, np.nan]
    monkeypatch.setattr(hwtune.graph, "run_reference", lambda *a, **k: ref)
    outs = {k: v.copy() for k, v in ref.items()}
    c = check_outputs(outs, graph)
    assert c["ok"] and np.isfinite(c["max_ref"]), c
    outs["y2"][0, 0] = -np.inf
    assert not check_outputs(outs, graph)["ok"]
    outs["y2"][0, 0] = np.inf
    outs["y1"][1, 1] = np.nan
    c = check_outputs(outs, graph)
    assert not c["ok"] and c["output"] == "y1" and c["max_abs"] == np.inf


@needs_engine
def test_a_failed_check_with_an_infinite_error_is_stored_and_reported(model, tmp_path,
                                                                      monkeypatch):
    import hwtune.engine.runner as runner
    real = runner.check_outputs

    def nan_out(outputs, graph, inputs=None):
        outputs = {k: v.copy() for k, v in outputs.items()}
        outputs["y1"].reshape(-1)[0] = float("nan")
        return real(outputs, graph, inputs)
    monkeypatch.setattr(runner, "check_outputs", nan_out)
    db = tmp_path / "r.db"
    res = invoke(model, "--db", db, "--iterations", 1, "--check")
    assert res.exit_code == 1, res.output + res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith(
        "error: outputs differ from the numpy reference: max |engine - numpy| inf on y1"), \
        res.stderr
    stored = json.loads(rows(db, "SELECT value_json FROM run_facts WHERE key = 'check'")[0][0])
    assert stored["max_abs"] is None and stored["rel"] is None and not stored["ok"]


def test_check_measures_rounding_residue_against_the_largest_output(model, monkeypatch):
    """An output that is zero in exact arithmetic holds rounding residue
    (the key bias's gradient of a transformer block: numpy 7e-14, the engine
    3.5e-13): its relative error means nothing and must not fail the check;
    a small output that is a real value is still compared by its own scale."""
    from hwtune.engine.runner import ROUNDOFF_FLOOR, check_outputs
    from hwtune.graph import load_model, run_reference
    graph = load_model(model)
    ref = run_reference(graph)
    big = max(float(abs(v).max()) for v in ref.values())
    outs = {k: v.copy() for k, v in ref.items()}
    # y2 scaled to rounding residue in the reference, and 5x off in the engine
    residue = 1e-13 * big / float(abs(ref["y2"]).max())
    graph_ref = {**ref, "y2": ref["y2"] * residue}
    outs["y2"] = ref["y2"] * residue * 5

    import hwtune.graph
    monkeypatch.setattr(hwtune.graph, "run_reference", lambda *a, **k: graph_ref)

    def check(o):
        return check_outputs(o, graph)
    assert check(outs)["ok"]
    # a value 1e-4 of the largest is a value: 1% off is a mismatch
    graph_ref["y2"] = ref["y2"] * (100 * ROUNDOFF_FLOOR * big / float(abs(ref["y2"]).max()))
    outs["y2"] = graph_ref["y2"] * 1.01
    c = check(outs)
    assert not c["ok"] and c["output"] == "y2" and c["rel"] == pytest.approx(0.01, rel=1e-3)


@needs_engine
def test_trace_file_and_rows(model, tmp_path):
    db, trace = tmp_path / "r.db", tmp_path / "t.json"
    k = 2 if NCPU >= 2 else 1
    res = invoke(model, "--db", db, "--iterations", 3, "--executors", k, "--threads", 1,
                 "--scheduler", "critical-path" if k > 1 else "sequential", "--trace", trace)
    assert res.exit_code == 0, res.output + res.stderr
    assert "trace:" in res.stdout and "latency:" in res.stdout
    doc = json.loads(trace.read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in xs) == ["h1", "h2", "y1", "y2"]
    assert all(0 <= e["tid"] < k and e["dur"] >= 0 for e in xs)
    stored = rows(db, "SELECT op_name, executor, start_s <= end_s FROM run_traces")
    assert sorted(r[0] for r in stored) == ["h1", "h2", "y1", "y2"]
    assert all(r[2] for r in stored)


@needs_engine
def test_stored_user_config_is_used(model, tmp_path):
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.graph import load_model
    db = tmp_path / "r.db"
    with ResultsDB.open(db) as d:
        host = d.upsert_host(machine.fingerprint())
        h = d.put_graph(load_model(model).to_json())
        d.put_engine_config(host, h, executors=1, threads_per_executor=1,
                            scheduler="shared-queue", pin=False, source="user")
    res = invoke(model, "--db", db, "--iterations", 2, "--warmup", 0, "--json")
    assert res.exit_code == 0, res.output + res.stderr
    out = json.loads(res.stdout)
    assert out["config_source"] == "user" and out["notice"] is None
    assert out["config"]["scheduler"] == "shared-queue" and out["config"]["threads"] == 1


@needs_engine
def test_save_then_rerun_uses_it_and_trace_feeds_profiles(model, tmp_path):
    db = tmp_path / "r.db"
    res = invoke(model, "--db", db, "--iterations", 2, "--threads", 1, "--save",
                 "--trace", tmp_path / "t.json")
    assert res.exit_code == 0, res.output + res.stderr
    assert rows(db, "SELECT source, threads_per_executor FROM engine_configs") == [("user", 1)]
    # h1/h2 share a workload (same shapes), y1 (bias) and y2 differ: 3 keys
    prof = rows(db, "SELECT workload_key, n, median_s > 0 FROM op_profiles")
    assert len(prof) == 3 and all(r[2] for r in prof)
    assert sorted(r[1] for r in prof) == [5, 5, 10]
    res = invoke(model, "--db", db, "--iterations", 2, "--json")
    out = json.loads(res.stdout)
    assert out["config_source"] == "user" and out["config"]["threads"] == 1


LAYOUTS = [(s, k, t) for s in ("sequential", "shared-queue", "critical-path")
           for k in range(1, NCPU + 1) for t in range(1, NCPU // k + 1)
           if not (s == "sequential" and k > 1)]


@needs_engine
@pytest.mark.parametrize("sched,k,t", LAYOUTS)
def test_every_scheduler_and_layout_runs(model, tmp_path, sched, k, t):
    res = invoke(model, "--db", tmp_path / "r.db", "--iterations", 2, "--warmup", 1,
                 "--executors", k, "--threads", t, "--scheduler", sched, "--json")
    assert res.exit_code == 0, res.output + res.stderr
    cfg = json.loads(res.stdout)["config"]
    assert (cfg["scheduler"], cfg["executors"], cfg["threads"]) == (sched, k, t)


@needs_engine
def test_reps_markdown_and_a_list_of_thread_counts(model, tmp_path):
    """--reps is run's flag as everywhere else (--iterations stays an alias);
    --format markdown works for a static model; --threads 1,2 runs the model
    at each count (as scan --threads 1,2 measures each)."""
    db = tmp_path / "r.db"
    res = invoke(model, "--db", db, "--reps", 3, "--warmup", 0, "--format", "markdown")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("### hwtune run: two-chains") and "| latency | median" in \
        res.stdout and "over 3 runs" in res.stdout
    same = json.loads(invoke(model, "--db", db, "--iterations", 2, "--warmup", 0,
                             "--json").stdout)
    assert same["iterations"] == 2
    counts = [1, 2] if NCPU >= 2 else [1]
    res = invoke(model, "--db", db, "--reps", 2, "--warmup", 0,
                 "--threads", ",".join(map(str, counts)), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    runs = doc["runs"] if len(counts) > 1 else [doc]
    assert [r["config"]["threads"] for r in runs] == counts
    # the "no tuned config" note is said once, not once per count
    notes = [ln for ln in res.stderr.splitlines() if ln.startswith("note: no tuned")]
    assert len(notes) == 1, res.stderr
    one_line_error(invoke(model, "--db", db, "--threads", "1,2", "--trace", tmp_path / "t.json"),
                   "--threads")
