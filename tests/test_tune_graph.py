"""`hwtune tune-graph` end to end on shrunk bundled models: the tuned config
is stored, picked up by `hwtune run`, never slower than the default in the
run's own interleaved comparison, resumable, and bad input is one line."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import sigint_default

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "configs", "models")
LSTM = [os.path.join(MODELS, "lstm_small.json"), "--set", "seq=3", "--set", "hidden=32",
        "--set", "batch=4", "--set", "layers=2"]
PATHNET = [os.path.join(MODELS, "pathnet_small.json"), "--set", "batch=1", "--set", "image=8",
           "--set", "channels=8", "--set", "modules=2", "--set", "layers=2"]


def hwtune(*args, db, check=True, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"hwtune {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def rows(db, sql, args=()):
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


@pytest.fixture
def db(tmp_path):
    return tmp_path / "results.db"


def _seconds(match) -> float:
    value, unit = match
    return float(value) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def uses(out) -> str:
    """The config source `hwtune run` must report after this tuning: the
    verdict's tuned config, or the default (then nothing is stored as tuned)."""
    return "default" if out["verdict"]["uses"] == "default" else "tuned"


def test_tune_lstm_then_run_uses_tuned_config(db):
    out = json.loads(hwtune("tune-graph", *LSTM, "--reps", "2", "--json", db=db).stdout)
    assert out["default"]["median_s"] > 0
    v = out["verdict"]
    # One verdict: "tuned" is what is stored and what run uses, or nothing.
    if v["uses"] == "default":
        assert out["tuned"] is None and v["tuned"] is None
    else:
        assert out["tuned"]["median_s"] > 0 and v["tuned"]["median_s"] == out["tuned"]["median_s"]
        # The default is always a candidate of the final interleaved comparison.
        assert out["tuned"]["median_s"] <= out["default"]["median_s"]
    assert out["speedup"] >= 1.0
    assert out["why"] and out["stages"]["sweep"]["trials"] >= 1
    # the sweep's line names its winner first, with its pinning, then the rest fastest first
    (sweep,) = [w for w in out["why"] if w.startswith("sweep: ")]
    figures = [_seconds(m) for m in re.findall(r"(\d+(?:\.\d+)?) (µs|ms|s)\b", sweep)]
    assert " was fastest of " in sweep and figures == sorted(figures), sweep
    (status,), = rows(db, "SELECT status FROM runs WHERE kind = 'tune'")
    assert status == "complete"
    assert rows(db, "SELECT count(*) FROM engine_configs WHERE source = 'tuned'")[0][0] == \
        (uses(out) == "tuned")
    assert rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'executor-sweep'")[0][0] >= 1
    ran = json.loads(hwtune("run", *LSTM, "--iterations", "2", "--check", "--json", db=db).stdout)
    assert ran["config_source"] == uses(out)
    assert ran["check"]["ok"]
    # the terminal summary says it once, and ends with what to do next
    text = hwtune("tune-graph", *LSTM, "--reps", "2", "--only", "sweep", db=db).stdout
    lines = text.splitlines()
    assert sum(ln.startswith("tuned:") for ln in lines) == 1
    assert lines[-1].startswith("next:      hwtune ")


def test_tune_cnn_tunes_convs_and_reuses_them(db):
    out = json.loads(hwtune("tune-graph", *PATHNET, "--reps", "2", "--only", "conv",
                            "--json", db=db).stdout)
    conv = out["stages"]["conv"]
    assert conv["trials"] >= 1
    n_trials = rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'conv'")[0][0]
    assert n_trials >= 1
    assert rows(db, "SELECT count(*) FROM tuning_trials WHERE status NOT IN "
                    "('ok','error','wrong_answer','timeout','skipped')")[0][0] == 0
    # A second tuning measures no CONV workload again.
    again = json.loads(hwtune("tune-graph", *PATHNET, "--reps", "2", "--only", "conv",
                              "--json", db=db).stdout)
    assert rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'conv'")[0][0] == n_trials
    assert again["stages"]["conv"]["measured"] == 0
    ran = json.loads(hwtune("run", *PATHNET, "--iterations", "2", "--check", "--json",
                            db=db).stdout)
    assert ran["config_source"] == uses(again) and ran["check"]["ok"]


def test_interrupt_keeps_trials_and_rerun_resumes(db):
    cmd = [sys.executable, "-m", "hwtune.cli.main", "tune-graph", *PATHNET, "--reps", "3",
           "--only", "conv", "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    # Wait for the first stored CONV trial, then press Ctrl-C.
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120 and proc.poll() is None:
        try:
            if rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'conv'")[0][0] >= 2:
                break
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("tuning finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("error: interrupted")
    assert all(line.startswith("[") for line in lines[:-1])  # progress lines only
    kept = rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'conv'")[0][0]
    assert kept >= 2
    assert rows(db, "SELECT status FROM runs WHERE kind = 'tune'")[0][0] == "interrupted"
    out = json.loads(hwtune("tune-graph", *PATHNET, "--reps", "3", "--only", "conv", "--json",
                            db=db).stdout)
    assert out["stages"]["conv"]["measured"] < out["stages"]["conv"]["trials"] or \
        out["stages"]["conv"]["reused"] > 0


@pytest.mark.parametrize("args, message", [
    (["--only", "nope"], "invalid --only"),
    (["--budget", "0"], "invalid --budget"),
    (["--trials", "0"], "invalid --trials"),
    (["--search", "random-walk"], "invalid --search"),
    (["--strategy", "4"], "invalid --strategy"),
])
def test_bad_options_are_one_line_errors(db, args, message):
    proc = hwtune("tune-graph", *LSTM, *args, db=db, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


def test_bad_model_is_one_line_error(db, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "ops": [')
    proc = hwtune("tune-graph", str(bad), db=db, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_stale_and_foreign_configs(db):
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.graph import load_model

    path, *sets = PATHNET
    overrides = {s.split("=")[0]: int(s.split("=")[1]) for s in sets[1::2]}
    graph = load_model(path, overrides)
    with ResultsDB.open(str(db)) as d:
        host = d.upsert_host(machine.fingerprint())
        ghash = d.put_graph(graph.to_json())
        d._conn.execute("INSERT INTO hosts (host_key, fingerprint_json, first_seen, last_seen) "
                        "VALUES ('other-host', '{}', 'x', 'x')")
        d._conn.commit()
        d.put_engine_config("other-host", ghash, source="tuned", executors=2,
                            threads_per_executor=1, scheduler="critical-path", pin=True)
    # Foreign: another host's tuned config is never used here.
    ran = json.loads(hwtune("run", *PATHNET, "--iterations", "1", "--json", db=db).stdout)
    assert ran["config_source"] == "default"
    # Stale: CONV knobs that no longer fit fall back with a notice.
    conv = next(op.name for op in graph.ops if op.op == "conv2d")
    with ResultsDB.open(str(db)) as d:
        d.put_engine_config(host, ghash, source="tuned", executors=1, threads_per_executor=1,
                            scheduler="sequential", pin=True,
                            op_params={conv: {"layout": "NCHWc", "ic_bn": 7, "oc_bn": 5,
                                              "reg_n": 3, "unroll_ker": True}})
    proc = hwtune("run", *PATHNET, "--iterations", "1", "--check", "--json", db=db)
    assert "default CONV parameters" in proc.stderr
    assert json.loads(proc.stdout)["check"]["ok"]


def test_plan_prints_and_stops(db):
    proc = hwtune("tune-graph", *PATHNET, "--plan", "--budget", "5", db=db)
    assert "total:" in proc.stdout and "of the 5 s budget" in proc.stdout
    assert "probe: the default config runs in" in proc.stdout
    assert rows(db, "SELECT count(*) FROM runs WHERE kind = 'tune'")[0][0] == 0
    assert rows(db, "SELECT count(*) FROM tuning_trials")[0][0] == 0
    doc = json.loads(hwtune("tune-graph", *PATHNET, "--plan", "--json", db=db).stdout)
    assert doc["items"] and doc["latency_s"] > 0 and doc["budget_s"] is None


def test_budget_cuts_are_listed_and_a_bigger_budget_finishes_them(db):
    # An exhaustive CONV grid cannot fit in 4 s: the plan cuts it.
    first = hwtune("tune-graph", *PATHNET, "--reps", "2", "--search", "grid", "--budget", "4",
                   "--json", db=db)
    out = json.loads(first.stdout)
    # progress lines go to stderr with --json too, plan first
    assert first.stderr.startswith("[plan]") and "[final]" in first.stderr
    assert out["plan"]["budget_s"] == 4 and out["speedup_ci"]["low"] <= out["speedup"]
    assert out["cuts"] and out["resume_s"] > 0
    assert all(c["resume_s"] >= 0 and c["reason"] for c in out["cuts"])
    cut_conv = {c["key"] for c in out["cuts"] if c["stage"] == "conv"}
    assert cut_conv  # the grid was cut
    # a cut workload is not stored as tuned: the rerun resumes it
    assert rows(db, "SELECT count(*) FROM tuned_subjects WHERE tuner = 'conv'")[0][0] == 0
    # under load the 4 s may end before the grid's first trial: what the first
    # run measured is what the second must reuse
    kept = rows(db, "SELECT count(*) FROM tuning_trials WHERE tuner = 'conv'")[0][0]
    second = json.loads(hwtune("tune-graph", *PATHNET, "--reps", "2", "--search", "grid",
                               "--json", db=db).stdout)
    assert not [c for c in second["cuts"] if c["stage"] == "conv"]
    assert (second["stages"]["conv"]["reused"] > 0) == (kept > 0)  # first run's trials kept
    _never_slower(db, second, had_stored=out["verdict"]["uses"] != "default")


def _never_slower(db, out, had_stored):
    """The stored config of a re-tune is the old one, or one that beat it
    by a paired interval above 1.0 in this run (kept in the run's facts).
    Without a stored config before (the first tuning kept the default),
    nothing is replaced."""
    run = out["run_id"]
    facts = {k: json.loads(v) for k, v in rows(
        db, "SELECT key, value_json FROM run_facts WHERE run_id = ?", (run,))}
    labels = [c["label"] for c in out["candidates"]]
    if out["kept_stored"] or not had_stored:
        assert "replaced_config" not in facts
        assert out["kept_stored"] == (out["verdict"]["uses"] == "stored")
        return
    replaced = facts.get("replaced_config")
    assert replaced is not None, labels
    if replaced["ratio"] is not None:
        assert replaced["ratio"]["low"] > 1.0


def test_retune_measures_the_stored_config_and_never_stores_a_slower_one(db):
    first = json.loads(hwtune("tune-graph", *LSTM, "--reps", "2", "--json", db=db).stdout)
    before = rows(db, "SELECT id, created_at FROM engine_configs WHERE source = 'tuned'")
    assert len(before) == (first["verdict"]["uses"] != "default")
    out = json.loads(hwtune("tune-graph", *LSTM, "--reps", "2", "--json", db=db).stdout)
    labels = [c["label"] for c in out["candidates"]]
    # the stored config ran in the final comparison (as itself, or as the
    # new candidate that equals it)
    if first["tuned"] is not None:
        assert "stored" in labels or any(c["config"] == first["tuned"]["config"]
                                         for c in out["candidates"])
    _never_slower(db, out, had_stored=bool(before))
    if out["kept_stored"]:
        assert rows(db, "SELECT id, created_at FROM engine_configs WHERE source = 'tuned'") \
            == before
    if out["verdict"]["uses"] == "default":  # nothing named tuned is left
        assert rows(db, "SELECT count(*) FROM engine_configs WHERE source = 'tuned'")[0][0] == 0


def test_a_rerun_plans_cut_workloads_at_the_trial_times_measured_before(db):
    from statistics import median

    from hwtune.db.timestamps import parse

    conv = [*PATHNET, "--reps", "2", "--search", "grid", "--only", "conv"]
    # An exhaustive CONV grid (~300 trials) cannot fit in 3 s: both workloads are cut.
    first = json.loads(hwtune("tune-graph", *conv, "--budget", "3", "--json", db=db).stdout)
    assert {c["stage"] for c in first["cuts"]} == {"conv"}
    plan = json.loads(hwtune("tune-graph", *conv, "--plan", "--json", db=db).stdout)
    measured = [i for i in plan["items"] if i["measured_run"] == first["run_id"]]
    assert measured
    for item in measured:
        # The median gap between the first run's stored trials of the workload.
        stamps = [parse(t).timestamp() for (t,) in rows(
            db, "SELECT created_at FROM tuning_trials WHERE run_id = ? AND subject = ? "
                "AND tuner = 'conv' AND status != 'skipped' ORDER BY id",
            (first["run_id"], item["name"]))]
        assert item["trial_s"] == pytest.approx(median(b - a for a, b in zip(stamps,
                                                                             stamps[1:])))
    # A budget the measured plan says is enough (with room for load) finishes them.
    budget = 2 * plan["total_cost_s"] + 5
    second = json.loads(hwtune("tune-graph", *conv, "--budget", f"{budget:.1f}", "--json",
                               db=db).stdout)
    assert not second["cuts"]
    assert rows(db, "SELECT count(*) FROM tuned_subjects WHERE tuner = 'conv'")[0][0] == 2


def test_tune_dilated_asymmetric_and_transposed_convs(db, tmp_path):
    """The conv forms of ONNX import through tune-graph: dilated and
    asymmetrically padded conv2d are tuned on the NCHW[x]c template like any
    other (their workload keys carry the extra attributes), conv_transpose2d
    stays NCHW, and the tuned config runs and checks."""
    doc = {
        "name": "conv-forms", "seed": 1,
        "inputs": [{"name": "x", "shape": [1, 8, 10, 10]}],
        "params": [{"name": "w1", "shape": [8, 8, 3, 3]}, {"name": "w2", "shape": [8, 8, 2, 2]},
                   {"name": "w3", "shape": [8, 4, 4, 4]}, {"name": "b3", "shape": [4]}],
        "ops": [
            {"name": "dil", "op": "conv2d", "inputs": ["x", "w1"],
             "attrs": {"dilation": 2, "padding": 2}},
            {"name": "r", "op": "relu", "inputs": ["dil"]},
            {"name": "same", "op": "conv2d", "inputs": ["r", "w2"], "attrs": {"padding_end": 1}},
            {"name": "pool", "op": "pool2d", "inputs": ["same"],
             "attrs": {"mode": "max", "kernel": 3, "stride": 2, "padding_end": 1}},
            {"name": "up", "op": "conv_transpose2d", "inputs": ["pool", "w3", "b3"],
             "attrs": {"stride": 2, "padding": 1}},
        ],
        "outputs": ["up"],
    }
    model = tmp_path / "forms.json"
    model.write_text(json.dumps(doc))
    out = json.loads(hwtune("tune-graph", str(model), "--reps", "2", "--only", "conv",
                            "--json", db=db).stdout)
    assert out["stages"]["conv"]["trials"] >= 2
    keys = {k for (k,) in rows(db, "SELECT DISTINCT subject FROM tuning_trials "
                                   "WHERE tuner = 'conv'")}
    assert any('"dilation"' in k for k in keys) and any('"padding_end"' in k for k in keys)
    ran = json.loads(hwtune("run", str(model), "--iterations", "2", "--check", "--json",
                            db=db).stdout)
    assert ran["config_source"] == uses(out) and ran["check"]["ok"]
