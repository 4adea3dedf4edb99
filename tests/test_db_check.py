"""Stored rows are data from outside: a corrupt JSON column is reported
with its table, key and column and how to repair it, `hwtune db check`
lists every such row and `--fix` repairs or drops it; a report only reads,
so it works on a database in a read-only directory."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.db import ResultsDB
from hwtune.db.columns import CorruptRowError

TINY = {"name": "tiny", "inputs": [{"name": "x", "shape": [4, 8]}],
        "params": [{"name": "w", "shape": [8, 8]}],
        "ops": [{"name": "y", "op": "matmul", "inputs": ["x", "w"]}], "outputs": ["y"]}


@pytest.fixture
def stored(tmp_path):
    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    db = tmp_path / "results.db"
    res = CliRunner().invoke(cli, ["run", str(model), "--db", str(db), "--save",
                                   "--iterations", "1", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    return model, db


def _sql(db, statement):
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(statement)
    conn.close()


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def test_a_corrupt_column_names_its_row_and_the_repair(stored):
    model, db = stored
    _sql(db, "UPDATE engine_configs SET op_threads_json = '{bad' WHERE source = 'user'")
    res = invoke("run", model, "--db", db, "--iterations", "1")
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert line.startswith(f"error: corrupt row in {db}: engine_configs id=")
    assert ": op_threads_json: not valid JSON" in line and "hwtune db check --fix" in line
    with ResultsDB.open(db) as handle, pytest.raises(CorruptRowError) as err:
        handle.engine_config(handle.hosts()[0]["host_key"],
                             handle._query("SELECT graph_hash FROM graphs")[0]["graph_hash"],
                             "user")
    assert err.value.table == "engine_configs" and err.value.column == "op_threads_json"


def test_db_check_lists_fixes_and_is_clean_after(stored):
    model, db = stored
    _sql(db, "UPDATE runs SET options_json = '[1' WHERE run_id = 1")
    _sql(db, "UPDATE graphs SET lowered_json = 'x'")
    _sql(db, "UPDATE engine_configs SET op_cost_json = '{\"y\": -1}' WHERE source = 'user'")
    res = invoke("db", "check", "--db", db)
    assert res.exit_code == 1, res.output
    out = res.stdout
    assert "3 corrupt rows of" in out
    assert "runs run_id=1: options_json: not valid JSON" in out
    assert "--fix: set options_json to {} (the options are a description)" in out
    assert "lowered_json: not valid JSON" in out and "--fix: set lowered_json to NULL" in out
    assert "config: the stored engine config" not in out  # named by the row, not the run
    assert "op_cost['y']: cost must be seconds >= 0, got -1" in out
    assert "--fix: drop the row" in out
    doc = json.loads(invoke("db", "check", "--db", db, "--json").stdout)
    assert doc["ok"] is False and len(doc["problems"]) == 3
    before = sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]
    res = invoke("db", "check", "--db", db, "--fix")
    assert res.exit_code == 0 and "fixed: 3 change(s) committed" in res.stdout
    assert invoke("db", "check", "--db", db).exit_code == 0
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == before  # reset, not dropped
    assert conn.execute("SELECT options_json FROM runs WHERE run_id = 1").fetchone()[0] == "{}"
    assert conn.execute("SELECT count(*) FROM engine_configs WHERE source = 'user'"
                        ).fetchone()[0] == 0
    conn.close()
    # and hwtune runs again, storing what --fix dropped or emptied
    assert invoke("run", model, "--db", db, "--iterations", "1").exit_code == 0


def test_dropping_a_graph_drops_its_configs(stored):
    model, db = stored
    _sql(db, "UPDATE graphs SET expanded_json = '{\"ops\": 3}'")
    res = invoke("db", "check", "--db", db, "--fix")
    assert res.exit_code == 0, res.output
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM graphs").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM engine_configs").fetchone()[0] == 0
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


def test_db_check_never_creates_a_database(tmp_path):
    res = invoke("db", "check", "--db", tmp_path / "none.db")
    assert res.exit_code == 2 and "no results database at" in res.stderr
    assert not (tmp_path / "none.db").exists()


def _as_nobody():
    if os.geteuid() != 0:
        return None  # chmod alone makes the directory read-only for this user
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("root without setpriv: cannot drop to a user a directory mode binds")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_report_and_db_check_in_a_read_only_directory(stored, tmp_path):
    model, db = stored
    res = invoke("tune-graph", model, "--db", db, "--only", "sweep", "--reps", "1")
    assert res.exit_code == 0, res.output
    import tempfile
    from pathlib import Path
    top = Path(tempfile.mkdtemp(prefix="hwtune-ro-"))  # reachable by another user
    os.chmod(top, 0o755)
    ro = top / "ro"
    ro.mkdir()
    shutil.copy(db, ro / "results.db")
    os.chmod(ro / "results.db", 0o644)
    os.chmod(ro, 0o555)
    prefix = _as_nobody() or []
    try:
        for args in (["report", "--format", "markdown"], ["db", "check"]):
            p = subprocess.run(prefix + [sys.executable, "-m", "hwtune.cli.main", *args, "--db",
                                         str(ro / "results.db")],
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr
        assert "# hwtune report" in p.stdout or "ok:" in p.stdout
        assert sorted(os.listdir(ro)) == ["results.db"]  # nothing created beside it
    finally:
        os.chmod(ro, 0o755)
        shutil.rmtree(top)


def test_read_only_open_of_an_old_schema_says_what_to_do(stored):
    model, db = stored
    _sql(db, "PRAGMA user_version = 4")
    from hwtune.errors import DatabaseError
    with pytest.raises(DatabaseError, match="has schema version 4; this hwtune reads"):
        ResultsDB.open_readonly(db)
