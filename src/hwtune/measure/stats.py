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


def percentiles(xs: Sequence[float], ps: Sequence[float] = (50, 90, 99)) -> dict:
    """{'p50': .., 'p90': .., 'p99': ..}: linear interpolation between the
    closest ranks (numpy's default), so p50 is the median; with few samples
    the high ones are the slowest samples, which is what they can say."""
    s = sorted(float(x) for x in xs)
    if not s:
        raise ValueError("percentiles of no samples")
    out = {}
    for p in ps:
        pos = (len(s) - 1) * p / 100.0
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        out[f"p{p:g}"] = s[lo] + (s[hi] - s[lo]) * (pos - lo)
    return out


def is_noisy(xs: Sequence[float], threshold: float) -> bool:
    """True when the relative spread exceeds threshold (strictly)."""
    return rel_spread(xs) > threshold


def paired_ratio_ci(num: Sequence[float], den: Sequence[float], *, level: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> tuple:
    """(median, low, high) of the ratio num/den over samples taken in pairs.

    The i-th samples of both sides came from the same round of an
    interleaved comparison, so a burst of background load hits both of a
    pair: the per-pair ratio cancels it where two independent medians would
    not. The interval is a percentile bootstrap of the median of the
    per-pair ratios, seeded (the same samples always give the same
    interval). One pair gives a zero-width interval at its ratio: a caller
    that needs evidence asks for more pairs, it does not read one as proof."""
    import numpy as np
    n = min(len(num), len(den))
    if n == 0:
        raise ValueError("ratio of no samples")
    a = np.asarray(num[:n], dtype=np.float64)
    b = np.asarray(den[:n], dtype=np.float64)
    if np.any(b <= 0) or np.any(a <= 0):
        raise ValueError("paired ratio of non-positive samples")
    r = a / b
    mid = float(np.median(r))
    if n == 1:
        return mid, mid, mid
    rng = np.random.default_rng(seed)
    boot = np.median(r[rng.integers(0, n, size=(resamples, n))], axis=1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, 1 - (1 - level) / 2])
    return mid, float(lo), float(hi)
