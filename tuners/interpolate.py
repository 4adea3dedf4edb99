"""Predict an op's time at thread counts the hill climb did not measure, and
score those predictions (the runtime concurrency control paper, Section
III-C: linear interpolation between the two nearest profiled counts; Table V
reports the resulting prediction accuracy per model and interval x).

Only counts inside the measured range are predicted: the climb stops at the
first slowdown, and beyond it a straight line would extrapolate a curve the
paper found convex, not linear.
"""

from __future__ import annotations

import bisect
from typing import Dict, Iterable, List, Mapping, Optional, Sequence


def _points(measured: Mapping[int, float]):
    xs = sorted(int(t) for t in measured)
    if not xs:
        raise ValueError("no measured thread counts to interpolate from")
    for t in xs:
        s = measured[t]
        if not (isinstance(s, (int, float)) and s > 0):
            raise ValueError(f"measured time at {t} threads must be > 0 seconds, got {s!r}")
    return xs, [float(measured[t]) for t in xs]


def predict(measured: Mapping[int, float], threads: int) -> Optional[float]:
    """Seconds at `threads`: the measured value, the linear interpolation
    between the nearest measured counts below and above, or None outside
    the measured range."""
    xs, ys = _points(measured)
    if threads in measured:
        return float(measured[threads])
    if threads < xs[0] or threads > xs[-1]:
        return None
    i = bisect.bisect_left(xs, threads)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (threads - x0) / (x1 - x0)


def predict_all(measured: Mapping[int, float], counts: Iterable[int]) -> Dict[int, float]:
    """Every count of `counts` that can be predicted -> seconds."""
    out = {}
    for t in counts:
        s = predict(measured, t)
        if s is not None:
            out[int(t)] = s
    return out


def prediction_accuracy(measured_all: Mapping[int, float], sample_counts: Sequence[int]
                        ) -> dict:
    """Table V's metric for one op: interpolate from the counts in
    `sample_counts` (what the climb measured) and compare with
    `measured_all` (an exhaustive measurement) at every other count inside
    the sampled range. accuracy = 1 - mean(|predicted - measured| / measured);
    None (with points = 0) when nothing was left to predict, e.g. a climb
    with interval 1 measures every count it reaches."""
    sampled = {int(t): measured_all[t] for t in sample_counts if t in measured_all}
    missing = sorted(set(sample_counts) - set(sampled))
    if missing:
        raise ValueError(f"sampled counts {missing} have no exhaustive measurement")
    per: Dict[int, dict] = {}
    if sampled:
        for t in sorted(measured_all):
            if t in sampled:
                continue
            guess = predict(sampled, t)
            if guess is None:
                continue
            actual = float(measured_all[t])
            per[int(t)] = {"measured": actual, "predicted": guess,
                           "rel_error": abs(guess - actual) / actual}
    errors = [p["rel_error"] for p in per.values()]
    return {
        "sampled": sorted(sampled),
        "points": len(errors),
        "accuracy": (1.0 - sum(errors) / len(errors)) if errors else None,
        "mean_rel_error": (sum(errors) / len(errors)) if errors else None,
        "max_rel_error": max(errors) if errors else None,
        "per_count": per,
    }


def aggregate(results: Iterable[dict]) -> dict:
    """Average accuracy over ops, as Table V averages over all operations of
    a model (ops with nothing to predict do not count)."""
    scored: List[dict] = [r for r in results if r.get("accuracy") is not None]
    if not scored:
        return {"ops": 0, "points": 0, "accuracy": None, "max_rel_error": None}
    return {
        "ops": len(scored),
        "points": sum(r["points"] for r in scored),
        "accuracy": sum(r["accuracy"] for r in scored) / len(scored),
        "max_rel_error": max(r["max_rel_error"] for r in scored),
    }


def format_accuracy(acc: Optional[dict]) -> str:
    """One line for summaries: Table V's number, or why there is none."""
    if not acc or acc.get("accuracy") is None:
        x = (acc or {}).get("interval")
        return ("prediction accuracy: nothing to predict (every count up to the team size "
                f"was measured{f' with interval {x}' if x else ''})")
    x = f", interval {acc['interval']}" if acc.get("interval") else ""
    return (f"prediction accuracy {acc['accuracy']:.1%} over {acc['ops']} op(s), "
            f"{acc['points']} predicted count(s){x}; worst error {acc['max_rel_error']:.1%}")
