"""The clocks: the only place hwtune reads the time.

`now()` times samples (time.perf_counter: the highest-resolution clock,
monotonic, never adjusted); `monotonic()` keeps deadlines and elapsed times
of whole stages, which must not jump with the wall clock either. A deadline
is a `monotonic()` value, or None for none.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

now = time.perf_counter
monotonic = time.monotonic


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of fn over `calls` back-to-back calls."""
    t0 = now()
    for _ in range(calls):
        fn()
    return (now() - t0) / calls


def cpu_per_call(fn: Callable[[], object], calls: int) -> float:
    """This thread's CPU seconds per call of fn: time it spends descheduled
    (other processes on a shared machine) does not count."""
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t0) / calls


def calls_for(one_call_s: float, target_s: float, max_calls: int) -> int:
    """Calls per sample so that one sample lasts about target_s (at least
    one, at most max_calls: a mis-calibrated tiny call must not run for
    minutes)."""
    return int(max(1, min(max_calls, round(target_s / max(one_call_s, 1e-9)))))


def deadline_after(seconds: Optional[float]) -> Optional[float]:
    """The deadline `seconds` from now (None: no deadline)."""
    return None if seconds is None else monotonic() + seconds


def passed(deadline: Optional[float]) -> bool:
    """Whether the deadline (a monotonic() value, or None) has passed."""
    return deadline is not None and monotonic() >= deadline


class Stopwatch:
    """Elapsed seconds since it was made (stage durations, progress)."""

    def __init__(self):
        self.start = monotonic()

    def elapsed(self) -> float:
        return monotonic() - self.start
