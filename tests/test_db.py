"""results.db: initialisation, migrations, refusal of files that are not
ours, concurrency and round-trips."""

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import threading

import pytest

from hwtune import __version__
from hwtune.db import APPLICATION_ID, SCHEMA_VERSION, ResultsDB, resolve_path
from hwtune.db import migrations
from hwtune.errors import DatabaseError, SchemaTooNewError, UsageError

FP = {
    "cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2", "sockets": 1,
    "physical_cores": 4, "logical_cpus": 8, "numa_nodes": 1,
    "isa": {"avx2": True}, "volatile": {"cpu_mhz": 3000.0},
}

MEAS = dict(bench="gemm", op="sgemm", params={"m": 64, "n": 64, "k": 64},
            kernel_variant="avx2", threads=2, executors=1, pinned=True,
            samples=[1.5e-3, 1.25e-3, 1.75e-3], median_s=1.5e-3, mad_s=0.25e-3,
            rel_spread=0.33, value=12.5, unit="GFLOP/s")


@pytest.fixture
def dbfile(tmp_path):
    return tmp_path / "results.db"


def test_resolve_path_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HWTUNE_DB", raising=False)
    (tmp_path / "results.db").touch()  # the nearest results.db up the tree
    assert resolve_path() == tmp_path / "results.db"
    monkeypatch.setenv("HWTUNE_DB", str(tmp_path / "env.db"))
    assert resolve_path() == tmp_path / "env.db"
    assert resolve_path("arg.db") == tmp_path / "arg.db"


def test_fresh_init_marks_file_as_hwtune(dbfile):
    with ResultsDB.open(dbfile) as d:
        assert d.path == dbfile
        assert d.schema_version == SCHEMA_VERSION
    conn = sqlite3.connect(dbfile)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(conn.execute("SELECT key, value FROM hwtune_meta"))
    assert meta["application"] == "hwtune" and meta["created_by"] == __version__
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"hosts", "runs", "measurements", "run_facts", "hwtune_migrations"} <= tables
    conn.close()


def test_empty_file_is_initialised(dbfile):
    dbfile.write_bytes(b"")
    with ResultsDB.open(dbfile) as d:
        assert d.schema_version == SCHEMA_VERSION


def test_migrations_recorded_and_idempotent(dbfile):
    with ResultsDB.open(dbfile) as d:
        first = d.applied_migrations()
        hk = d.upsert_host(FP)
        d.start_run(hk, "scan", {})
    assert [m["version"] for m in first] == [v for v, _, _ in migrations.MIGRATIONS]
    with ResultsDB.open(dbfile) as d:
        assert d.applied_migrations() == first
        assert len(d.hosts()) == 1
        assert d.schema_version == SCHEMA_VERSION


def test_pending_migration_applied_on_reopen(dbfile, monkeypatch):
    with ResultsDB.open(dbfile) as d:
        d.upsert_host(FP)

    def add_column(db):
        db.execute("ALTER TABLE hosts ADD COLUMN extra TEXT")

    future = SCHEMA_VERSION + 1
    monkeypatch.setattr(migrations, "MIGRATIONS",
                        migrations.MIGRATIONS + [(future, "add hosts.extra", add_column)])
    monkeypatch.setattr(migrations, "LATEST_VERSION", future)
    monkeypatch.setattr("hwtune.db.connect.LATEST_VERSION", future)
    with ResultsDB.open(dbfile) as d:
        assert d.schema_version == future
        assert [m["name"] for m in d.applied_migrations()][-1] == "add hosts.extra"
        assert "extra" in d.hosts()[0]  # old row kept, new column present


def test_newer_schema_refused(dbfile):
    ResultsDB.open(dbfile).close()
    conn = sqlite3.connect(dbfile)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.commit()
    conn.close()
    before = dbfile.read_bytes()
    with pytest.raises(SchemaTooNewError) as err:
        ResultsDB.open(dbfile)
    msg = str(err.value)
    assert str(dbfile) in msg and f"schema {SCHEMA_VERSION + 5} > {SCHEMA_VERSION}" in msg
    assert "upgrade hwtune" in msg and "\n" not in msg
    assert dbfile.read_bytes() == before


@pytest.mark.parametrize("setup", [
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes VALUES (1, 'x');",
    "PRAGMA application_id = 1234;",
    "PRAGMA user_version = 3;",
])
def test_foreign_sqlite_untouched(dbfile, setup):
    conn = sqlite3.connect(dbfile)
    conn.executescript(setup)
    conn.commit()
    conn.close()
    before = dbfile.read_bytes()
    with pytest.raises(DatabaseError) as err:
        ResultsDB.open(dbfile)
    assert not isinstance(err.value, SchemaTooNewError)
    msg = str(err.value)
    assert str(dbfile) in msg and ("not hwtune" in msg or "another application" in msg)
    assert dbfile.read_bytes() == before
    assert not (dbfile.parent / (dbfile.name + "-wal")).exists()


def test_garbage_file_refused(dbfile):
    dbfile.write_bytes(os.urandom(4096))
    before = dbfile.read_bytes()
    with pytest.raises(DatabaseError, match="is not a SQLite database"):
        ResultsDB.open(dbfile)
    assert dbfile.read_bytes() == before


def test_corrupt_sqlite_refused(dbfile):
    with ResultsDB.open(dbfile) as d:
        hk = d.upsert_host(FP)
        run = d.start_run(hk, "scan", {})
        for _ in range(200):
            d.add_measurement(run, **MEAS)
    conn = sqlite3.connect(dbfile)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(dbfile.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[2 * page + 8: 4 * page] = os.urandom(2 * page - 8)  # garble b-tree pages
    dbfile.write_bytes(bytes(data))
    with pytest.raises(DatabaseError, match="corrupt"):
        ResultsDB.open(dbfile)


def test_missing_or_unusable_directory(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("a regular file, not a directory")
    with pytest.raises(DatabaseError, match="does not exist") as err:
        ResultsDB.open(blocker / "sub" / "results.db")
    assert str(blocker / "sub" / "results.db") in str(err.value)
    with pytest.raises(DatabaseError, match="not a directory"):
        ResultsDB.open(blocker / "results.db")
    with pytest.raises(DatabaseError, match="is a directory"):
        ResultsDB.open(tmp_path)


def _open_without_override(path):
    """Open path in a child process that obeys permission bits. Root bypasses
    them (CAP_DAC_OVERRIDE), so as root the child drops that capability."""
    code = (
        "import sys\n"
        "from hwtune.db import ResultsDB\n"
        "from hwtune.errors import DatabaseError\n"
        "try:\n"
        f"    ResultsDB.open({str(path)!r}).close()\n"
        "except DatabaseError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    proc = subprocess.run(prefix + [sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode not in (0, 3) and "setpriv" in proc.stderr:
        pytest.skip(f"cannot drop capabilities here: {proc.stderr.strip()}")
    return proc


def test_unwritable_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    ResultsDB.open(d / "results.db").close()
    d.chmod(0o555)  # file still writable, but -wal/-shm cannot be created
    try:
        proc = _open_without_override(d / "results.db")
        assert proc.returncode == 3, proc.stderr
        assert "is not writable" in proc.stdout and str(d) in proc.stdout
        proc = _open_without_override(d / "new.db")
        assert proc.returncode == 3 and "is not writable" in proc.stdout
        assert not (d / "new.db").exists()
    finally:
        d.chmod(0o755)


def test_read_only_file(dbfile):
    ResultsDB.open(dbfile).close()
    dbfile.chmod(0o444)
    before = dbfile.read_bytes()
    proc = _open_without_override(dbfile)
    assert proc.returncode == 3, proc.stderr
    assert "read-only" in proc.stdout and str(dbfile) in proc.stdout
    assert dbfile.read_bytes() == before


def test_failed_migration_leaves_database_unchanged(dbfile, monkeypatch):
    with ResultsDB.open(dbfile) as d:
        d.upsert_host(FP)

    def half_done(db):
        db.execute("CREATE TABLE half (x)")
        raise RuntimeError("migration bug")

    future = SCHEMA_VERSION + 1
    monkeypatch.setattr(migrations, "MIGRATIONS",
                        migrations.MIGRATIONS + [(future, "broken", half_done)])
    monkeypatch.setattr(migrations, "LATEST_VERSION", future)
    monkeypatch.setattr("hwtune.db.connect.LATEST_VERSION", future)
    with pytest.raises(RuntimeError, match="migration bug"):
        ResultsDB.open(dbfile)
    monkeypatch.undo()
    with ResultsDB.open(dbfile) as d:
        assert d.schema_version == SCHEMA_VERSION and len(d.hosts()) == 1
        assert "half" not in d._db.table_names()


def test_measurement_round_trip(db):
    hk = db.upsert_host(FP)
    run = db.start_run(hk, "scan", {"quick": True, "threads": [1, 2]})
    mid = db.add_measurement(run, **MEAS)
    skipped = db.add_measurement(run, **dict(MEAS, bench="blas_ref", kernel_variant="numpy-blas",
                                             samples=[], median_s=None, mad_s=None,
                                             rel_spread=float("nan"), value=None, pinned=None,
                                             status="skipped", note="no BLAS"))
    rows = db.measurements(run)
    assert [r["id"] for r in rows] == [mid, skipped]
    r = rows[0]
    for key in ("bench", "op", "params", "kernel_variant", "threads", "executors", "pinned",
                "samples", "median_s", "mad_s", "rel_spread", "value", "unit"):
        assert r[key] == MEAS[key], key
    assert r["n_samples"] == 3 and r["status"] == "ok" and r["host_key"] == hk
    assert r["hwtune_version"] == __version__ and r["created_at"].endswith("Z")
    s = rows[1]
    assert s["status"] == "skipped" and s["rel_spread"] is None and s["pinned"] is None
    assert db.measurements(run, bench="blas_ref") == [s]


def test_runs_facts_and_hosts(db):
    hk = db.upsert_host(FP)
    assert hk.startswith("intel-test-4c-")
    first_seen = db.host(hk)["first_seen"]
    assert db.upsert_host(dict(FP, volatile={"cpu_mhz": 1200.0})) == hk
    host = db.host(hk)
    assert host["first_seen"] == first_seen and host["fingerprint"]["volatile"]["cpu_mhz"] == 1200
    assert [h["host_key"] for h in db.hosts()] == [hk]

    assert db.last_run(hk) is None
    r1 = db.start_run(hk, "scan", {"quick": True})
    assert db.run(r1)["status"] == "running" and db.run(r1)["options"] == {"quick": True}
    db.add_fact(r1, "saturation_threads", 2)
    db.add_fact(r1, "warning", "noisy")
    db.add_fact(r1, "warning", "throttled")
    db.add_fact(r1, "best_corun", {"executors": 2, "threads": 1})
    db.finish_run(r1, "complete", note="ok")
    r2 = db.start_run(hk, "scan", {})
    db.finish_run(r2, "interrupted")
    assert db.last_run(hk)["run_id"] == r1
    assert db.last_run(hk, complete_only=False)["run_id"] == r2
    assert db.last_run(hk, kind="tune") is None
    assert db.facts(r1) == {"saturation_threads": 2, "warning": "throttled",
                            "best_corun": {"executors": 2, "threads": 1}}
    assert db.fact_history(r1, "warning") == ["noisy", "throttled"]
    run = db.run(r1)
    assert run["status"] == "complete" and run["note"] == "ok" and run["finished_at"]


def test_bad_arguments_are_usage_errors(db):
    hk = db.upsert_host(FP)
    with pytest.raises(UsageError, match="unknown host"):
        db.start_run("nope", "scan", {})
    with pytest.raises(UsageError, match="run kind"):
        db.start_run(hk, "bogus", {})
    run = db.start_run(hk, "scan", {})
    with pytest.raises(UsageError, match="no run 999"):
        db.add_measurement(999, **MEAS)
    with pytest.raises(UsageError, match="status"):
        db.add_measurement(run, **dict(MEAS, status="great"))
    with pytest.raises(UsageError, match="threads"):
        db.add_measurement(run, **dict(MEAS, threads=0))
    with pytest.raises(UsageError, match="samples"):
        db.add_measurement(run, **dict(MEAS, samples=[1.0, float("inf")]))
    with pytest.raises(UsageError, match="final run status"):
        db.finish_run(run, "running")
    assert db.measurements(run) == []


def test_orphaned_running_run_marked_interrupted(dbfile):
    # A child process starts a run and dies without finishing it.
    code = (
        "import sys; from hwtune.db import ResultsDB\n"
        f"d = ResultsDB.open({str(dbfile)!r})\n"
        f"hk = d.upsert_host({FP!r})\n"
        "print(d.start_run(hk, 'scan', {}), flush=True)\n"
        "import os; os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    dead_run = int(out.stdout)
    with ResultsDB.open(dbfile) as d:
        live_run = d.start_run(d.hosts()[0]["host_key"], "scan", {})
        with ResultsDB.open(dbfile) as d2:  # our own live run must stay 'running'
            assert d2.run(dead_run)["status"] == "interrupted"
            assert "exited" in d2.run(dead_run)["note"]
            assert d2.run(live_run)["status"] == "running"


def test_reused_pid_counts_as_dead(dbfile):
    with ResultsDB.open(dbfile) as d:
        run = d.start_run(d.upsert_host(FP), "scan", {})
    # Pretend the run started long before this (live) process did.
    conn = sqlite3.connect(dbfile)
    conn.execute("UPDATE runs SET started_at = '2000-01-01T00:00:00.000000Z' WHERE run_id = ?",
                 [run])
    conn.commit()
    conn.close()
    with ResultsDB.open(dbfile) as d:
        assert d.run(run)["status"] == "interrupted"


def _writer(path, n, barrier):
    barrier.wait()
    with ResultsDB.open(path) as d:
        hk = d.upsert_host(FP)
        run = d.start_run(hk, "scan", {"pid": os.getpid()})
        for i in range(n):
            d.add_measurement(run, **dict(MEAS, params={"i": i}))
        d.finish_run(run, "complete")


def test_concurrent_processes_create_and_write(dbfile):
    n_proc, n_rows = 4, 60
    # fork: fast start; no connection is open in this process at fork time.
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n_proc)
    procs = [ctx.Process(target=_writer, args=(str(dbfile), n_rows, barrier))
             for _ in range(n_proc)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * n_proc
    with ResultsDB.open(dbfile) as d:
        runs = d._query("SELECT run_id, status FROM runs")
        assert len(runs) == n_proc and all(r["status"] == "complete" for r in runs)
        for r in runs:
            assert sorted(m["params"]["i"] for m in d.measurements(r["run_id"])) == \
                list(range(n_rows))
        assert len(d.applied_migrations()) == len(migrations.MIGRATIONS)


def test_concurrent_threads_write(dbfile):
    ResultsDB.open(dbfile).close()
    barrier = threading.Barrier(3)
    errors = []

    def work():
        try:
            _writer(str(dbfile), 50, barrier)
        except Exception as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with ResultsDB.open(dbfile) as d:
        counts = d._query("SELECT count(*) AS n FROM measurements")[0]["n"]
        assert counts == 150


def test_committed_rows_survive_a_kill(dbfile):
    code = (
        "import os; from hwtune.db import ResultsDB\n"
        f"d = ResultsDB.open({str(dbfile)!r})\n"
        f"run = d.start_run(d.upsert_host({FP!r}), 'scan', {{}})\n"
        f"for i in range(5): d.add_measurement(run, **{MEAS!r})\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code])
    assert proc.returncode == -9
    with ResultsDB.open(dbfile) as d:
        run = d._query("SELECT run_id FROM runs")[0]["run_id"]
        assert len(d.measurements(run)) == 5
        assert d.run(run)["status"] == "interrupted"


def test_schema_has_documented_columns(db):
    cols = {t: [c.name for c in db._db[t].columns] for t in
            ("hosts", "runs", "measurements", "run_facts")}
    assert {"host_key", "cpu_model", "vendor", "isa_best", "sockets", "physical_cores",
            "logical_cpus", "numa_nodes", "fingerprint_json", "first_seen",
            "last_seen"} <= set(cols["hosts"])
    assert {"run_id", "host_key", "kind", "hwtune_version", "started_at", "finished_at",
            "status", "options_json", "note"} <= set(cols["runs"])
    assert {"id", "run_id", "host_key", "hwtune_version", "kernel_variant", "bench", "op",
            "params_json", "threads", "executors", "pinned", "n_samples", "samples_json",
            "median_s", "mad_s", "rel_spread", "value", "unit", "status", "note",
            "created_at"} <= set(cols["measurements"])
    hk = db.upsert_host(FP)
    insert = ("INSERT INTO runs (host_key, kind, hwtune_version, started_at, status)"
              " VALUES (?, 'scan', 'v', 't', ?)")
    db._conn.execute(insert, [hk, "failed"])
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # holds for any writer, e.g. C
        db._conn.execute(insert, [hk, "weird"])
    json.dumps(db.hosts())  # decoded rows are JSON-ready for --json output


def test_a_write_cut_off_after_begin_does_not_block_the_next(tmp_path):
    """Ctrl-C between BEGIN and the write's own handler leaves a transaction
    open; the next write (marking the run interrupted) still succeeds and
    nothing of the cut-off write was committed."""
    from hwtune import machine
    from hwtune.db import ResultsDB
    with ResultsDB.open(str(tmp_path / "r.db")) as db:
        host = db.upsert_host(machine.fingerprint())
        run = db.start_run(host, "tune", {})
        db._conn.execute("BEGIN IMMEDIATE")
        db._conn.execute("UPDATE runs SET note = 'half-written' WHERE run_id = ?", [run])
        db.finish_run(run, "interrupted")
        row = db.run(run)
        assert row["status"] == "interrupted" and row["note"] != "half-written"
