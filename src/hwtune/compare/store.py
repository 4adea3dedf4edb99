"""A `hwtune compare` result in results.db: a run of kind 'compare', one
measurement per side (bench 'compare', op '<model>:<side>', its samples in
seconds per call) and the whole result as the run's 'compare' fact, which
`hwtune report` shows over time (hwtune.report.results.compare_results)."""

from __future__ import annotations

from typing import Any, Dict

from hwtune.db.lifecycle import finishing
from hwtune.measure.stats import mad, median, rel_spread


def store_compare(db, host_key: str, result, *, graph_hash: str,
                  options: Dict[str, Any]) -> int:
    """Store result (a CompareResult); returns the run id."""
    run_id = db.start_run(host_key, "compare", dict(options, graph_hash=graph_hash))
    with finishing(db, run_id, "compare run"):
        for s in result.sides:
            xs = list(s.samples)
            db.add_measurement(
                run_id, bench="compare", op=f"{result.model}:{s.key}",
                params={"side": s.key, "name": s.name, "describe": s.describe,
                        "graph_hash": graph_hash, "ratio": s.ratio, "agree": s.agree},
                kernel_variant=result.isa, threads=max(1, int(result.threads)), samples=xs,
                median_s=median(xs) if xs else None, mad_s=mad(xs) if xs else None,
                rel_spread=rel_spread(xs) if xs else None,
                value=median(xs) if xs else None, unit="s")
        db.add_fact(run_id, "compare", result.to_json())
    return run_id
