"""Wait for other thread pools of this process to go quiet before a sample."""

from __future__ import annotations

import time

from hwtune.measure.clock import now

# Polling stops as soon as the process used less than this share of one CPU
# over a poll interval: parked workers use none, a spinning one uses all.
_QUIET_SHARE = 0.1


def settle(max_s: float = 0.3, poll_s: float = 0.01) -> None:
    """Wait until this process' idle threads stop burning CPU.

    OpenBLAS workers busy-wait after a call (measured here: ~24 ms of CPU
    over the following 100-200 ms, then nothing), and so do onnxruntime's
    intra-op threads; a hwtune sample taken in that window shares its cores
    with them (186 us alone vs 283 us right after a 2-thread BLAS call,
    64x512x512). Polling process CPU time ends the wait as soon as they park
    instead of sleeping a fixed worst case."""
    end = now() + max_s
    while now() < end:
        c0 = time.process_time()
        time.sleep(poll_s)
        if time.process_time() - c0 < _QUIET_SHARE * poll_s:
            return
