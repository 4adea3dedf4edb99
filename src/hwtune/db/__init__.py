"""results.db: versioned SQLite store of hosts, runs, measurements and facts."""

from hwtune.db.connect import resolve_path
from hwtune.db.migrations import APPLICATION_ID, LATEST_VERSION as SCHEMA_VERSION
from hwtune.db.store import ResultsDB

__all__ = ["ResultsDB", "resolve_path", "APPLICATION_ID", "SCHEMA_VERSION"]
