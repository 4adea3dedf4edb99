"""How a run row ends, in one place: 'complete' when the work returns,
'interrupted' on Ctrl-C (and SIGTERM / SIGHUP, which the CLI turns into the
same KeyboardInterrupt; raised again as Interrupted: finished rows are
kept), 'failed' on any other error (the original error is what the user
sees, even when the database itself is what failed)."""

import signal
import threading
from contextlib import contextmanager

from hwtune.errors import HwtuneError, Interrupted


@contextmanager
def _signals_held():
    """A second Ctrl-C (or SIGTERM) while the run is being marked would
    leave it 'running': hold them for the few ms of that UPDATE."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, lambda s, f: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def finishing(db, run_id: int, what: str, *, kept: str = ""):
    """with finishing(db, run_id, "tuning run"): ... -- kept: what the
    interrupt message adds about the rows that were kept."""
    try:
        yield
    except KeyboardInterrupt:
        with _signals_held():
            db.finish_run(run_id, "interrupted")
        raise Interrupted(f"interrupted: {what} {run_id} marked 'interrupted'"
                          f"{'; ' + kept if kept else ''}") from None
    except BaseException:
        try:
            with _signals_held():
                db.finish_run(run_id, "failed")
        except HwtuneError:
            pass
        raise
    else:
        db.finish_run(run_id, "complete")
