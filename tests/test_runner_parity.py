"""Every check of the stand-alone C runner refuses what `hwtune run` refuses,
in the same words: the database's identity and schema, the CPU budget
(also under taskset), every stored config field and per-op value. Each
case corrupts one thing in a results.db that `hwtune run` wrote and runs
both; the rules come from one place (the C library's config check, the
migrations list), so the two messages share the reason verbatim."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.native._lib import _find
from hwtune.native.threads import allowed_cpus

RUNNER = _find().parent / "hwtune-run"
NCPU = len(allowed_cpus())

TINY = {
    "format_version": 1, "name": "parity", "seed": 1,
    "inputs": [{"name": "x", "shape": [8, 16]}],
    "params": [{"name": "w1", "shape": [16, 16]}, {"name": "w2", "shape": [16, 16]}],
    "ops": [{"name": "h1", "op": "matmul", "inputs": ["x", "w1"]},
            {"name": "h2", "op": "matmul", "inputs": ["x", "w2"]},
            {"name": "y", "op": "add", "inputs": ["h1", "h2"]}],
    "outputs": ["y"],
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A results.db with the tiny graph and a user config (1 x 1, sequential)."""
    d = tmp_path_factory.mktemp("parity")
    model = d / "tiny.json"
    model.write_text(json.dumps(TINY))
    db = d / "results.db"
    res = CliRunner().invoke(cli, ["run", str(model), "--db", str(db), "--executors", "1",
                                   "--threads", "1", "--save", "--iterations", "1",
                                   "--warmup", "0", "--json"])
    assert res.exit_code == 0, res.output
    return model, db, json.loads(res.stdout)["graph_hash"]


@pytest.fixture
def copy(stored, tmp_path):
    model, db, key = stored
    out = tmp_path / "results.db"
    src = sqlite3.connect(db)
    dst = sqlite3.connect(out)
    src.backup(dst)
    src.close()
    dst.close()
    return model, out, key


def _sql(db, *statements):
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA ignore_check_constraints = 1")
    with conn:
        for s in statements:
            conn.execute(s)
    conn.close()


def _affinity(cpus):
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


class _Result:
    def __init__(self, code, stdout, stderr):
        self.returncode, self.stdout, self.stderr = code, stdout, stderr


def _py(model, db, *flags, cpus=None):
    """`hwtune run`: in this process, or as a process of its own where the
    CPU affinity must differ."""
    args = ["run", str(model), "--db", str(db), "--iterations", "1", "--warmup", "0", *flags]
    if cpus is None:
        res = CliRunner().invoke(cli, args)
        return _Result(res.exit_code, res.stdout, res.stderr)
    return subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args], capture_output=True,
                          text=True, timeout=300, preexec_fn=_affinity(cpus))


def _c(db, key, *flags, cpus=None):
    return subprocess.run([str(RUNNER), "--db", str(db), "--graph", key, "--iterations", "1",
                           "--warmup", "0", *flags], capture_output=True, text=True, timeout=300,
                          preexec_fn=_affinity(cpus))


def _refused(proc, prefix):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("note:", "hwtune-run: "
                                                                          "notice:"))]
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    return lines[0]


def both_refuse(model, db, key, reason, *flags, cpus=None):
    py = _refused(_py(model, db, *flags, cpus=cpus), "error: ")
    c = _refused(_c(db, key, *flags, cpus=cpus), "hwtune-run: error: ")
    assert reason in py, py
    assert reason in c, c
    assert "internal error" not in py


CFG = "UPDATE engine_configs SET "


@pytest.mark.parametrize("statements, reason", [
    # the database
    (["PRAGMA application_id = 7"], "belongs to another application (application_id 0x00000007)"),
    (["PRAGMA user_version = 99"], "was written by a newer hwtune (schema 99 > "),
    (["DELETE FROM hwtune_meta"], "carries hwtune's id but has no hwtune_meta marker"),
    # every stored config field: range and enum
    ([CFG + "executors = 0"], "executors must be 1..64, got 0"),
    ([CFG + "executors = -5, scheduler = 'critical-path'"], "executors must be 1..64, got -5"),
    ([CFG + "threads_per_executor = -2"], "threads per executor must be 1..4096, got -2"),
    ([CFG + "scheduler = 'bogus'"], "names scheduler 'bogus', unknown to this hwtune (one of: "
                                    "sequential, shared-queue, critical-path, corun): pass "
                                    "--scheduler to override"),
    ([CFG + "pin = 7"], "pin must be 0 or 1, got 7"),
    ([CFG + "executors = 2, threads_per_executor = 1"],
     "the sequential scheduler runs one executor with all threads, got 2 executors"),
    # every JSON column it reads: per-op values under the config's own rules
    ([CFG + "op_threads_json = '{\"h1\": 2}'"],
     "op_threads['h1']: thread count must be an integer in 1..1 (the threads of one executor), "
     "got 2"),
    ([CFG + "op_threads_json = '{\"h1\": \"a\"}'"], "op_threads['h1']: must be a number"),
    ([CFG + "op_cost_json = '{\"h1\": -3}'"], "op_cost['h1']: cost must be seconds >= 0, got -3"),
    ([CFG + "op_priority_json = '{\"h1\": 1e400}'"],
     "op_priority['h1']: priority must be a finite number, got inf"),
    ([CFG + "op_candidates_json = '{\"h1\": [[0, 1e-5]]}'"],
     "op_candidates['h1']: candidate [0, 1e-05]: each is [threads 1..1"),
    ([CFG + "op_candidates_json = '{\"h1\": []}'"],
     "op_candidates['h1']: must be a non-empty list of [threads, seconds] pairs"),
    ([CFG + "op_candidates_json = '{\"h1\": [7]}'"],
     "op_candidates['h1']: each candidate is a [threads, seconds] pair"),
    ([CFG + "op_params_json = '{\"h1\": 1}'"],
     "op_params['h1']: must be an object of template parameters"),
])
def test_same_refusal(copy, statements, reason):
    model, db, key = copy
    _sql(db, *statements)
    both_refuse(model, db, key, reason)


@pytest.mark.parametrize("column", ["op_threads_json", "op_priority_json", "op_cost_json",
                                    "op_candidates_json", "op_params_json", "lowered_json"])
def test_corrupt_json_column_refused_by_both(copy, column):
    model, db, key = copy
    _sql(db, f"UPDATE engine_configs SET {column} = '{{\"h1\": [1,'")
    py = _refused(_py(model, db), "error: ")
    c = _refused(_c(db, key), "hwtune-run: error: ")
    name = column[:-len("_json")]
    assert column in py and "hwtune db check" in py, py
    assert name in c, c


def test_cpu_budget_of_a_stored_config(copy):
    model, db, key = copy
    _sql(db, CFG + f"executors = 2, threads_per_executor = {NCPU}, scheduler = 'critical-path'")
    both_refuse(model, db, key, f"{2 * NCPU} threads but this process may use {NCPU} CPU")


def test_cpu_budget_under_taskset(copy):
    """taskset -c 0: one CPU allowed, whatever the machine has."""
    model, db, key = copy
    first = {min(os.sched_getaffinity(0))}
    both_refuse(model, db, key, "invalid --executors 2 --threads 1: 2 threads but this process "
                "may use 1 CPU", "--executors", "2", "--threads", "1", "--scheduler",
                "critical-path", cpus=first)


def test_corun_workers_beyond_the_cpus(copy):
    model, db, key = copy
    _sql(db, CFG + f"executors = {NCPU + 1}, threads_per_executor = 1, scheduler = 'corun'")
    both_refuse(model, db, key, f"{NCPU + 1} threads but this process may use {NCPU} CPU")


def test_runner_reads_the_schema_range_from_the_migrations(copy):
    """The build reads the newest version from migrations.py: one past it is
    refused by both with the same numbers (the fixture's own, the newest, is
    accepted by both)."""
    from hwtune.db.migrations import LATEST_VERSION
    model, db, key = copy
    _sql(db, f"PRAGMA user_version = {LATEST_VERSION + 1}")
    both_refuse(model, db, key, f"(schema {LATEST_VERSION + 1} > {LATEST_VERSION})")


def test_graph_that_was_only_tuned_runs(tmp_path):
    """docs/tune.md runs hwtune-run right after tune-graph: the tuner stores
    the lowered graph too."""
    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    db = tmp_path / "results.db"
    res = CliRunner().invoke(cli, ["tune-graph", str(model), "--db", str(db), "--only", "sweep",
                                   "--reps", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    proc = _c(db, out["graph_hash"])
    assert proc.returncode == 0, proc.stderr
    # the config the tuning's verdict says `hwtune run` uses: tuned, or the
    # default when it was kept (nothing is then stored as tuned)
    uses = "default" if out["verdict"]["uses"] == "default" else "tuned"
    assert f"config {uses}" in proc.stdout


def test_corrupt_page_refused_by_both(copy):
    """A zeroed page: both vet the file with quick_check before reading it
    and report what SQLite found, on one line."""
    model, db, key = copy
    data = bytearray(db.read_bytes())
    data[4096 * 3:4096 * 4] = bytes(4096)
    db.write_bytes(bytes(data))
    py = _refused(_py(model, db), "error: ")
    c = _refused(_c(db, key), "hwtune-run: error: ")
    assert "corrupt" in py and "corrupt" in c
    if "quick_check:" in py:
        reason = py.split("quick_check: ", 1)[1].split(")")[0]
        assert reason in c, (py, c)
