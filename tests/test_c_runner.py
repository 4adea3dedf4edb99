"""The stand-alone C runner (engine/standalone/, installed as
hwtune/_lib/hwtune-run): it rebuilds the graph `hwtune run` stored, picks the
stored engine config (tuned > user for a host; the newest without one),
and times it without Python; every error is one line on stderr, exit 2."""

import json
import os
import re
import sqlite3
import subprocess

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.db import ResultsDB
from hwtune.native._lib import _find

ROOT = os.path.join(os.path.dirname(__file__), "..")
RUNNER = _find().parent / "hwtune-run"
LATENCY = re.compile(r"^latency: median (\d+\.\d+) ms, min (\d+\.\d+) ms, (\d+\.\d+) runs/s "
                     r"\((\d+) iterations, (\d+) warmup\)$")

# Two independent matmul chains (as in test_cli_run): work for 2 executors.
TINY = {
    "format_version": 1, "name": "two-chains", "seed": 7,
    "inputs": [{"name": "x", "shape": [16, 32]}],
    "params": [{"name": "w1", "shape": [32, 32]}, {"name": "w2", "shape": [32, 32]},
               {"name": "w3", "shape": [32, 16]}, {"name": "w4", "shape": [32, 16]},
               {"name": "b", "shape": [16], "init": "ones"}],
    "ops": [{"name": "h1", "op": "matmul", "inputs": ["x", "w1"]},
            {"name": "h2", "op": "matmul", "inputs": ["x", "w2"]},
            {"name": "y1", "op": "matmul", "inputs": ["h1", "w3", "b"]},
            {"name": "y2", "op": "matmul", "inputs": ["h2", "w4"]}],
    "outputs": ["y1", "y2"],
}


@pytest.fixture(scope="module", autouse=True)
def runner_built():
    if not RUNNER.exists():
        pytest.fail(f"{RUNNER} is missing: the build must include "
                    "engine/standalone/standalone.cmake")


def hwtune_run(db, model, *args):
    res = CliRunner().invoke(cli, ["run", str(model), "--db", str(db), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["graph_hash"]


def c_run(*args):
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def assert_timed(proc, iterations, warmup=3):
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    m = LATENCY.match(lines[1])
    assert m, lines[1]
    median, lo, rate = (float(m.group(i)) for i in (1, 2, 3))
    assert 0 < lo <= median
    # rate is printed to 0.01, median to 0.0001 ms: a median of a few us is
    # itself only known to a few percent.
    assert rate == pytest.approx(1e3 / median, rel=max(0.01, 0.6e-4 / median), abs=0.01)
    assert (int(m.group(4)), int(m.group(5))) == (iterations, warmup)
    return lines[0]


def one_line_error(proc, pattern):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hwtune-run: error: "), proc.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    db = tmp_path / "results.db"
    return db, hwtune_run(db, path, "--iterations", "2")


def test_default_config_with_notice(tiny):
    db, key = tiny
    proc = c_run("--db", db, "--graph", key[:10], "--iterations", 7)
    head = assert_timed(proc, 7)
    assert head.startswith(f"graph {key[:12]} (two-chains): 4 ops; config default: 1 x ")
    assert head.endswith(", sequential, unpinned")
    notice = proc.stderr.splitlines()
    assert len(notice) == 1 and "no tuned or user engine config" in notice[0]
    assert "--executors/--threads/--scheduler" in notice[0]


def save_user_config(db):
    """`hwtune run --save` of tiny.json at 2 x 1, critical-path: a user
    config. Returns the host it is stored for."""
    hwtune_run(db, db.parent / "tiny.json", "--executors", "2", "--threads", "1",
               "--scheduler", "critical-path", "--save", "--iterations", "2")
    with ResultsDB.open(db) as d:
        return d.hosts()[0]["host_key"]


def test_stored_configs_tuned_beats_user(tiny):
    db, key = tiny
    host = save_user_config(db)
    proc = c_run("--db", db, "--graph", key, "--host", host, "--iterations", 3, "--warmup", 1)
    assert assert_timed(proc, 3, 1).endswith("config user: 2 x 1, critical-path, pinned")
    assert proc.stderr == ""
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=2, threads_per_executor=1,
                            scheduler="shared-queue", pin=False, source="tuned",
                            op_threads={"h1": 1})
    for extra in (["--host", host], []):  # with the host: tuned first; without: newest
        proc = c_run("--db", db, "--graph", key, "--iterations", 3, *extra)
        assert assert_timed(proc, 3).endswith("config tuned: 2 x 1, shared-queue, unpinned")
    one_line_error(c_run("--db", db, "--graph", key, "--host", host, "--threads", 99999),
                   r"--threads 99999")
    # A config naming an op the graph lacks is refused, not ignored.
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=1, threads_per_executor=1,
                            scheduler="sequential", pin=False, source="tuned",
                            op_threads={"nope": 1})
    one_line_error(c_run("--db", db, "--graph", key, "--host", host),
                   r'op_threads names unknown op "nope"')


def test_flags_override(tiny):
    db, key = tiny
    proc = c_run("--db", db, "--graph", key, "--executors", 2, "--threads", 1,
                 "--scheduler", "shared-queue", "--iterations", 4)
    assert assert_timed(proc, 4).endswith("config default: 2 x 1, shared-queue, unpinned")
    assert proc.stderr == ""  # flags chosen: no notice


@pytest.mark.parametrize("model, sets", [
    ("lstm_small", []),                 # 240 ops: matmuls and lstm cells
    ("resnet18", ["--set", "image=32"]),  # conv (string/pair attrs), pools, batch-norm
])
def test_bundled_models(tmp_path, model, sets):
    db = tmp_path / "results.db"
    key = hwtune_run(db, os.path.join(ROOT, "configs", "models", model + ".json"),
                     "--iterations", "1", "--warmup", "0", *sets)
    proc = c_run("--db", db, "--graph", key[:16], "--iterations", 3, "--warmup", 1)
    assert assert_timed(proc, 3, 1).startswith(f"graph {key[:12]} (")


def test_errors(tiny, tmp_path):
    db, key = tiny
    one_line_error(c_run("--db", db, "--graph", "ffffffff"), r"unknown graph ffffffff")
    one_line_error(c_run("--db", tmp_path / "no" / "such.db", "--graph", key),
                   r"cannot open .*such\.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    one_line_error(c_run("--db", other, "--graph", key), r"is a SQLite database but not hwtune's")
    one_line_error(c_run("--db", db, "--graph", "XYZ"), r"invalid --graph XYZ")
    one_line_error(c_run("--db", db, "--graph", key, "--iterations", 0), r"--iterations 0")
    one_line_error(c_run("--db", db, "--graph", key, "--scheduler", "fifo"), r"--scheduler fifo")
    one_line_error(c_run("--db", db, "--graph", key, "--bogus", 1), r"unknown option --bogus")
    one_line_error(c_run("--db", db), r"--db and --graph are required")


def _set_lowered(db, key, text):
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE graphs SET lowered_json = ? WHERE graph_hash = ?", [text, key])
    conn.close()


def test_corrupt_rows(tiny):
    db, key = tiny
    good = sqlite3.connect(db).execute(
        "SELECT lowered_json FROM graphs WHERE graph_hash = ?", [key]).fetchone()[0]
    _set_lowered(db, key, '{"tensors": [1,]}')
    one_line_error(c_run("--db", db, "--graph", key), r"corrupt lowered_json: offset 15: ")
    doc = json.loads(good)
    doc["ops"][0]["inputs"] = [0, 99]
    _set_lowered(db, key, json.dumps(doc))
    one_line_error(c_run("--db", db, "--graph", key), r"ops\[0\]\.inputs: bad tensor id 99")
    doc = json.loads(good)
    doc["ops"][1]["outputs"] = doc["ops"][0]["outputs"]  # two producers
    _set_lowered(db, key, json.dumps(doc))
    one_line_error(c_run("--db", db, "--graph", key), r"lowered_json: ops\[1\]: ")
    _set_lowered(db, key, None)
    one_line_error(c_run("--db", db, "--graph", key), r"no lowered form")
    _set_lowered(db, key, good)
    assert_timed(c_run("--db", db, "--graph", key, "--iterations", 2), 2)


def test_v4_config_corun_costs_candidates_and_own_lowered_graph(tiny):
    """Schema v4: a 'corun' config with op costs and thread-count candidates
    whose names refer to the config's own lowered graph (here: w1 goes
    through a relu first, which the engine folds: it is a param-only op)."""
    from hwtune.engine.lowered import lowered_doc
    from hwtune.graph.model import load_model
    db, key = tiny
    variant = json.loads(json.dumps(TINY))
    variant["ops"].insert(0, {"name": "w1r", "op": "relu", "inputs": ["w1"]})
    variant["ops"][1]["inputs"] = ["x", "w1r"]
    doc = lowered_doc(load_model(variant))
    with ResultsDB.open(db) as d:
        host = d.hosts()[0]["host_key"]
        d.put_engine_config(host, key, executors=2, threads_per_executor=1, scheduler="corun",
                            pin=True, source="tuned", op_cost={"h1": 2e-5, "w1r": 1e-6},
                            op_candidates={"h1": [[2, 1e-5], [1, 2e-5]], "y2": [[1, 1e-5]]},
                            op_threads={"w1r": 1}, lowered=doc)
    proc = c_run("--db", db, "--graph", key, "--host", host, "--iterations", 5)
    head = assert_timed(proc, 5)
    assert head == (f"graph {key[:12]} (two-chains): 5 ops (1 folded) from the config's "
                    f"lowered graph; config tuned: 2 x 1, corun, pinned"), head
    # names of the stored graph's ops only: the config's graph has no such op
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=2, threads_per_executor=1, scheduler="corun",
                            pin=True, source="tuned", op_candidates={"nope": [[1, 1e-5]]},
                            lowered=doc)
    one_line_error(c_run("--db", db, "--graph", key, "--host", host),
                   r'op_candidates names unknown op "nope"')
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=2, threads_per_executor=1, scheduler="corun",
                            pin=True, source="tuned", op_candidates={"h1": [[0, 1e-5]]})
    one_line_error(c_run("--db", db, "--graph", key, "--host", host),
                   r"op_candidates\['h1'\]: candidate \[0, 1e-05\]: each is \[threads 1\.\.2")
    # the flag form (over a valid stored config)
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=1, threads_per_executor=1,
                            scheduler="sequential", pin=False, source="tuned")
    proc = c_run("--db", db, "--graph", key, "--scheduler", "corun", "--executors", 2,
                 "--threads", 1, "--iterations", 2)
    assert proc.returncode == 0 and ", corun, " in proc.stdout, proc.stderr


def test_scheduler_names_come_from_the_engine_table(tiny):
    """The runner lists and accepts exactly the names of the engine's
    scheduler table; a stored name it lacks (written by a newer hwtune: the
    schema no longer lists names) is one line naming the way out."""
    from hwtune.native.sched import schedulers
    db, key = tiny
    helped = c_run("--help")
    assert helped.returncode == 0
    for name, row in schedulers().items():
        assert f"    {name}" in helped.stdout and row.summary in helped.stdout
    one_line_error(c_run("--db", db, "--graph", key, "--scheduler", "critical_path"),
                   r"invalid --scheduler critical_path: choose one of sequential, shared-queue")
    with ResultsDB.open(db) as d:
        host = d.hosts()[0]["host_key"]
        d.put_engine_config(host, key, executors=1, threads_per_executor=1,
                            scheduler="sequential", pin=False, source="tuned")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE engine_configs SET scheduler = 'from-the-future'")
    conn.commit()
    conn.close()
    one_line_error(c_run("--db", db, "--graph", key, "--host", host),
                   r"names scheduler 'from-the-future', unknown to this hwtune .*pass --scheduler")
    proc = c_run("--db", db, "--graph", key, "--host", host, "--scheduler", "sequential",
                 "--iterations", 2)
    assert proc.returncode == 0 and ", sequential, " in proc.stdout, proc.stderr


def test_scheduler_flag_takes_its_own_pinning_default(tiny):
    # A stored pin was measured for the stored scheduler: --scheduler
    # naming another starts from that one's default in both runners.
    db, key = tiny
    with ResultsDB.open(db) as d:
        host = d.hosts()[0]["host_key"]
        d.put_engine_config(host, key, executors=2, threads_per_executor=1,
                            scheduler="critical-path", pin=False, source="tuned")
    proc = c_run("--db", db, "--graph", key, "--host", host, "--iterations", 3)
    assert assert_timed(proc, 3).endswith("config tuned: 2 x 1, critical-path, unpinned")
    proc = c_run("--db", db, "--graph", key, "--host", host, "--iterations", 3,
                 "--scheduler", "corun")
    assert assert_timed(proc, 3).endswith("2 x 1, corun, pinned")
    ran = CliRunner().invoke(cli, ["run", str(db.parent / "tiny.json"), "--db", str(db),
                                   "--json", "--iterations", "2", "--scheduler", "corun"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["config"]["pin"] is True


def test_runs_from_an_exported_config_without_the_database(tiny):
    """hwtune-run --config: the records file of `hwtune db export` is enough;
    the config chosen is the one the database run chooses."""
    db, key = tiny
    host = save_user_config(db)
    with ResultsDB.open(db) as d:
        d.put_engine_config(host, key, executors=2, threads_per_executor=1,
                            scheduler="shared-queue", pin=False, source="tuned",
                            op_threads={"h1": 1})
    records = db.parent / "records.jsonl"
    res = CliRunner().invoke(cli, ["db", "export", "-o", str(records), "--db", str(db)])
    assert res.exit_code == 0, res.output
    want = assert_timed(c_run("--db", db, "--graph", key, "--host", host, "--iterations", 3), 3)
    os.unlink(db)
    for extra in (["--host", host], ["--graph", key[:8]], []):
        proc = c_run("--config", records, "--iterations", 3, *extra)
        assert assert_timed(proc, 3) == want
        assert want.endswith("config tuned: 2 x 1, shared-queue, unpinned")
    lines = records.read_text().splitlines()
    bad = db.parent / "bad.jsonl"
    for text, pattern in ((lines[:-1], "no end record: the file is truncated"),
                          (lines[1:], "not an hwtune records file"),
                          ([lines[0].replace('"version":1', '"version":9')] + lines[1:],
                           "written by a newer hwtune"),
                          ([x for x in lines if '"record":"graph"' not in x],
                           "but not the graph"),
                          ([x for x in lines if '"record":"config"' not in x],
                           "holds no tuned or user engine config")):
        bad.write_text("\n".join(text) + "\n")
        one_line_error(c_run("--config", bad), pattern)
    one_line_error(c_run("--config", records, "--graph", "0" * 12), "unknown graph 0{12}")
    one_line_error(c_run("--config", records, "--host", "nope"), "--host nope is not a host")
    one_line_error(c_run("--config", db.parent / "missing.jsonl"), "cannot read --config")
    one_line_error(c_run("--config", records, "--db", db), "alternatives")
