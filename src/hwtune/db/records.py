"""Records that travel: results.db rows as a versioned JSON Lines stream.

`export_records(db)` yields one JSON object per row (a header first, an end
record with per-kind counts last, so a truncated file is refused);
`import_records(db, records)` merges a stream into a database in one
transaction. `merge(sources, target)` is an export of each source imported
into the target: the same code, so a merge and an export/import round trip
cannot disagree.

Rows keep their host keys: a trial measured on host A stays A's, and a tuned
config of A is never used on B (B may enqueue it as a first trial: see
hwtune.tuners.seeded). Row ids are per-file, so every id column is remapped
on import through the natural key of the row it points at (a run is its host,
kind, start time, process and hostname). Importing a row that is already
there changes nothing, which makes import and merge idempotent; where two
files hold different rows under one unique key (the tuned result of a
subject, the tuned config of a graph), the better measured figure wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from hwtune import __version__
from hwtune.db import migrations
from hwtune.db.timestamps import utc_now
from hwtune.errors import UsageError

FORMAT = "hwtune-records"
# Bump when a record's meaning changes; a reader refuses a newer version.
FORMAT_VERSION = 1


class RecordsError(UsageError):
    """A records stream that cannot be imported: malformed, truncated, of a
    newer format or schema, or pointing at a row it does not carry."""


@dataclass(frozen=True)
class Kind:
    """One table as records: its id column (remapped on import; None when
    the natural key is the primary key), the natural key that finds the same
    row in another file, the id columns that point at other kinds, and how a
    different row under the same unique key is settled (None: keep the one
    there)."""
    name: str
    table: str
    id: Optional[str]
    key: Tuple[str, ...]
    refs: Dict[str, str] = field(default_factory=dict)
    host_column: Optional[str] = "host_key"


# Parents before children: import resolves each reference from rows already
# seen in the stream or present in the target.
KINDS: Tuple[Kind, ...] = (
    Kind("host", "hosts", None, ("host_key",)),
    Kind("graph", "graphs", None, ("graph_hash",), host_column=None),
    Kind("run", "runs", "run_id", ("host_key", "kind", "started_at", "hostname", "pid")),
    Kind("measurement", "measurements", "id",
         ("run_id", "created_at", "bench", "op", "params_json", "threads", "executors"),
         {"run_id": "run"}),
    Kind("fact", "run_facts", "id", ("run_id", "key", "created_at", "value_json"),
         {"run_id": "run"}, host_column=None),
    Kind("trace", "run_traces", "id",
         ("run_id", "iteration", "op_name", "executor", "start_s", "end_s"),
         {"run_id": "run"}, host_column=None),
    Kind("baseline", "check_baselines", "id", ("host_key", "suite", "created_at"),
         {"run_id": "run"}),
    Kind("baseline_figure", "check_baseline_figures", None, ("baseline_id", "figure"),
         {"baseline_id": "baseline"}, host_column=None),
    Kind("config", "engine_configs", "id", ("host_key", "graph_hash", "source")),
    Kind("profile", "op_profiles", "id",
         ("host_key", "workload_key", "threads", "executors", "created_at"),
         {"config_id": "config"}),
    Kind("trial", "tuning_trials", "id",
         ("host_key", "tuner", "subject", "isa", "threads", "params_json", "created_at"),
         {"run_id": "run"}),
    Kind("tuned", "tuned_subjects", "id", ("host_key", "tuner", "subject", "isa", "threads"),
         {"run_id": "run"}),
    Kind("dynamic_run", "dynamic_runs", "id",
         ("run_id", "created_at", "policy", "batch", "executors", "threads", "chunk"),
         {"run_id": "run"}),
    Kind("dynamic_config", "dynamic_configs", "id",
         ("host_key", "model_hash", "policy", "batch", "source"), {"run_id": "run"}),
)
BY_NAME = {k.name: k for k in KINDS}
# Children whose host is their parent's: exported with a --host filter
# through these joins.
_PARENT_HOST = {
    "fact": "run_id IN (SELECT run_id FROM runs WHERE host_key = ?)",
    "trace": "run_id IN (SELECT run_id FROM runs WHERE host_key = ?)",
    "baseline_figure": "baseline_id IN (SELECT id FROM check_baselines WHERE host_key = ?)",
    "graph": "graph_hash IN (SELECT graph_hash FROM engine_configs WHERE host_key = ?)",
}


@dataclass
class ImportReport:
    """What an import did, per kind: rows added, rows already there,
    rows replaced by a better measured one."""
    added: Dict[str, int] = field(default_factory=dict)
    same: Dict[str, int] = field(default_factory=dict)
    replaced: Dict[str, int] = field(default_factory=dict)

    def bump(self, what: Dict[str, int], kind: str) -> None:
        what[kind] = what.get(kind, 0) + 1

    def to_json(self) -> dict:
        return {"added": dict(self.added), "same": dict(self.same),
                "replaced": dict(self.replaced)}


# -- export ---------------------------------------------------------------
def _columns(db, table: str) -> List[str]:
    return [r["name"] for r in db._query(f"PRAGMA table_info({table})")]


def _config_figures(db) -> Dict[Tuple[str, str], float]:
    """(host, graph) -> the tuned config's median seconds in the comparison
    that chose it: the tune_summary fact of the latest tune run of that graph
    (each tune replaces the graph's tuned config)."""
    out: Dict[Tuple[str, str], float] = {}
    for r in db._query(
            "SELECT r.host_key, json_extract(f.value_json, '$.graph_hash') AS graph_hash, "
            "json_extract(f.value_json, '$.tuned.median_s') AS median_s "
            "FROM run_facts f JOIN runs r ON r.run_id = f.run_id "
            "WHERE f.key = 'tune_summary' AND json_valid(f.value_json) "
            "ORDER BY r.started_at, r.run_id, f.id"):
        if r["graph_hash"] is not None and isinstance(r["median_s"], (int, float)):
            out[(r["host_key"], r["graph_hash"])] = float(r["median_s"])
    return out


def export_records(db, host: Optional[str] = None) -> Iterator[dict]:
    """Every exportable row of `db` (only `host`'s, and the graphs its
    configs name, when given), header first and counts last."""
    if host is not None and db.host(host) is None:
        known = ", ".join(h["host_key"] for h in db.hosts()) or "none"
        raise UsageError(f"no host {host!r} in {db.path} (hosts: {known})")
    yield {"record": "header", "format": FORMAT, "version": FORMAT_VERSION,
           "schema": db.schema_version, "hwtune_version": __version__,
           "exported_at": utc_now(), "host": host}
    figures = _config_figures(db)
    counts: Dict[str, int] = {}
    for kind in KINDS:
        sql, args = f"SELECT * FROM {kind.table}", []
        if host is not None:
            if kind.name in _PARENT_HOST:
                sql += " WHERE " + _PARENT_HOST[kind.name]
            else:
                sql += f" WHERE {kind.host_column} = ?"
            args.append(host)
        order = kind.id or ", ".join(kind.key)
        for row in db._query(f"{sql} ORDER BY {order}", args):
            rec = {"record": kind.name, "row": row}
            if kind.name == "config" and row["source"] == "tuned":
                rec["measured_s"] = figures.get((row["host_key"], row["graph_hash"]))
            counts[kind.name] = counts.get(kind.name, 0) + 1
            yield rec
    yield {"record": "end", "counts": counts}


def write_jsonl(records: Iterable[dict], out) -> Dict[str, int]:
    """Write records one per line to a text stream; the end record's counts."""
    counts: Dict[str, int] = {}
    for rec in records:
        out.write(json.dumps(rec, sort_keys=True, allow_nan=False, separators=(",", ":")))
        out.write("\n")
        if rec.get("record") == "end":
            counts = rec["counts"]
    return counts


def export_to_file(db, path, host: Optional[str] = None) -> Dict[str, int]:
    """export_records written to path through a temporary file beside it:
    a failed export leaves no half file. OutputError naming the path."""
    import os
    import tempfile

    from hwtune.errors import OutputError

    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write {path}: directory {parent} does not exist")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            counts = write_jsonl(export_records(db, host), f)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return counts


def read_jsonl(lines: Iterable[str], source: str) -> Iterator[Tuple[int, dict]]:
    """(line number, record) of every non-blank line; RecordsError on text
    that is not one JSON object per line."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise RecordsError(f"{source}:{n}: not JSON ({exc})") from None
        if not isinstance(rec, dict):
            raise RecordsError(f"{source}:{n}: a record is a JSON object, got "
                               f"{type(rec).__name__}")
        yield n, rec


# -- import ---------------------------------------------------------------
def _check_header(rec: dict, where: str) -> None:
    if rec.get("record") != "header" or rec.get("format") != FORMAT:
        raise RecordsError(f"{where}: not an hwtune records file (the first line must be its "
                           f"header; write one with `hwtune db export`)")
    version, schema = rec.get("version"), rec.get("schema")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RecordsError(f"{where}: records format version {version!r} is newer than this "
                           f"hwtune reads ({FORMAT_VERSION}); upgrade hwtune")
    if not isinstance(schema, int) or schema > migrations.LATEST_VERSION:
        raise RecordsError(f"{where}: records of schema {schema!r}, newer than this hwtune's "
                           f"{migrations.LATEST_VERSION}; upgrade hwtune")


class _Importer:
    def __init__(self, db, source: str):
        self.db, self.source = db, source
        self.conn = db._conn
        self.ids: Dict[str, Dict[Any, Any]] = {k.name: {} for k in KINDS}
        self.columns = {k.name: set(_columns(db, k.table)) for k in KINDS}
        # Figures of the target's configs before anything is imported, so
        # the runs a stream brings cannot change what it is compared with.
        self.figures = _config_figures(db)
        self.report = ImportReport()
        self.counts: Dict[str, int] = {}

    def _find(self, kind: Kind, row: dict) -> Optional[dict]:
        where = " AND ".join(f"{c} IS ?" for c in kind.key)
        cur = self.conn.execute(f"SELECT * FROM {kind.table} WHERE {where}",
                                [row.get(c) for c in kind.key])
        got = cur.fetchone()
        if got is None:
            return None
        return dict(zip([d[0] for d in cur.description], got))

    def add(self, n: int, rec: dict) -> None:
        where = f"{self.source}:{n}"
        kind = BY_NAME.get(rec.get("record"))
        row = rec.get("row")
        if kind is None or not isinstance(row, dict):
            raise RecordsError(f"{where}: unknown record {rec.get('record')!r} (kinds: "
                               f"{', '.join(BY_NAME)})")
        unknown = sorted(set(row) - self.columns[kind.name])
        if unknown:
            raise RecordsError(f"{where}: {kind.name} has no column {', '.join(unknown)} "
                               f"in this hwtune's schema; upgrade hwtune")
        missing = [c for c in kind.key if c not in row]
        if missing:
            raise RecordsError(f"{where}: {kind.name} lacks {', '.join(missing)}")
        self.counts[kind.name] = self.counts.get(kind.name, 0) + 1
        row = dict(row)
        old_id = row.pop(kind.id, None) if kind.id else None
        for col, parent in kind.refs.items():
            if row.get(col) is None:
                continue
            if row[col] not in self.ids[parent]:
                raise RecordsError(f"{where}: {kind.name} points at {parent} {row[col]!r}, "
                                   f"which the records do not carry before it")
            row[col] = self.ids[parent][row[col]]
        there = self._find(kind, row)
        if there is None:
            cols = list(row)
            cur = self.conn.execute(
                f"INSERT INTO {kind.table} ({', '.join(cols)}) "
                f"VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
            new_id = cur.lastrowid
            self.report.bump(self.report.added, kind.name)
        else:
            new_id = there.get(kind.id) if kind.id else None
            if self._settle(kind, rec, row, there):
                self.report.bump(self.report.replaced, kind.name)
            else:
                self.report.bump(self.report.same, kind.name)
        if kind.id:
            self.ids[kind.name][old_id] = new_id

    def _update(self, kind: Kind, there: dict, changes: dict) -> bool:
        changes = {c: v for c, v in changes.items() if c in there and there[c] != v}
        if not changes:
            return False
        sets = ", ".join(f"{c} = ?" for c in changes)
        where = " AND ".join(f"{c} IS ?" for c in kind.key)
        self.conn.execute(f"UPDATE {kind.table} SET {sets} WHERE {where}",
                          list(changes.values()) + [there[c] for c in kind.key])
        return True

    def _settle(self, kind: Kind, rec: dict, row: dict, there: dict) -> bool:
        """A row under a key the target already holds: whether it changed."""
        if kind.name == "host":
            newer = (row.get("last_seen") or "") > (there.get("last_seen") or "")
            changes = {c: v for c, v in row.items() if newer and c not in ("first_seen",)}
            if row.get("first_seen") and row["first_seen"] < there["first_seen"]:
                changes["first_seen"] = row["first_seen"]
            return self._update(kind, there, changes)
        if kind.name == "graph":
            if there.get("lowered_json") is None and row.get("lowered_json") is not None:
                return self._update(kind, there, {"lowered_json": row["lowered_json"]})
            return False
        if kind.name == "tuned":
            if _better(row.get("best_s"), there.get("best_s")):
                return self._update(kind, there, row)
            return False
        if kind.name == "config":
            if row.get("source") == "tuned":
                mine = self.figures.get((there["host_key"], there["graph_hash"]))
                theirs = rec.get("measured_s")
                if mine is not None or theirs is not None:
                    return _better(theirs, mine) and self._update(kind, there, row)
            # Without figures (a user's or default config): the newer one.
            if (row.get("created_at") or "") > (there.get("created_at") or ""):
                return self._update(kind, there, row)
            return False
        if kind.name == "dynamic_config":
            # tuned on different samples, so no figure compares them: the newer one
            if (row.get("created_at") or "") > (there.get("created_at") or ""):
                return self._update(kind, there, row)
            return False
        return False  # rows with their own timestamp in the key are the same row


def _better(new: Any, old: Any) -> bool:
    """A measured time beats none, and a lower one beats a higher one."""
    if not isinstance(new, (int, float)):
        return False
    return not isinstance(old, (int, float)) or new < old


def import_records(db, records: Iterable[Tuple[int, dict]], source: str) -> ImportReport:
    """Merge (line number, record) pairs into db in one transaction: either
    every record lands or none does."""
    import sqlite3

    it = iter(records)
    first = next(it, None)
    if first is None:
        raise RecordsError(f"{source}: empty; nothing to import")
    _check_header(first[1], f"{source}:{first[0]}")
    ended = False
    with db._write("import records into"):
        imp = _Importer(db, source)
        for n, rec in it:
            if ended:
                raise RecordsError(f"{source}:{n}: a record after the end record")
            if rec.get("record") == "end":
                ended = True
                expected = rec.get("counts")
                if expected != imp.counts:
                    raise RecordsError(f"{source}:{n}: the end record counts {expected}, the "
                                       f"file holds {imp.counts}: damaged; export it again")
                continue
            try:
                imp.add(n, rec)
            except sqlite3.IntegrityError as exc:
                raise RecordsError(f"{source}:{n}: {rec.get('record')} refused by the schema "
                                   f"({exc})") from None
        if not ended:
            raise RecordsError(f"{source}: no end record: the file is truncated; export it "
                               "again")
        problems = db._conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RecordsError(f"{source}: rows point at rows the records do not carry "
                               f"({problems[0][0]} -> {problems[0][2]})")
    return imp.report


def merge(sources: Sequence, target, opener: Callable) -> List[ImportReport]:
    """Import every row of each source database (opened read-only by
    opener(path)) into target, in order."""
    out = []
    for path in sources:
        with opener(path) as src:
            stream = enumerate(export_records(src), 1)
            out.append(import_records(target, stream, str(path)))
    return out


def row_counts(db) -> Dict[str, int]:
    """Rows per exportable table (what a merge must not lose)."""
    return {k.table: db._query(f"SELECT count(*) AS n FROM {k.table}")[0]["n"] for k in KINDS}
