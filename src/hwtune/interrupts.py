"""Ctrl-C that is never lost.

Python ignores an exception raised inside a `__del__` method (it prints
"Exception ignored in ..." and goes on), so a KeyboardInterrupt that the
default SIGINT handler raises while a finalizer runs (a native handle closed
by the garbage collector, say) disappears: a clean-clone CI run saw
`tune-graph` interrupted that way run to its end and exit 0. `install()`
puts a handler in its place that raises as usual, except inside a
finalizer, where it only records the interrupt; `check()`, called between
units of work (every trial of a search, every deadline check of a tuning
run), raises it there. The CLI installs it; the library only checks.
"""

from __future__ import annotations

import signal

_pending: list = []


def _in_finalizer(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def on_sigint(signum, frame):
    """The SIGINT handler: KeyboardInterrupt, deferred to the next check()
    when it would be raised inside a __del__ (where Python drops it)."""
    if _in_finalizer(frame):
        _pending.append(signum)
        return
    raise KeyboardInterrupt


def install() -> None:
    """Make on_sigint the SIGINT handler (main thread only; a SIGINT the
    parent process ignores stays ignored, as for a background job)."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, on_sigint)
    except (ValueError, OSError):
        pass  # not the main thread: keep the default


def check() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that arrived inside a
    finalizer, once."""
    if _pending:
        _pending.clear()
        raise KeyboardInterrupt
