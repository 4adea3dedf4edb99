"""Robust statistics for scan measurements: pure functions, no I/O.

Medians and the median absolute deviation (MAD) instead of mean/stddev: on a
shared machine a few samples are hit by other processes and land far above
the rest; the median ignores them, the mean does not (hyperfine does the same).
"""

from __future__ import annotations

from typing import Optional, Sequence


def median(xs: Sequence[float]) -> float:
    """Median; the mean of the two middle values for an even count."""
    xs = [float(x) for x in xs]  # also accepts numpy arrays
    if not xs:
        raise ValueError("median of no samples")
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return float(s[mid])
    return (s[mid - 1] + s[mid]) / 2.0


def mad(xs: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled; 0 for one sample)."""
    xs = [float(x) for x in xs]
    m = median(xs)
    return median([abs(x - m) for x in xs])


def rel_spread(xs: Sequence[float]) -> float:
    """MAD / median: the noise of a measurement as a fraction of its size.

    0 when every sample is equal (MAD = 0) or when the median is 0 (nothing
    to compare against, so there is no evidence of noise)."""
    m = median(xs)
    if m == 0:
        return 0.0
    return mad(xs) / abs(m)


def is_noisy(xs: Sequence[float], threshold: float) -> bool:
    """True when the relative spread exceeds threshold (strictly)."""
    return rel_spread(xs) > threshold


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
