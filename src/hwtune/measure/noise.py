"""Re-measuring a noisy figure: hwtune scan's rule, reusable."""

from __future__ import annotations

from typing import Callable, Sequence, Tuple, TypeVar

T = TypeVar("T")


def least_noisy(measure: Callable[[], T], spread: Callable[[T], float], threshold: float,
                retries: int) -> Tuple[T, int]:
    """Run measure() until spread(result) <= threshold, at most 1 + retries
    times; returns the least noisy result and how many attempts were made.
    A burst of load from another process rarely lasts through a whole
    re-measurement, so the quietest attempt is the best estimate."""
    best, best_spread, attempt = None, None, 0
    for attempt in range(1, retries + 2):
        got = measure()
        s = spread(got)
        if best is None or s < best_spread:
            best, best_spread = got, s
        if s <= threshold:
            break
    return best, attempt


def worst_spread(rows: Sequence[dict]) -> float:
    """The noisiest row's rel_spread (scan rows carry one each)."""
    return max(r["rel_spread"] for r in rows)

