"""Interleaved sampling of several sides: one sample of each in turn, so a
burst of load from other users of the machine hits every side instead of
biasing one. The one place compare times things (the benchmarks keep their
own copy in benchmarks/timing.py until timing moves into the library)."""

from __future__ import annotations

import time
from typing import Callable, List, Sequence

from hwtune.scan.runner import settle

# A sample lasts at least this long (several calls of a fast graph): well
# above the ~1 us timer and the ~10 us Python call overhead of a side.
SAMPLE_S = 0.02


def _per_call(fn: Callable[[], None], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def interleaved(fns: Sequence[Callable[[], None]], reps: int,
                sample_s: float = SAMPLE_S) -> List[List[float]]:
    """Per-call seconds of each fn, `reps` samples each, sampled round-robin
    after one warm-up call each; before each sample the previous side's
    spinning workers get time to park (settle)."""
    calls = []
    for fn in fns:
        one = _per_call(fn, 1)  # warm-up, and the size of a sample
        calls.append(max(1, min(1000, round(sample_s / max(one, 1e-7)))))
    samples: List[List[float]] = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            settle()
            samples[i].append(_per_call(fn, calls[i]))
    return samples
