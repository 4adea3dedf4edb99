"""Scan's derived figures: speedup, parallel efficiency, saturation point.
Pure functions, no I/O. The sample statistics (median, MAD, spread) are the
measurement layer's (hwtune.measure.stats), re-exported for scan's callers.
"""

from __future__ import annotations

from typing import Optional, Sequence

from hwtune.measure.stats import is_noisy, mad, median, rel_spread  # noqa: F401


def speedup(base: float, value: float) -> float:
    """Throughput ratio value / base (base: the 1-thread figure)."""
    if base <= 0:
        return 0.0
    return value / base


def efficiency(base: float, value: float, threads: int, base_threads: int = 1) -> float:
    """Parallel efficiency: speedup over base divided by the thread ratio.

    1.0 is linear scaling. base_threads lets a scan that skipped 1 thread
    (--threads 2,4) still report a meaningful figure relative to its smallest
    count."""
    if threads <= 0 or base_threads <= 0:
        raise ValueError("thread counts must be positive")
    return speedup(base, value) * base_threads / threads


def saturation_point(threads: Sequence[int], values: Sequence[float],
                     min_gain: float) -> Optional[int]:
    """Thread count past which adding threads gains less than min_gain.

    threads/values: throughput (higher is better) per thread count. Returns
    the smallest count t such that the best throughput at ANY larger count is
    below value(t) * (1 + min_gain), i.e. everything beyond t buys less than
    min_gain. Comparing with the best later value, not just the next one,
    keeps one noisy dip (t=4 slower than t=3 but t=8 much faster) from
    declaring saturation early. None when every step up to the largest
    measured count still gains (the curve has not saturated in the range) or
    when fewer than two counts were measured.
    """
    if len(threads) != len(values):
        raise ValueError("threads and values differ in length")
    if min_gain < 0:
        raise ValueError("min_gain must be >= 0")
    pts = sorted(zip(threads, values))
    for i in range(len(pts) - 1):
        t, v = pts[i]
        best_later = max(val for _, val in pts[i + 1:])
        if best_later < v * (1.0 + min_gain):
            return t
    return None
