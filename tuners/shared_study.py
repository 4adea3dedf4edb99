"""One Optuna study shared by the hosts of a fleet (tune-graph --storage).

Identical machines tune one model together: each CONV workload's search is
a study in Optuna's RDB storage (PostgreSQL, MySQL, SQLite: any URL
SQLAlchemy takes), named by the workload, ISA and thread count, so every
worker's TPE learns from every other worker's trials (optuna-dashboard
reads the same study). Each host still measures only on itself, and its
trials land in its own results.db as well.

No point is measured twice across the fleet: after asking for a point, a
worker looks for the same params in any other trial that is running or
complete and, if there is one, gives its own trial up (FAIL, with the trial
it duplicates) and asks again. A worker's params are written by ask()
before its own check, so of two workers that draw the same point at the
same moment, the one that checks later always sees the other's; at worst
both give it up and it is drawn again later.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Optional

from hwtune.errors import UsageError

# Trial user attributes: who measured a point, and what came of it.
WORKER_ATTR = "hwtune_worker"
STATUS_ATTR = "hwtune_status"
DUPLICATE_ATTR = "hwtune_duplicate_of"
# Tries at opening a storage whose tables another worker is creating (seen
# with two workers started together on a new PostgreSQL database: one lost
# the CREATE TABLE race with a unique violation; the second try found them).
_CREATE_ATTEMPTS = 5


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def study_name(tuner: str, subject: str, isa: str, threads: int) -> str:
    return f"hwtune:{tuner}:{isa}:{threads}t:{subject}"


def open_storage(optuna, url: str):
    """optuna's RDB storage at url; UsageError naming the URL (without its
    password) and what failed."""
    shown = _without_password(url)
    # A bare postgresql:// means whichever driver SQLAlchemy defaults to
    # (psycopg2 before 2.1, psycopg after): name the one hwtune[fleet]
    # installs.
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            return optuna.storages.RDBStorage(url)
        except ImportError as exc:
            raise UsageError(f"cannot open --storage {shown}: its database driver is missing "
                             f"({exc}); pip install 'hwtune[fleet]'") from None
        except Exception as exc:  # sqlalchemy's errors: bad URL, refused connection, auth
            text = str(exc)
            # Workers starting together race to create Optuna's tables in
            # a new database; the losers find them made on a second look.
            if attempt + 1 < _CREATE_ATTEMPTS and any(
                    w in text for w in ("UniqueViolation", "already exists", "duplicate key")):
                time.sleep(0.2 * (attempt + 1))
                continue
            first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
            raise UsageError(f"cannot open --storage {shown}: {first}") from None


def check_storage(url: str) -> None:
    """UsageError now, rather than after the first stages, when url cannot
    hold the shared studies (creates Optuna's tables in a new database)."""
    import optuna
    open_storage(optuna, url)


def _without_password(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    cred, at, host = rest.rpartition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in cred else url


def duplicate_of(study, trial, params: dict, states) -> Optional[int]:
    """The number of another running or complete trial with these params."""
    for t in study.get_trials(deepcopy=False, states=states):
        if t.number != trial.number and t.params == params:
            return t.number
    return None
