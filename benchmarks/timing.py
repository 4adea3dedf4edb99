"""Timing helpers shared by the benchmark scripts: per-call seconds of a
Python callable and round-robin ("interleaved") sampling of several sides,
so every side sees the same noise from the shared machine."""

import statistics
import time

from hwtune.scan.runner import settle


def per_call(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def calls_for(fn, sample_s: float, max_calls: int = 10_000) -> int:
    """Calls per sample so one sample lasts about sample_s."""
    fn()
    return max(1, min(max_calls, round(sample_s / max(per_call(fn, 1), 1e-7))))


def interleaved(fns, reps: int, *, sample_s: float, max_calls: int = 10_000,
                stat=statistics.median, settle_s=None):
    """stat (median by default) of the seconds per call of each fn, sampled
    round-robin; stat=None returns the samples. Before each sample the
    previous side's spinning workers are given time to park (settle)."""
    calls = [calls_for(f, sample_s, max_calls) for f in fns]
    samples = [[] for _ in fns]
    for _ in range(reps):
        for i, f in enumerate(fns):
            settle() if settle_s is None else settle(settle_s)
            samples[i].append(per_call(f, calls[i]))
    return samples if stat is None else [stat(s) for s in samples]
