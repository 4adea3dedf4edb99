"""Fixtures shared by the test files: an in-memory results.db and a host in
it, a database of an older schema, read-only queries of a database file."""

import atexit
import json
import os
import shutil
import signal
import sqlite3
import tempfile
from contextlib import contextmanager

import pytest

from hwtune.db import ResultsDB, migrations

# A command run without --db in a folder with no results.db up the tree uses
# the per-user database (hwtune.db.locate): the tests' is a scratch one,
# never the user's own (subprocesses inherit it).
# Removed when this process exits (each xdist worker makes its own): 602 of
# them had piled up in /tmp from earlier runs.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="hwtune-test-xdg-")
atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], True)

# A made-up machine: tests that store rows need a host; nothing reads its values.
FINGERPRINT = {
    "cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2", "sockets": 1,
    "physical_cores": 4, "logical_cpus": 8, "numa_nodes": 1,
    "isa": {"avx2": True}, "volatile": {"cpu_mhz": 3000.0},
}


@pytest.fixture
def db():
    with ResultsDB.open(":memory:") as d:
        yield d


@pytest.fixture
def host(db):
    return db.upsert_host(FINGERPRINT)


@contextmanager
def schema_at(version: int):
    """Inside: hwtune knows the migrations up to `version` only, as the
    release that wrote that schema did (a released migration is never
    edited), so ResultsDB.open makes or keeps a database at that version."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", [x for x in migrations.MIGRATIONS if x[0] <= version])
        m.setattr(migrations, "LATEST_VERSION", version)
        m.setattr("hwtune.db.connect.LATEST_VERSION", version)
        yield


def rows(db, sql, *params):
    """The rows of a query on the database file db, opened read-only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def sigint_default():
    """Popen(preexec_fn=...) for tests that press Ctrl-C: a job started in
    the background by a non-interactive shell (a CI runner) inherits SIGINT
    ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tiny_matmul(name: str, seed: int) -> dict:
    """The smallest model a command measures: y = x (4x16) @ w (16x8)."""
    return {
        "format_version": 1, "name": name, "seed": seed,
        "inputs": [{"name": "x", "shape": [4, 16]}],
        "params": [{"name": "w", "shape": [16, 8]}],
        "ops": [{"name": "y", "op": "matmul", "inputs": ["x", "w"]}],
        "outputs": ["y"],
    }


def write_model(folder, doc, name: str = "tiny.json") -> str:
    """doc written as the model.json folder/name; its path."""
    path = folder / name
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture
def scratch_cache(tmp_path, monkeypatch):
    """HWTUNE_CACHE_DIR in the test's own folder: what one test's import
    caches, the next does not read (test files that import models use it
    for every test: `pytestmark = pytest.mark.usefixtures("scratch_cache")`)."""
    monkeypatch.setenv("HWTUNE_CACHE_DIR", str(tmp_path / "cache"))


def invoke(*args):
    """`hwtune ARGS` in this process (click's runner; exceptions propagate)."""
    from click.testing import CliRunner
    from hwtune.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line_error(res, *needles, code=2):
    """The one line `error: ...` an invoke() result printed, exiting with
    code, that holds each of needles."""
    assert res.exit_code == code, (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def run_engine(graph, feeds, **settings):
    """The C engine's outputs of graph with feeds (input name -> values)
    set; settings: NativeEngine's (executors, threads, scheduler, ...)."""
    from hwtune.engine.instance import NativeEngine
    with NativeEngine(graph, **settings) as eng:
        for name, value in feeds.items():
            eng.set_input(name, value)
        eng.run()
        return eng.outputs()
