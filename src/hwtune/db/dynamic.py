"""results.db rows of dynamic models (schema v8): each measured config of
`hwtune run MODEL --inputs FILE` (dynamic_runs) and the executor configs
`hwtune tune-graph MODEL --inputs FILE` stores (dynamic_configs).

A mixin of ResultsDB, kept apart so the store's own file stays about the
static tables; it writes through the same one-transaction-per-write path."""

from typing import Any, Dict, List, Optional

from hwtune import __version__
from hwtune.db.timestamps import utc_now
from hwtune.db.values import dumps as _dumps
from hwtune.db.values import real as _real
from hwtune.errors import UsageError

DYNAMIC_SOURCES = ("tuned", "user")
CHECK_STATUSES = ("ok", "wrong_answer")


def _count(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UsageError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def _op_threads(value: Any) -> Dict[str, Dict[str, int]]:
    """op name -> {rows: threads}: rows as strings (JSON keys), every count >= 1."""
    out: Dict[str, Dict[str, int]] = {}
    if not isinstance(value, dict):
        raise UsageError(f"op_threads must be an object, got {type(value).__name__}")
    for op, by_rows in value.items():
        if not isinstance(by_rows, dict):
            raise UsageError(f"op_threads[{op!r}] must be an object of rows: threads")
        out[str(op)] = {str(_count(f"op_threads[{op!r}] rows", int(r))):
                        _count(f"op_threads[{op!r}][{r}]", t) for r, t in by_rows.items()}
    return out


class DynamicStore:
    """The dynamic_runs / dynamic_configs methods of ResultsDB."""

    # -- measured runs ------------------------------------------------------
    def add_dynamic_run(self, run_id: int, row: Dict[str, Any]) -> int:
        """One measured config of a dynamic run, committed before returning
        its id. row: model, model_hash, inputs, samples_digest, n_samples,
        n_vertices, policy, batch, executors, threads, chunk, pinned,
        config_source, op_threads, seconds, median_s, mad_s, samples_per_s,
        groups, rows, check_status (None: not checked), check_rel,
        kernel_variant."""
        run = self.run(run_id)
        status = row.get("check_status")
        if status is not None and status not in CHECK_STATUSES:
            raise UsageError(f"invalid check status {status!r}: one of "
                             f"{', '.join(CHECK_STATUSES)} or None")
        values = [run_id, run["host_key"], str(row["model"]), str(row["model_hash"]),
                  str(row["inputs"]), str(row["samples_digest"]),
                  _count("n_samples", row["n_samples"]),
                  _count("n_vertices", row["n_vertices"], 0), str(row["policy"]),
                  _count("batch", row["batch"]), _count("executors", row["executors"]),
                  _count("threads", row["threads"]), _count("chunk", row["chunk"]),
                  int(bool(row["pinned"])), str(row["config_source"]),
                  _dumps(_op_threads(row.get("op_threads") or {}), "op_threads"),
                  _dumps([float(s) for s in row.get("seconds") or []], "seconds"),
                  _real(row.get("median_s"), "median_s"), _real(row.get("mad_s"), "mad_s"),
                  _real(row.get("samples_per_s"), "samples_per_s"),
                  _count("groups", int(row.get("groups") or 0), 0),
                  _count("rows", int(row.get("rows") or 0), 0), status,
                  _real(row.get("check_rel"), "check_rel"), str(row["kernel_variant"]),
                  __version__, utc_now()]
        return self._insert(
            "store a dynamic run in",
            "INSERT INTO dynamic_runs (run_id, host_key, model, model_hash, inputs, "
            "samples_digest, n_samples, n_vertices, policy, batch, executors, threads, "
            "chunk, pinned, config_source, op_threads_json, seconds_json, median_s, mad_s, "
            "samples_per_s, groups, rows, check_status, check_rel, kernel_variant, "
            "hwtune_version, created_at) VALUES "
            f"({', '.join('?' * len(values))})", values)

    def _dynamic_row(self, row: dict) -> dict:
        row["op_threads"] = self._json("dynamic_runs", row, "op_threads_json")
        row["seconds"] = self._json("dynamic_runs", row, "seconds_json")
        del row["op_threads_json"], row["seconds_json"]
        row["pinned"] = bool(row["pinned"])
        return row

    def dynamic_runs(self, host_key: Optional[str] = None, *, run_id: Optional[int] = None,
                     until: Optional[str] = None) -> List[dict]:
        """Rows oldest first: of one host (up to `until`, an ISO date), or
        of one run."""
        sql, args = "SELECT * FROM dynamic_runs WHERE 1 = 1", []
        if host_key is not None:
            sql, args = sql + " AND host_key = ?", args + [host_key]
        if run_id is not None:
            sql, args = sql + " AND run_id = ?", args + [run_id]
        if until is not None:
            sql, args = sql + " AND created_at <= ?", args + [until]
        return [self._dynamic_row(r) for r in self._query(sql + " ORDER BY id", args)]

    # -- tuned configs ---------------------------------------------------
    def put_dynamic_config(self, host_key: str, model_hash: str, *, model: str, policy: str,
                           batch: int, executors: int, threads: int, chunk: int, pin: bool,
                           op_threads: Optional[dict] = None, samples_digest: str,
                           source: str = "tuned", run_id: Optional[int] = None) -> int:
        """Store the config of (host, model, policy, batch, source),
        replacing the previous one; returns its id."""
        if source not in DYNAMIC_SOURCES:
            raise UsageError(f"unknown dynamic config source {source!r}: one of "
                             f"{', '.join(DYNAMIC_SOURCES)}")
        self._require_host(host_key)
        values = [host_key, str(model), str(model_hash), str(policy), _count("batch", batch),
                  _count("executors", executors), _count("threads", threads),
                  _count("chunk", chunk), int(bool(pin)),
                  _dumps(_op_threads(op_threads or {}), "op_threads"), str(samples_digest),
                  source, run_id, __version__, utc_now()]
        with self._write("store a dynamic config in"):
            self._conn.execute(
                "INSERT INTO dynamic_configs (host_key, model, model_hash, policy, batch, "
                "executors, threads, chunk, pin, op_threads_json, samples_digest, source, run_id, "
                "hwtune_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(host_key, model_hash, policy, batch, source) DO UPDATE SET "
                "model = excluded.model, executors = excluded.executors, "
                "threads = excluded.threads, chunk = excluded.chunk, pin = excluded.pin, "
                "op_threads_json = excluded.op_threads_json, "
                "samples_digest = excluded.samples_digest, run_id = excluded.run_id, "
                "hwtune_version = excluded.hwtune_version, created_at = excluded.created_at",
                values)
            return self._conn.execute(
                "SELECT id FROM dynamic_configs WHERE host_key = ? AND model_hash = ? AND "
                "policy = ? AND batch = ? AND source = ?",
                [host_key, model_hash, policy, batch, source]).fetchone()[0]

    def dynamic_configs(self, host_key: str, model_hash: str,
                        source: Optional[str] = None) -> List[dict]:
        """Every stored config of the model on the host (of one source)."""
        sql = "SELECT * FROM dynamic_configs WHERE host_key = ? AND model_hash = ?"
        args: List[Any] = [host_key, model_hash]
        if source is not None:
            sql, args = sql + " AND source = ?", args + [source]
        out = []
        for row in self._query(sql + " ORDER BY policy, batch, source", args):
            row["op_threads"] = self._json("dynamic_configs", row, "op_threads_json")
            del row["op_threads_json"]
            row["pin"] = bool(row["pin"])
            out.append(row)
        return out
