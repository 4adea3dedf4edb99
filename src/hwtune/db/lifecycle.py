"""How a run row ends, in one place: 'complete' when the work returns,
'interrupted' on Ctrl-C (raised again as Interrupted: finished rows are
kept), 'failed' on any other error (the original error is what the user
sees, even when the database itself is what failed)."""

from contextlib import contextmanager

from hwtune.errors import HwtuneError, Interrupted


@contextmanager
def finishing(db, run_id: int, what: str, *, kept: str = ""):
    """with finishing(db, run_id, "tuning run"): ... -- kept: what the
    interrupt message adds about the rows that were kept."""
    try:
        yield
    except KeyboardInterrupt:
        db.finish_run(run_id, "interrupted")
        raise Interrupted(f"interrupted: {what} {run_id} marked 'interrupted'"
                          f"{'; ' + kept if kept else ''}") from None
    except BaseException:
        try:
            db.finish_run(run_id, "failed")
        except HwtuneError:
            pass
        raise
    else:
        db.finish_run(run_id, "complete")
