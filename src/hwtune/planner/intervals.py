"""Prediction intervals from this host's validations: each validation
stores, with its run, the signed errors of its rows and the share of the
model's 1-thread time in each op family (family_shares); a plan's
prediction then gets, per family, the range of the errors of the models
that family makes up at least MIN_SHARE of, mixed by the model's own
shares (interval()). A family no stored validation covers is named, not
guessed."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from hwtune.planner.costmodel import COMPUTE_FLOPS_PER_BYTE
from hwtune.planner.opdata import GEMV_FAMILY

FACT = "plan_family_errors"
GEMM, GEMV, MEMORY = "GEMM-like", "GEMV", "memory-bound"
FAMILIES = (GEMM, GEMV, MEMORY)
# A model's errors speak for a family that takes at least this share of its
# 1-thread time: below it the family's own error hides in the others'.
MIN_SHARE = 0.2
# A family below this share of the planned model's time is left out of its
# interval (and not named as unvalidated): it cannot move the total much.
IGNORE_SHARE = 0.05


def family(d) -> str:
    """An op's family (opdata.OpData): the GEMV path, compute-bound ops
    (at least COMPUTE_FLOPS_PER_BYTE, as the cost model's family rule),
    or memory-bound ops."""
    if d.fit_type == GEMV_FAMILY:
        return GEMV
    if d.bytes and d.flops / d.bytes >= COMPUTE_FLOPS_PER_BYTE:
        return GEMM
    return MEMORY


def family_shares(ops, t1: Sequence[float]) -> Dict[str, float]:
    """Family -> share of the 1-thread time (ops: OpData, t1 per op)."""
    t = np.asarray(t1, dtype=np.float64)
    total = float(t.sum())
    out = {f: 0.0 for f in FAMILIES}
    if total <= 0:
        return out
    for d, x in zip(ops, t):
        out[family(d)] += float(x) / total
    return out


def record(db, run_id: int, model: str, graph_hash: str, isa: str, shares: Dict[str, float],
           rows: Sequence[dict], from_cores: Optional[int] = None) -> None:
    """Store a validation's signed errors with the model's family shares."""
    errors = [float(r["rel_error"]) for r in rows if r.get("rel_error") is not None]
    db.add_fact(run_id, FACT, {"model": model, "graph_hash": graph_hash, "isa": isa,
                               "shares": shares, "errors": errors,
                               "from_cores": from_cores})


def stored(db, host_key: str, isa: str) -> List[dict]:
    """The latest recorded validation of each model on this host and ISA."""
    seen, out = set(), []
    for run in reversed(db.runs(host_key, "plan")):
        got = db.facts(run["run_id"]).get(FACT)
        if got and got.get("isa") == isa and got.get("errors") and got["model"] not in seen:
            seen.add(got["model"])
            out.append(dict(got, run_id=run["run_id"]))
    return out


def family_ranges(records: Sequence[dict]) -> Dict[str, dict]:
    """Family -> {lo, hi, models}: the smallest and largest signed error of
    the models that family makes up at least MIN_SHARE of."""
    out = {}
    for f in FAMILIES:
        errs, models = [], []
        for r in records:
            if (r.get("shares") or {}).get(f, 0.0) >= MIN_SHARE:
                errs += r["errors"]
                models.append(r["model"])
        if errs:
            out[f] = {"lo": float(min(errs)), "hi": float(max(errs)), "models": models}
    return out


def interval(shares: Dict[str, float], ranges: Dict[str, dict]) -> dict:
    """The error range of a prediction whose model has these family
    shares: each family's range weighted by its share (families below
    IGNORE_SHARE left out); 'missing': families above it without a range.
    'lo'/'hi' None when no family has one."""
    lo = hi = 0.0
    covered = 0.0
    missing = []
    for f, share in shares.items():
        if share < IGNORE_SHARE:
            continue
        if f in ranges:
            lo += share * ranges[f]["lo"]
            hi += share * ranges[f]["hi"]
            covered += share
        else:
            missing.append(f)
    if covered <= 0:
        return {"lo": None, "hi": None, "missing": missing}
    # the covered families' mix, over their own share
    return {"lo": lo / covered, "hi": hi / covered, "missing": missing}


def latency_range(latency_s: float, iv: dict) -> Optional[List[float]]:
    """[fastest, slowest] measured latency the errors allow: error =
    (predicted - measured) / measured, so measured = predicted / (1 + error)."""
    if iv.get("lo") is None:
        return None
    a, b = (latency_s / (1.0 + iv["hi"]), latency_s / (1.0 + iv["lo"]))
    return [min(a, b), max(a, b)]
