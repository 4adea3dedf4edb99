"""ResultsDB: the one way hwtune reads and writes results.db.

Every write is its own committed transaction, so a crash or Ctrl-C loses at
most the measurement in flight. One ResultsDB per thread (sqlite3
connections are not shared across threads); any number per process or
across processes.
"""

import os
import socket
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import sqlite_utils

from hwtune import __version__
from hwtune.db import columns
from hwtune.db import connect as _connect
from hwtune.db import migrations
from hwtune.db.dynamic import DynamicStore
from hwtune.db.liveness import owner_alive
from hwtune.db.timestamps import parse as parse_time
from hwtune.db.timestamps import utc_now
from hwtune.db.values import dumps as _dumps
from hwtune.db.values import real as _real
from hwtune.errors import UsageError

# "dynamic": `hwtune run MODEL --inputs FILE` (its figures are dynamic_runs rows)
# "compare": `hwtune compare` (one measurement per side, the result as a fact)
RUN_KINDS = ("scan", "tune", "run", "check", "plan", "dynamic", "compare")
RUN_END_STATUSES = ("complete", "interrupted", "failed")
MEASUREMENT_STATUSES = ("ok", "noisy", "error", "skipped")
CONFIG_SOURCES = ("default", "tuned", "user")
# A trial that did not produce a usable time is kept, with why (schema v4).
TRIAL_STATUSES = ("ok", "error", "wrong_answer", "timeout", "skipped")


class ResultsDB(DynamicStore):
    """An open, vetted, migrated results.db."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self._conn = conn
        self._db = sqlite_utils.Database(conn, execute_plugins=False)
        self.path = path
        self._hostname = socket.gethostname()

    # -- opening ---------------------------------------------------------
    @classmethod
    def open(cls, path: Union[str, os.PathLike, None] = None) -> "ResultsDB":
        """Open (creating/upgrading if needed) the database at path,
        $HWTUNE_DB or ./results.db. Raises DatabaseError/SchemaTooNewError."""
        path = _connect.resolve_path(path)
        if _connect.check_location(path):
            _connect.vet_existing(path)  # read-only: never touches a foreign file
        return cls._migrated(_connect.connect(path), path, mark_orphans=True)

    @classmethod
    def open_readonly(cls, path: Union[str, os.PathLike, None] = None) -> "ResultsDB":
        """Open an existing, current database only to read it (a report):
        nothing is created, migrated or marked, so a file in a read-only
        directory (or on a read-only disk) works."""
        path = _connect.resolve_path(path)
        return cls(_connect.connect_readonly(path), path)

    @classmethod
    def open_snapshot(cls, path: Union[str, os.PathLike, None] = None) -> "ResultsDB":
        """Read an existing database of this or any older schema without
        writing to it: a current one through a read-only connection, an
        older one copied into memory and upgraded there. The file keeps its
        schema (an older hwtune still opens it) and its bytes (a report or an
        export measures and changes nothing)."""
        path = _connect.resolve_path(path)
        conn, version = _connect.connect_readonly_any(path)
        if version == migrations.LATEST_VERSION:
            return cls(conn, path)
        mem = sqlite3.connect(_connect.MEMORY, isolation_level=None)
        try:
            conn.backup(mem)
        except sqlite3.Error as exc:
            mem.close()
            raise _connect.translate(exc, path, "read") from None
        finally:
            conn.close()
        mem.execute("PRAGMA foreign_keys = ON")
        return cls._migrated(mem, path, mark_orphans=False)

    @classmethod
    def _migrated(cls, conn: sqlite3.Connection, path: Path, *,
                  mark_orphans: bool) -> "ResultsDB":
        """The database on conn brought to the latest schema (and, where this
        process may write, runs of killed processes marked interrupted);
        conn is closed when that fails."""
        self = cls(conn, path)
        try:
            self._migrate()
            if mark_orphans:
                self._mark_orphaned_runs()
        except BaseException:
            conn.close()
            raise
        return self

    @classmethod
    def open_for_reading(cls, path: Union[str, os.PathLike, None] = None) -> "ResultsDB":
        """open() where this process may write (an old schema is upgraded),
        open_readonly() where it may not."""
        resolved = _connect.resolve_path(path)
        if str(resolved) != _connect.MEMORY and resolved.is_file() and not (
                os.access(resolved, os.W_OK) and os.access(resolved.parent, os.W_OK | os.X_OK)):
            return cls.open_readonly(resolved)
        return cls.open(resolved)

    def _migrate(self) -> None:
        if self.schema_version == migrations.LATEST_VERSION:
            return
        with self._write("initialise"):
            # Re-vet under the write lock: another process may have created
            # or upgraded the file since we looked.
            current = _connect.classify(self._conn, self.path)
            migrations.apply(self._db, current, now=utc_now(), hwtune_version=__version__)

    def _mark_orphaned_runs(self) -> None:
        stale = [r for r in self._query(
            "SELECT run_id, pid, started_at FROM runs WHERE status = 'running' "
            "AND hostname = ?", [self._hostname])
            if not owner_alive(r["pid"], parse_time(r["started_at"]))]
        for r in stale:
            with self._write("update"):
                self._conn.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = ?, "
                    "note = coalesce(note, ?) WHERE run_id = ? AND status = 'running'",
                    [utc_now(), f"process {r['pid']} exited before finishing the run",
                     r["run_id"]])

    def _insert(self, doing: str, sql: str, values) -> int:
        """One INSERT in its own write transaction; the new row's id."""
        with self._write(doing):
            return self._conn.execute(sql, values).lastrowid

    @contextmanager
    def _write(self, doing: str):
        """One IMMEDIATE transaction: takes the write lock up front, so the
        busy timeout applies (a deferred read-then-write could fail at once)."""
        # A signal that lands between BEGIN and the try below leaves that
        # write's transaction open (nothing of it was committed): end it, or
        # this BEGIN fails and the interrupted run could not be marked.
        self._rollback()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _connect.translate(exc, self.path, doing) from None
        try:
            yield
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise _connect.translate(exc, self.path, doing) from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _query(self, sql: str, params=()) -> List[dict]:
        try:
            return list(self._db.query(sql, params))
        except sqlite3.Error as exc:
            raise _connect.translate(exc, self.path, "read") from None

    @property
    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def applied_migrations(self) -> List[dict]:
        return self._query(
            f"SELECT version, name, applied_at, hwtune_version FROM {migrations.MIGRATIONS_TABLE} "
            "ORDER BY version")

    # -- hosts -----------------------------------------------------------
    def upsert_host(self, fingerprint: dict) -> str:
        """Store/refresh a machine fingerprint; returns its host_key (always
        recomputed from the stable fields, never trusted from the dict)."""
        from hwtune.machine import host_key as compute_key

        key = compute_key(fingerprint)
        fingerprint = dict(fingerprint, host_key=key)
        now = utc_now()
        row = [key, fingerprint.get("cpu_model"), fingerprint.get("vendor"),
               fingerprint.get("isa_best"), fingerprint.get("sockets"),
               fingerprint.get("physical_cores"), fingerprint.get("logical_cpus"),
               fingerprint.get("numa_nodes"), _dumps(fingerprint, "fingerprint"), now, now]
        with self._write("write host to"):
            self._conn.execute(
                "INSERT INTO hosts (host_key, cpu_model, vendor, isa_best, sockets, "
                "physical_cores, logical_cpus, numa_nodes, fingerprint_json, first_seen, "
                "last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(host_key) DO UPDATE SET cpu_model = excluded.cpu_model, "
                "vendor = excluded.vendor, isa_best = excluded.isa_best, "
                "sockets = excluded.sockets, physical_cores = excluded.physical_cores, "
                "logical_cpus = excluded.logical_cpus, numa_nodes = excluded.numa_nodes, "
                "fingerprint_json = excluded.fingerprint_json, last_seen = excluded.last_seen",
                row)
        return key

    def _json(self, table: str, row: dict, column: str) -> Any:
        """A JSON column read back, checked (columns.CorruptRowError names
        the row and how to repair it)."""
        return columns.decode(table, row, column, self.path)

    def _host_row(self, row: dict) -> dict:
        row["fingerprint"] = self._json("hosts", row, "fingerprint_json")
        del row["fingerprint_json"]
        return row

    def host(self, host_key: str) -> Optional[dict]:
        rows = self._query("SELECT * FROM hosts WHERE host_key = ?", [host_key])
        return self._host_row(rows[0]) if rows else None

    def _require_host(self, host_key: str) -> None:
        """UsageError unless host_key is a stored host (rows point to it)."""
        if self.host(host_key) is None:
            raise UsageError(f"unknown host {host_key!r} in {self.path}: call upsert_host first")

    def hosts(self) -> List[dict]:
        return [self._host_row(r) for r in
                self._query("SELECT * FROM hosts ORDER BY last_seen DESC, host_key")]

    # -- runs ------------------------------------------------------------
    def start_run(self, host_key: str, kind: str, options: Optional[dict] = None) -> int:
        if kind not in RUN_KINDS:
            raise UsageError(f"unknown run kind {kind!r}: choose one of {', '.join(RUN_KINDS)}")
        self._require_host(host_key)
        return self._insert(
            "start a run in",
            "INSERT INTO runs (host_key, kind, hwtune_version, started_at, status, "
            "options_json, pid, hostname) VALUES (?, ?, ?, ?, 'running', ?, ?, ?)",
            [host_key, kind, __version__, utc_now(), _dumps(options or {}, "run options"),
             os.getpid(), self._hostname])

    def finish_run(self, run_id: int, status: str, note: Optional[str] = None) -> None:
        if status not in RUN_END_STATUSES:
            raise UsageError(
                f"invalid final run status {status!r}: choose one of {', '.join(RUN_END_STATUSES)}")
        self.run(run_id)  # UsageError if unknown
        with self._write("finish a run in"):
            self._conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, note = coalesce(?, note) "
                "WHERE run_id = ?", [status, utc_now(), note, run_id])

    def _run_row(self, row: dict) -> dict:
        row["options"] = self._json("runs", row, "options_json")
        del row["options_json"]
        return row

    def run(self, run_id: int) -> dict:
        rows = self._query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            raise UsageError(f"no run {run_id} in {self.path}")
        return self._run_row(rows[0])

    def last_run(self, host_key: str, kind: str = "scan",
                 complete_only: bool = True) -> Optional[dict]:
        sql = "SELECT * FROM runs WHERE host_key = ? AND kind = ?"
        if complete_only:
            sql += " AND status = 'complete'"
        rows = self._query(sql + " ORDER BY run_id DESC LIMIT 1", [host_key, kind])
        return self._run_row(rows[0]) if rows else None

    # -- measurements ----------------------------------------------------
    def add_measurement(self, run_id: int, *, bench: str, op: str, params: dict,
                        kernel_variant: str, threads: int, executors: int = 1,
                        pinned: Optional[bool] = None, samples: List[float],
                        median_s: Optional[float], mad_s: Optional[float],
                        rel_spread: Optional[float], value: Optional[float],
                        unit: Optional[str], status: str = "ok",
                        note: Optional[str] = None) -> int:
        """Insert one measurement, committed before returning its id.
        Non-finite statistics are stored as NULL (unknown)."""
        if status not in MEASUREMENT_STATUSES:
            raise UsageError(
                f"invalid measurement status {status!r}: choose one of "
                f"{', '.join(MEASUREMENT_STATUSES)}")
        if not isinstance(threads, int) or threads < 1:
            raise UsageError(f"threads must be an integer >= 1, got {threads!r}")
        if not isinstance(executors, int) or executors < 1:
            raise UsageError(f"executors must be an integer >= 1, got {executors!r}")
        run = self.run(run_id)
        samples = [float(s) for s in samples]
        row = [run_id, run["host_key"], __version__, kernel_variant, bench, op,
               _dumps(params or {}, "measurement params"), threads, executors,
               None if pinned is None else int(bool(pinned)), len(samples),
               _dumps(samples, "samples"), _real(median_s, "median_s"), _real(mad_s, "mad_s"),
               _real(rel_spread, "rel_spread"), _real(value, "value"), unit, status, note,
               utc_now()]
        return self._insert(
            "store a measurement in",
            "INSERT INTO measurements (run_id, host_key, hwtune_version, kernel_variant, "
            "bench, op, params_json, threads, executors, pinned, n_samples, samples_json, "
            "median_s, mad_s, rel_spread, value, unit, status, note, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

    def measurements(self, run_id: int, bench: Optional[str] = None) -> List[dict]:
        sql, params = "SELECT * FROM measurements WHERE run_id = ?", [run_id]
        if bench is not None:
            sql, params = sql + " AND bench = ?", params + [bench]
        out = []
        for row in self._query(sql + " ORDER BY id", params):
            row["params"] = self._json("measurements", row, "params_json")
            row["samples"] = self._json("measurements", row, "samples_json")
            del row["params_json"], row["samples_json"]
            row["pinned"] = None if row["pinned"] is None else bool(row["pinned"])
            out.append(row)
        return out

    # -- facts -----------------------------------------------------------
    def add_fact(self, run_id: int, key: str, value: Any) -> None:
        """Record a derived result; writing a key again keeps the old row
        (see fact_history) and makes the new value the current one."""
        self.run(run_id)
        encoded = _dumps(value, f"fact {key!r}")
        with self._write("store a fact in"):
            self._conn.execute(
                "INSERT INTO run_facts (run_id, key, value_json, created_at) VALUES (?, ?, ?, ?)",
                [run_id, key, encoded, utc_now()])

    def facts(self, run_id: int) -> Dict[str, Any]:
        """Latest value of every fact key of the run."""
        rows = self._query(
            "SELECT id, key, value_json FROM run_facts WHERE run_id = ? ORDER BY id", [run_id])
        return {r["key"]: self._json("run_facts", r, "value_json") for r in rows}

    def fact_history(self, run_id: int, key: str) -> List[Any]:
        """Every value written for one key, oldest first (e.g. all warnings)."""
        rows = self._query(
            "SELECT id, value_json FROM run_facts WHERE run_id = ? AND key = ? ORDER BY id",
            [run_id, key])
        return [self._json("run_facts", r, "value_json") for r in rows]

    # -- graphs (schema v2) ----------------------------------------------
    def put_graph(self, expanded_doc: dict) -> str:
        """Store an expanded model.json (Graph.to_json()) under its content
        hash; storing the same graph again is a no-op. Returns the hash."""
        from hwtune.db.keys import canonical_json, graph_hash

        if not isinstance(expanded_doc, dict) or not isinstance(expanded_doc.get("ops"), list):
            raise UsageError("put_graph needs an expanded model.json document with an ops list")
        key = graph_hash(expanded_doc)
        with self._write("store a graph in"):
            self._conn.execute(
                "INSERT OR IGNORE INTO graphs (graph_hash, name, ops, expanded_json, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [key, str(expanded_doc.get("name", "")), len(expanded_doc["ops"]),
                 canonical_json(expanded_doc), utc_now()])
        return key

    def put_lowered(self, graph_hash: str, doc: dict) -> None:
        """Store the lowered form (hwtune.engine.lowered.lowered_doc) of a
        stored graph, for the C runner; replaces any earlier one."""
        from hwtune.db.keys import canonical_json

        if not isinstance(doc, dict) or not isinstance(doc.get("tensors"), list) \
                or not isinstance(doc.get("ops"), list):
            raise UsageError("put_lowered needs a document with tensors and ops lists")
        with self._write("store a lowered graph in"):
            cur = self._conn.execute("UPDATE graphs SET lowered_json = ? WHERE graph_hash = ?",
                                     [canonical_json(doc), graph_hash])
            if cur.rowcount != 1:
                raise UsageError(f"unknown graph {graph_hash[:12]} in {self.path}: "
                                 "call put_graph first")

    def graph(self, graph_hash: str) -> Optional[dict]:
        rows = self._query("SELECT * FROM graphs WHERE graph_hash = ?", [graph_hash])
        if not rows:
            return None
        row = rows[0]
        row["expanded"] = self._json("graphs", row, "expanded_json")
        row["lowered"] = self._json("graphs", row, "lowered_json")
        del row["expanded_json"], row["lowered_json"]
        return row

    # -- engine configs --------------------------------------------------
    def put_engine_config(self, host_key: str, graph_hash: str, *, executors: int,
                          threads_per_executor: int, scheduler: str, pin: bool,
                          op_threads: Optional[dict] = None, op_params: Optional[dict] = None,
                          op_priority: Optional[dict] = None, op_cost: Optional[dict] = None,
                          op_candidates: Optional[dict] = None, lowered: Optional[dict] = None,
                          op_precision: Optional[dict] = None, source: str = "user") -> int:
        """Store the config of (host, graph, source), replacing the previous
        one of that source; returns its id (stable across replacements).
        scheduler must be a name of the engine's scheduler table (the schema
        does not list them since v6: this hwtune's table does)."""
        from hwtune.native import sched
        sched.lookup(scheduler)
        if source not in CONFIG_SOURCES:
            raise UsageError(
                f"unknown config source {source!r}: choose one of {', '.join(CONFIG_SOURCES)}")
        for name, v in (("executors", executors), ("threads_per_executor", threads_per_executor)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be an integer >= 1, got {v!r}")
        self._require_host(host_key)
        if self.graph(graph_hash) is None:
            raise UsageError(f"unknown graph {graph_hash[:12]} in {self.path}: call put_graph first")
        row = [host_key, graph_hash, executors, threads_per_executor, scheduler, int(bool(pin)),
               _dumps(op_threads or {}, "op_threads"), _dumps(op_params or {}, "op_params"),
               _dumps(op_priority or {}, "op_priority"), _dumps(op_cost or {}, "op_cost"),
               _dumps(op_candidates or {}, "op_candidates"),
               None if lowered is None else _dumps(lowered, "lowered"),
               _dumps(op_precision or {}, "op_precision"), source, __version__, utc_now()]
        with self._write("store an engine config in"):
            self._conn.execute(
                "INSERT INTO engine_configs (host_key, graph_hash, executors, "
                "threads_per_executor, scheduler, pin, op_threads_json, op_params_json, "
                "op_priority_json, op_cost_json, op_candidates_json, lowered_json, "
                "op_precision_json, source, hwtune_version, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(host_key, graph_hash, source) DO UPDATE SET "
                "executors = excluded.executors, "
                "threads_per_executor = excluded.threads_per_executor, "
                "scheduler = excluded.scheduler, pin = excluded.pin, "
                "op_threads_json = excluded.op_threads_json, "
                "op_params_json = excluded.op_params_json, "
                "op_priority_json = excluded.op_priority_json, "
                "op_cost_json = excluded.op_cost_json, "
                "op_candidates_json = excluded.op_candidates_json, "
                "lowered_json = excluded.lowered_json, "
                "op_precision_json = excluded.op_precision_json, "
                "hwtune_version = excluded.hwtune_version, created_at = excluded.created_at",
                row)
            return self._conn.execute(
                "SELECT id FROM engine_configs WHERE host_key = ? AND graph_hash = ? "
                "AND source = ?", [host_key, graph_hash, source]).fetchone()[0]

    def drop_engine_config(self, host_key: str, graph_hash: str, source: str) -> bool:
        """Remove the config of (host, graph, source) (op profiles measured
        under it keep their figures, without the link); True when one was
        there."""
        with self._write("remove an engine config from"):
            row = self._conn.execute(
                "SELECT id FROM engine_configs WHERE host_key = ? AND graph_hash = ? "
                "AND source = ?", [host_key, graph_hash, source]).fetchone()
            if row is None:
                return False
            self._conn.execute("UPDATE op_profiles SET config_id = NULL WHERE config_id = ?",
                               [row[0]])
            self._conn.execute("DELETE FROM engine_configs WHERE id = ?", [row[0]])
            return True

    def _config_row(self, row: dict) -> dict:
        for key in ("op_threads", "op_params", "op_priority", "op_cost", "op_candidates",
                    "lowered", "op_precision"):
            row[key] = self._json("engine_configs", row, f"{key}_json")
        for key in ("op_threads", "op_params", "op_priority", "op_cost", "op_candidates",
                    "lowered", "op_precision"):
            del row[f"{key}_json"]
        if row["pin"] in (0, 1):  # anything else stays, for the config check to refuse
            row["pin"] = bool(row["pin"])
        return row

    def engine_config(self, host_key: str, graph_hash: str, source: str) -> Optional[dict]:
        rows = self._query(
            "SELECT * FROM engine_configs WHERE host_key = ? AND graph_hash = ? AND source = ?",
            [host_key, graph_hash, source])
        return self._config_row(rows[0]) if rows else None

    # -- op profiles -----------------------------------------------------
    def add_op_profile(self, host_key: str, workload_key: str, op_type: str, *, threads: int,
                       executors: int = 1, median_s: Optional[float], mad_s: Optional[float],
                       n: int, config_id: Optional[int] = None) -> int:
        for name, v in (("threads", threads), ("executors", executors)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be an integer >= 1, got {v!r}")
        self._require_host(host_key)
        return self._insert(
            "store an op profile in",
            "INSERT INTO op_profiles (host_key, workload_key, op_type, threads, executors, "
            "median_s, mad_s, n, config_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [host_key, workload_key, op_type, threads, executors,
             _real(median_s, "median_s"), _real(mad_s, "mad_s"), int(n), config_id,
             utc_now()])

    def op_profile(self, host_key: str, workload_key: str, threads: int,
                   executors: int = 1) -> Optional[dict]:
        """The latest profile of one workload at one thread/executor count."""
        rows = self._query(
            "SELECT * FROM op_profiles WHERE host_key = ? AND workload_key = ? AND threads = ? "
            "AND executors = ? ORDER BY id DESC LIMIT 1",
            [host_key, workload_key, threads, executors])
        return rows[0] if rows else None

    # -- listing runs and traces (report, check) -------------------------
    def runs(self, host_key: str, kind: str, *, until: Optional[str] = None) -> List[dict]:
        """Runs of one kind on a host that hold figures (complete, or
        interrupted with what they finished), oldest first; until: ISO
        timestamp bound on started_at (inclusive)."""
        sql = ("SELECT * FROM runs WHERE host_key = ? AND kind = ? "
               "AND status IN ('complete', 'interrupted')")
        args: List[Any] = [host_key, kind]
        if until is not None:
            sql += " AND started_at <= ?"
            args.append(until)
        return [self._run_row(r) for r in self._query(sql + " ORDER BY started_at, run_id", args)]

    def traced_run(self, host_key: str, graph_hash: str, *, until: Optional[str] = None,
                   prefer: Optional[int] = None) -> Optional[int]:
        """The run whose stored trace shows this graph: `prefer` (a tune
        run) when it carries one, else the newest traced 'run' of the graph."""
        if prefer is not None and self._query(
                "SELECT 1 FROM run_traces WHERE run_id = ? LIMIT 1", [prefer]):
            return prefer
        sql = ("SELECT r.run_id FROM runs r WHERE r.host_key = ? AND r.kind = 'run' "
               "AND json_extract(r.options_json, '$.graph_hash') = ? "
               "AND EXISTS (SELECT 1 FROM run_traces t WHERE t.run_id = r.run_id)")
        args: List[Any] = [host_key, graph_hash]
        if until is not None:
            sql += " AND r.started_at <= ?"
            args.append(until)
        rows = self._query(sql + " ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1", args)
        return rows[0]["run_id"] if rows else None

    def last_trace_iteration(self, run_id: int) -> Optional[int]:
        rows = self._query("SELECT max(iteration) AS it FROM run_traces WHERE run_id = ?",
                           [run_id])
        return rows[0]["it"] if rows else None

    # -- check baselines (schema v5) -------------------------------------
    def add_check_baseline(self, host_key: str, suite: str, *, run_id: Optional[int],
                           suite_doc: dict, hwtune_version: str, created_at: str,
                           figures: List[dict]) -> int:
        """One recorded baseline of a suite with every figure's raw samples
        (figures: dicts with figure, kind, unit, higher_is_better, params,
        samples, ref), in one transaction; returns its id."""
        with self._write("store a check baseline in"):
            cur = self._conn.execute(
                "INSERT INTO check_baselines (host_key, suite, run_id, suite_json, "
                "hwtune_version, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [host_key, suite, run_id, _dumps(suite_doc, "suite"), hwtune_version,
                 created_at])
            bid = cur.lastrowid
            self._conn.executemany(
                "INSERT INTO check_baseline_figures (baseline_id, figure, kind, unit, "
                "higher_is_better, params_json, samples_json, ref_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[bid, f["figure"], f["kind"], f["unit"], int(bool(f["higher_is_better"])),
                  _dumps(f.get("params") or {}, "params"), _dumps(f["samples"], "samples"),
                  _dumps(f.get("ref") or [], "ref")] for f in figures])
        return bid

    def check_baseline(self, host_key: str, suite: str) -> Optional[dict]:
        """The latest baseline of suite on host_key (with its figures), or None."""
        rows = self._query("SELECT * FROM check_baselines WHERE host_key = ? AND suite = ? "
                           "ORDER BY id DESC LIMIT 1", [host_key, suite])
        if not rows:
            return None
        row = rows[0]
        row["suite_doc"] = self._json("check_baselines", row, "suite_json")
        del row["suite_json"]
        row["figures"] = []
        for r in self._query("SELECT * FROM check_baseline_figures WHERE baseline_id = ? "
                             "ORDER BY rowid", [row["id"]]):
            for key in ("params", "samples", "ref"):
                r[key] = self._json("check_baseline_figures", r, f"{key}_json")
            for key in ("params", "samples", "ref"):
                del r[f"{key}_json"]
            r["higher_is_better"] = bool(r["higher_is_better"])
            row["figures"].append(r)
        return row

    def check_baseline_host(self, suite: str) -> Optional[str]:
        """The host of the latest baseline of suite on any host, or None."""
        rows = self._query("SELECT host_key FROM check_baselines WHERE suite = ? "
                           "ORDER BY id DESC LIMIT 1", [suite])
        return rows[0]["host_key"] if rows else None

    # -- tuning trials (schema v4) ---------------------------------------
    def _trial_row(self, row: dict) -> dict:
        row["params"] = self._json("tuning_trials", row, "params_json")
        row["samples"] = self._json("tuning_trials", row, "samples_json")
        del row["params_json"], row["samples_json"]
        return row

    def add_trial(self, run_id: Optional[int], host_key: str, *, tuner: str, search: str,
                  subject: str, isa: str, threads: int, params: dict, status: str,
                  median_s: Optional[float] = None, mad_s: Optional[float] = None,
                  samples: Optional[List[float]] = None, note: Optional[str] = None) -> int:
        """One measured (or failed) proposal of a search, committed on its
        own so an interrupted tuning keeps it. params is stored canonically:
        trial() finds it again by equality."""
        from hwtune.db.keys import canonical_json

        if status not in TRIAL_STATUSES:
            raise UsageError(f"unknown trial status {status!r}: choose one of "
                             f"{', '.join(TRIAL_STATUSES)}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise UsageError(f"threads must be an integer >= 1, got {threads!r}")
        self._require_host(host_key)
        try:
            params_json = canonical_json(params)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"trial params are not storable as JSON: {exc}") from None
        samples = [float(x) for x in (samples or [])]
        return self._insert(
            "store a tuning trial in",
            "INSERT INTO tuning_trials (run_id, host_key, tuner, search, subject, isa, "
            "threads, params_json, status, median_s, mad_s, n, samples_json, note, "
            "hwtune_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, host_key, tuner, search, subject, isa, threads, params_json, status,
             _real(median_s, "median_s"), _real(mad_s, "mad_s"), len(samples),
             _dumps(samples, "samples"), note, __version__, utc_now()])

    def trial(self, host_key: str, *, tuner: str, subject: str, isa: str, threads: int,
              params: dict) -> Optional[dict]:
        """The latest stored trial of exactly these params (any search), or None."""
        from hwtune.db.keys import canonical_json

        rows = self._query(
            "SELECT * FROM tuning_trials WHERE host_key = ? AND tuner = ? AND subject = ? "
            "AND isa = ? AND threads = ? AND params_json = ? ORDER BY id DESC LIMIT 1",
            [host_key, tuner, subject, isa, threads, canonical_json(params)])
        return self._trial_row(rows[0]) if rows else None

    def trials(self, host_key: Optional[str] = None, *, tuner: Optional[str] = None,
               subject: Optional[str] = None, isa: Optional[str] = None,
               threads: Optional[int] = None, run_id: Optional[int] = None) -> List[dict]:
        """Trials matching every given field, oldest first (convergence order)."""
        where, args = [], []
        for col, val in (("host_key", host_key), ("tuner", tuner), ("subject", subject),
                         ("isa", isa), ("threads", threads), ("run_id", run_id)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM tuning_trials" + (f" WHERE {' AND '.join(where)}" if where else "")
        return [self._trial_row(r) for r in self._query(sql + " ORDER BY id", args)]

    def put_tuned(self, host_key: str, *, tuner: str, subject: str, isa: str, threads: int,
                  search: str, best_params: dict, best_s: Optional[float], trials: int,
                  run_id: Optional[int] = None) -> int:
        """The result of one finished search over a subject (replaces an
        earlier one): a later tuning on this host reuses it without measuring."""
        with self._write("store a tuning result in"):
            self._conn.execute(
                "INSERT INTO tuned_subjects (host_key, tuner, subject, isa, threads, search, "
                "best_params_json, best_s, trials, run_id, hwtune_version, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(host_key, tuner, subject, isa, threads) DO UPDATE SET "
                "search = excluded.search, best_params_json = excluded.best_params_json, "
                "best_s = excluded.best_s, trials = excluded.trials, run_id = excluded.run_id, "
                "hwtune_version = excluded.hwtune_version, created_at = excluded.created_at",
                [host_key, tuner, subject, isa, threads, search, _dumps(best_params, "best_params"),
                 _real(best_s, "best_s"), int(trials), run_id, __version__, utc_now()])
            return self._conn.execute(
                "SELECT id FROM tuned_subjects WHERE host_key = ? AND tuner = ? AND subject = ? "
                "AND isa = ? AND threads = ?", [host_key, tuner, subject, isa, threads]
            ).fetchone()[0]

    def tuned(self, host_key: str, *, tuner: str, subject: str, isa: str,
              threads: int) -> Optional[dict]:
        rows = self._query(
            "SELECT * FROM tuned_subjects WHERE host_key = ? AND tuner = ? AND subject = ? "
            "AND isa = ? AND threads = ?", [host_key, tuner, subject, isa, threads])
        if not rows:
            return None
        row = rows[0]
        row["best_params"] = self._json("tuned_subjects", row, "best_params_json")
        del row["best_params_json"]
        return row

    def tuned_threads(self, host_key: str, *, tuner: str, subject: str,
                      isa: str) -> Dict[int, dict]:
        """threads -> the tuned row of subject at that thread count (every
        count it was tuned at on this host and ISA): a run at a count never
        tuned picks the nearest one (hwtune.engine.conv_knobs)."""
        rows = self._query(
            "SELECT * FROM tuned_subjects WHERE host_key = ? AND tuner = ? AND subject = ? "
            "AND isa = ? ORDER BY threads", [host_key, tuner, subject, isa])
        out = {}
        for row in rows:
            row["best_params"] = self._json("tuned_subjects", row, "best_params_json")
            del row["best_params_json"]
            out[int(row["threads"])] = row
        return out

    # -- run traces ------------------------------------------------------
    TRACE_FIELDS = ("op_name", "op_type", "executor", "threads", "start_s", "end_s")

    def add_trace(self, run_id: int, iteration: int, events: List[dict]) -> int:
        """Store one iteration's op events (dicts with TRACE_FIELDS) in one
        transaction; returns how many."""
        self.run(run_id)
        rows = []
        for i, ev in enumerate(events):
            missing = [f for f in self.TRACE_FIELDS if f not in ev]
            if missing:
                raise UsageError(f"trace event {i} lacks {', '.join(missing)}")
            rows.append([run_id, int(iteration), str(ev["op_name"]), str(ev["op_type"]),
                         int(ev["executor"]), int(ev["threads"]), float(ev["start_s"]),
                         float(ev["end_s"])])
        with self._write("store a trace in"):
            self._conn.executemany(
                "INSERT INTO run_traces (run_id, iteration, op_name, op_type, executor, threads, "
                "start_s, end_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def trace(self, run_id: int, iteration: Optional[int] = None) -> List[dict]:
        sql, params = "SELECT * FROM run_traces WHERE run_id = ?", [run_id]
        if iteration is not None:
            sql, params = sql + " AND iteration = ?", params + [iteration]
        return self._query(sql + " ORDER BY iteration, start_s, id", params)

    # -- lifetime --------------------------------------------------------
    # -- plan (schema v7) ---------------------------------------------------
    def put_cost_params(self, host_key: str, run_id: Optional[int], data: str,
                        fits: List[dict]) -> None:
        """The cost model's serial fractions, one row per op type (fits:
        op_type, serial_fraction, points, median_rel_err, max_rel_err, source)."""
        now = utc_now()
        with self._write("store the cost model in"):
            for f in fits:
                self._conn.execute(
                    "INSERT INTO plan_cost_params (host_key, run_id, op_type, data, "
                    "serial_fraction, points, median_rel_err, max_rel_err, source, "
                    "hwtune_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [host_key, run_id, f["op_type"], data, float(f["serial_fraction"]),
                     int(f["points"]), _real(f.get("median_rel_err"), "median_rel_err"),
                     _real(f.get("max_rel_err"), "max_rel_err"), f["source"], __version__, now])

    def cost_params(self, host_key: str, data: str) -> List[dict]:
        """The latest row of every op type."""
        return self._query(
            "SELECT * FROM plan_cost_params WHERE id IN (SELECT max(id) FROM plan_cost_params "
            "WHERE host_key = ? AND data = ? GROUP BY op_type) ORDER BY op_type",
            [host_key, data])

    def add_validation(self, host_key: str, run_id: Optional[int], row: dict) -> None:
        if row["status"] not in TRIAL_STATUSES:
            raise UsageError(f"unknown validation status {row['status']!r}")
        with self._write("store a validation in"):
            self._conn.execute(
                "INSERT INTO plan_validations (host_key, run_id, model, graph_hash, scheduler, "
                "executors, threads, predicted_s, measured_s, mad_s, samples_json, rel_error, "
                "status, note, isa, hwtune_version, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [host_key, run_id, row["model"], row["graph_hash"], row["scheduler"],
                 int(row["executors"]), int(row["threads"]),
                 _real(row.get("predicted_s"), "predicted_s"),
                 _real(row.get("measured_s"), "measured_s"), _real(row.get("mad_s"), "mad_s"),
                 _dumps(row.get("samples") or [], "samples"),
                 _real(row.get("rel_error"), "rel_error"), row["status"], row.get("note"),
                 row["isa"], __version__, utc_now()])

    def validations(self, host_key: str) -> List[dict]:
        """The latest validation of every (model, scheduler, executors,
        threads) on this host."""
        return self._query(
            "SELECT * FROM plan_validations WHERE id IN (SELECT max(id) FROM plan_validations "
            "WHERE host_key = ? GROUP BY model, scheduler, executors, threads) "
            "ORDER BY model, scheduler, executors, threads", [host_key])

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultsDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
