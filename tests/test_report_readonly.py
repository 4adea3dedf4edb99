"""`hwtune report` (and `hwtune db export`) only read: on a database of
every older schema version they show what it holds (the copy they read is
upgraded in memory) and leave the file byte-identical, so an older hwtune
still opens it."""

import hashlib
import json
import subprocess
import sys

import pytest

from hwtune.db import ResultsDB, migrations

from conftest import FINGERPRINT, schema_at

OLDER = [v for v, _, _ in migrations.MIGRATIONS if v < migrations.LATEST_VERSION]


def _old_db(path, version):
    """A database written at `version` (the migrations of that release, which
    are never edited) holding a tuning of one model."""
    with schema_at(version):
        with ResultsDB.open(path) as d:
            assert d.schema_version == version
            host = d.upsert_host(FINGERPRINT)
            run = d.start_run(host, "tune", {"model": "tiny.json"})
            d.add_fact(run, "tune_summary", {
                "model": "tiny", "graph_hash": "ab" * 32, "speedup": 1.25,
                "default": {"median_s": 0.005, "mad_s": 0.0001},
                "tuned": {"median_s": 0.004, "mad_s": 0.0001, "label": "tuned"}})
            d.finish_run(run, "complete")
    return host


def _state(path):
    """The file's bytes, and nothing pending beside it: a read-only SQLite
    reader of a WAL database may leave an empty -wal (and its -shm index)
    in a writable directory, which holds no change."""
    wal = path.parent / (path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("version", OLDER)
def test_report_and_export_leave_an_older_database_byte_identical(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    host = _old_db(path, version)
    before = _state(path)
    proc = subprocess.run([sys.executable, "-m", "hwtune.cli.main", "report", "--json",
                           "--host", host, "--db", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [m["model"] for m in doc["models"]] == ["tiny"]
    assert doc["models"][0]["speedup"] == 1.25
    out = tmp_path / "records.jsonl"
    proc = subprocess.run([sys.executable, "-m", "hwtune.cli.main", "db", "export", "-o",
                           str(out), "--db", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    out.unlink()
    assert _state(path) == before
    with ResultsDB.open_snapshot(path) as d:  # still readable, still the old version on disk
        assert d.schema_version == migrations.LATEST_VERSION
    import sqlite3
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert con.execute("PRAGMA user_version").fetchone()[0] == version
    con.close()
