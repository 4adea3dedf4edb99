"""Robust statistics of samples: pure functions, no I/O.

Medians and the median absolute deviation (MAD) instead of mean/stddev: on a
shared machine a few samples are hit by other processes and land far above
the rest; the median ignores them, the mean does not (hyperfine does the same).
"""

from __future__ import annotations

from typing import Sequence


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
