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

A worker that dies mid-trial (killed, its machine lost) must not leave its
trial RUNNING for ever, read by every other worker as a point being
measured. Each running trial carries Optuna's heartbeat: a thread records
it every HEARTBEAT_S while the point is measured, and before each ask a
worker fails the study's trials whose last heartbeat is older than GRACE_S
and queues each of their points again once, for the next worker that asks
(Optuna's retry callback for stale trials).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import warnings
from contextlib import contextmanager
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
# A running trial's heartbeat: a row update every HEARTBEAT_S (whole
# seconds: Optuna's unit). GRACE_S without one and the trial is stale: ten
# missed beats, so a live worker whose heartbeat thread waits for the GIL
# or the database through a burst of load (the 2-core test VM runs at load
# 10-25) is not taken for dead, and a dead worker's point waits ~20 s for
# another worker.
HEARTBEAT_S = 2
GRACE_S = 20
# A stale trial's point is queued again once: if the point itself killed
# its worker (a crash in a kernel), it kills at most one more.
STALE_RETRIES = 1


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def study_name(tuner: str, subject: str, isa: str, threads: int) -> str:
    return f"hwtune:{tuner}:{isa}:{threads}t:{subject}"


def open_storage(optuna, url: str):
    """optuna's RDB storage at url; UsageError naming the URL (without its
    password) and what failed."""
    shown = redact_url(url)
    # A bare postgresql:// means whichever driver SQLAlchemy defaults to
    # (psycopg2 before 2.1, psycopg after): name the one hwtune[fleet]
    # installs.
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            with quiet(optuna):
                return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S,
                                                  grace_period=GRACE_S, **_retry(optuna))
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


def redact_url(url: str) -> str:
    """url with its password (user:PASSWORD@, or a password= query
    parameter) shown as ***: what messages and run options may show."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    where, q, query = rest.partition("?")
    if "@" in where:
        cred, _, host = where.rpartition("@")
        if ":" in cred:
            where = f"{cred.split(':', 1)[0]}:***@{host}"
    query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", query, flags=re.I)
    return f"{scheme}://{where}{q}{query}"


def _retry(optuna) -> dict:
    """Optuna's queue-again-once callback for stale trials, by the name of
    the Optuna installed (renamed in 4.9)."""
    new = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    if new is not None:
        return {"heartbeat_stale_trial_callback": new(max_retry=STALE_RETRIES)}
    return {"failed_trial_callback": optuna.storages.RetryFailedTrialCallback(
        max_retry=STALE_RETRIES)}


@contextmanager
def quiet(optuna):
    """Optuna's warnings that its heartbeat API is experimental, and that
    heartbeats are meant for study.optimize(): hwtune asks and tells, and
    beats itself (Heartbeat)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage")
        yield


def fail_stale(optuna, study) -> None:
    """Fail the study's trials whose worker stopped beating; each point is
    queued again once (the storage's callback)."""
    with quiet(optuna):
        optuna.storages.fail_stale_trials(study)


class Heartbeat:
    """One running trial's heartbeat: recorded now (a trial without one is
    never found stale) and then every HEARTBEAT_S by a daemon thread until
    stop(). A beat that fails (a dropped connection) is tried again at the
    next: GRACE_S covers several."""

    def __init__(self, storage, trial_id: int):
        self._storage, self._trial_id = storage, trial_id
        self._stop = threading.Event()
        storage.record_heartbeat(trial_id)
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"hwtune-heartbeat-{trial_id}")
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._storage.record_heartbeat(self._trial_id)
            except Exception:  # sqlalchemy's errors: the next beat tries again
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * HEARTBEAT_S)


def duplicate_of(study, trial, params: dict, states) -> Optional[int]:
    """The number of another running or complete trial with these params."""
    for t in study.get_trials(deepcopy=False, states=states):
        if t.number != trial.number and t.params == params:
            return t.number
    return None
