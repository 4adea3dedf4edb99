"""Find, vet and open results.db.

Vetting happens on a read-only connection first, so a file that turns out
not to be hwtune's (or is corrupt, or too new) is never written to: not even
the WAL switch, which rewrites the header.
"""

import os
import sqlite3
import time
from pathlib import Path
from typing import Tuple, Union

from hwtune.db.migrations import APPLICATION_ID, LATEST_VERSION, META_TABLE
from hwtune.errors import DatabaseError, SchemaTooNewError

ENV_VAR = "HWTUNE_DB"
DEFAULT_NAME = "results.db"
MEMORY = ":memory:"
SQLITE_MAGIC = b"SQLite format 3\x00"

# Two hwtune processes (a scan and a report, or parallel tunes) may write at
# once. add_measurement measured 1-4 ms median, 8-12 ms p90 (2-core dev box
# at load ~13), so a 10 s wait only runs out when another process is stuck
# holding the lock.
BUSY_TIMEOUT_S = 10.0


def resolve_path(path: Union[str, os.PathLike, None] = None) -> Path:
    """The argument, else $HWTUNE_DB, else the nearest results.db up the
    tree from the cwd (a checkout's seeded from its results.seed.db), else
    the per-user database (hwtune.db.locate); absolute."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR)
        if not path:
            from hwtune.db import locate
            found = locate.nearest()
            try:
                locate.seed_if_needed(found)
            except OSError as exc:
                raise DatabaseError(f"cannot create {found}: {exc.strerror or exc}; "
                                    "use --db PATH") from None
            return found
    if str(path) == MEMORY:
        return Path(MEMORY)
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def translate(exc: sqlite3.Error, path: Path, doing: str) -> DatabaseError:
    """One-line DatabaseError naming the path and the remedy."""
    text = str(exc)
    low = text.lower()
    if "readonly" in low or "read-only" in low:
        hint = "the file or its directory is read-only; fix permissions or use --db PATH"
    elif "locked" in low or "busy" in low:
        hint = (f"another process held the database lock for over {BUSY_TIMEOUT_S:.0f} s; "
                "retry when it finishes or use --db PATH")
    elif "unable to open" in low:
        hint = "cannot open the file; check the directory exists and is writable, or use --db PATH"
    elif "disk is full" in low or "disk i/o" in low:
        hint = "the disk is full or failing; free space or use --db PATH"
    elif "not a database" in low or "malformed" in low or "corrupt" in low:
        hint = "the file is not a SQLite database or is corrupt; move it away or use --db PATH"
    else:
        hint = "use --db PATH to pick another database"
    return DatabaseError(f"cannot {doing} {path}: {text} ({hint})")


def check_location(path: Path) -> bool:
    """Raise DatabaseError for a path that cannot hold a database; return
    whether a non-empty file is already there."""
    if str(path) == MEMORY:
        return False
    parent = path.parent
    if not parent.exists():
        raise DatabaseError(
            f"cannot create {path}: directory {parent} does not exist; "
            "create it or use --db PATH")
    if not parent.is_dir():
        raise DatabaseError(
            f"cannot create {path}: {parent} is not a directory; use --db PATH")
    if path.is_dir():
        raise DatabaseError(f"cannot use {path}: it is a directory; use --db PATH/results.db")
    exists = path.exists()
    # WAL mode creates -wal/-shm files beside the database, so the directory
    # must be writable even when the file itself is.
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DatabaseError(
            f"cannot write {path}: directory {parent} is not writable; "
            "fix permissions or use --db PATH")
    if exists and not os.access(path, os.R_OK | os.W_OK):
        raise DatabaseError(
            f"cannot write {path}: the file is read-only; fix permissions or use --db PATH")
    if not exists:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise DatabaseError(f"cannot read {path}: {exc.strerror}; use --db PATH") from None
    if not head:
        return False
    if head != SQLITE_MAGIC:
        raise DatabaseError(
            f"{path} is not a SQLite database; move it away or use --db PATH")
    return True


def classify(conn: sqlite3.Connection, path: Path) -> int:
    """Schema version of an hwtune database (0 = empty, to initialise).
    Raises DatabaseError for someone else's SQLite file, SchemaTooNewError
    for one written by a newer hwtune."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name")]
    if app_id == APPLICATION_ID:
        if version > LATEST_VERSION:
            raise SchemaTooNewError(
                f"{path} was written by a newer hwtune (schema {version} > {LATEST_VERSION}); "
                "upgrade hwtune or use --db PATH")
        if version > 0:
            marked = META_TABLE in names and conn.execute(
                f"SELECT value FROM {META_TABLE} WHERE key = 'application'").fetchone()
            if not marked or marked[0] != "hwtune":
                raise DatabaseError(
                    f"{path} carries hwtune's id but has no hwtune_meta marker (damaged?); "
                    "move it away or use --db PATH")
        return version
    if app_id != 0:
        raise DatabaseError(
            f"{path} belongs to another application (application_id 0x{app_id & 0xFFFFFFFF:08x}); "
            "it was left untouched: use --db PATH")
    if names or version != 0:
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise DatabaseError(
            f"{path} is a SQLite database but not hwtune's (tables: {shown or 'none'}; "
            f"user_version {version}); it was left untouched: use --db PATH")
    return 0


def _vet(conn: sqlite3.Connection, path: Path) -> int:
    """Integrity, then ownership, on an open connection; the schema version."""
    try:
        # quick_check skips the index cross-check: linear in file size,
        # measured 2-3 ms per open at 150 KiB and ~95 ms at 10.8 MiB (32k
        # rows, ~1000 quick scans); catches truncated/garbled pages.
        result = [r[0] for r in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        if _cannot_read_in_place(exc):
            raise
        raise DatabaseError(
            f"{path} is not a SQLite database or is corrupt ({exc}); "
            "move it away or use --db PATH") from None
    if result != ["ok"]:
        what = " ".join(str(result[0]).split())  # SQLite's report spans lines
        raise DatabaseError(
            f"{path} is corrupt (quick_check: {what}); move it away or use --db PATH")
    try:
        return classify(conn, path)
    except sqlite3.Error as exc:
        raise translate(exc, path, "inspect") from None


def _cannot_read_in_place(exc: sqlite3.Error) -> bool:
    """A WAL database in a directory this process cannot write: SQLite
    cannot create the -shm file a read-only reader needs."""
    low = str(exc).lower()
    return "readonly" in low or "read-only" in low or "unable to open" in low


def vet_existing(path: Path) -> int:
    """Read-only inspection of an existing file: integrity, then ownership."""
    conn, _ = _open_readonly(path, vet_only=True)
    try:
        return _vet(conn, path)
    finally:
        conn.close()


def connect_readonly(path: Path, vet_only: bool = False) -> sqlite3.Connection:
    """A connection that can only read an existing database: it creates,
    migrates and locks out nothing, so a report works on a file in a
    read-only directory. The file is vetted (unless vet_only: the caller
    vets) and must be at this hwtune's schema version."""
    conn, version = _open_readonly(path, vet_only)
    if not vet_only and version != LATEST_VERSION:
        conn.close()
        raise DatabaseError(
            f"{path} has schema version {version}; this hwtune reads {LATEST_VERSION} and "
            "would upgrade it, but opens it read-only here: run any hwtune command that "
            "may write it once (e.g. hwtune db check --fix)")
    return conn


def connect_readonly_any(path: Path) -> Tuple[sqlite3.Connection, int]:
    """connect_readonly for a vetted database of any schema this hwtune
    knows (1..latest): the connection and the file's schema version."""
    conn, version = _open_readonly(path, False)
    if version == 0:
        conn.close()
        raise DatabaseError(f"{path} is an empty database: nothing to read")
    return conn, version


def _open_readonly(path: Path, vet_only: bool) -> Tuple[sqlite3.Connection, int]:
    if str(path) == MEMORY or not path.is_file():
        raise DatabaseError(f"no results database at {path}: run 'hwtune scan' first, or "
                            "give --db PATH")
    last = None
    # immutable=1: no -shm file (a read-only directory); nothing else can
    # write there meanwhile without also being able to write the directory.
    for query in ("mode=ro", "immutable=1"):
        try:
            conn = sqlite3.connect(path.as_uri() + "?" + query, uri=True,
                                   timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise translate(exc, path, "open") from None
        if vet_only:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn, -1
            except sqlite3.DatabaseError as exc:
                conn.close()
                if not _cannot_read_in_place(exc):
                    raise DatabaseError(f"{path} is not a SQLite database or is corrupt "
                                        f"({exc}); move it away or use --db PATH") from None
                last = exc
                continue
        try:
            version = _vet(conn, path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            last = exc
            continue
        except BaseException:
            conn.close()
            raise
        return conn, version
    raise translate(last, path, "open")


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """Set WAL mode, retrying while another connection holds a lock: the
    switch needs an exclusive lock and SQLite returns SQLITE_BUSY at once
    instead of calling the busy handler (seen when 4 processes create one
    database together)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() == "wal":
                return mode
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            low = str(exc).lower()
            if ("locked" not in low and "busy" not in low) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def connect(path: Path) -> sqlite3.Connection:
    """Read-write connection: explicit transactions, FKs on, WAL, busy wait."""
    target = MEMORY if str(path) == MEMORY else str(path)
    try:
        conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if target != MEMORY:
            # WAL: readers never block the writer, so a report can run during
            # a scan. synchronous stays FULL (the default): each committed
            # measurement survives a power cut, at ~1 fsync per row, which is
            # negligible next to the seconds a measurement takes.
            mode = _switch_to_wal(conn)
            if mode.lower() != "wal":
                conn.close()
                raise DatabaseError(
                    f"cannot switch {path} to WAL mode (got {mode}); "
                    "use --db PATH on a local file system")
    except sqlite3.Error as exc:
        raise translate(exc, path, "open") from None
    return conn


