"""Dynamic models in the report: per model and sample set, the latest
figure of every (policy, batch) stored by `hwtune run --inputs` (the
batch-size curve per policy), and the key figures of one such run (history,
--compare run:ID run:ID)."""

from typing import Dict, List, Optional, Tuple

from hwtune.report.figures import Figure, _fig

POINT_KEYS = ("policy", "batch", "executors", "threads", "chunk", "pinned", "config_source",
              "op_threads", "samples_per_s", "median_s", "mad_s", "check_status", "check_rel",
              "run_id", "created_at", "kernel_variant")


def dynamic_results(db, host_key: str, until: Optional[str] = None) -> List[dict]:
    """One entry per (model, samples file digest) measured on the host:
    curves {policy: [point per batch, ascending]} from the latest row of
    each (policy, batch) in runs that finished (or were interrupted after
    storing some)."""
    by_set: Dict[Tuple[str, str], dict] = {}
    for run in db.runs(host_key, "dynamic", until=until):
        rows = db.dynamic_runs(run_id=run["run_id"])
        for row in rows:
            e = by_set.setdefault((row["model_hash"], row["samples_digest"]), {
                "model": row["model"], "model_hash": row["model_hash"],
                "inputs": row["inputs"], "samples_digest": row["samples_digest"],
                "samples": row["n_samples"], "vertices": row["n_vertices"], "run_ids": [],
                "latest": {}})
            e["model"], e["inputs"] = row["model"], row["inputs"]
            if run["run_id"] not in e["run_ids"]:
                e["run_ids"].append(run["run_id"])
            e["latest"][(row["policy"], row["batch"])] = {k: row[k] for k in POINT_KEYS}
    out = []
    for e in by_set.values():
        curves: Dict[str, List[dict]] = {}
        for (policy, _), point in sorted(e.pop("latest").items()):
            if point["samples_per_s"] is not None:
                curves.setdefault(policy, []).append(point)
        if curves:
            e["curves"] = curves
            e["runs"] = len(e["run_ids"])
            out.append(e)
    return sorted(out, key=lambda e: (e["model"], e["samples_digest"]))


def dynamic_figures(entry: dict) -> List[Figure]:
    """samples/s of each (policy, batch) of one model and sample set."""
    name = f"{entry['model']}@{entry['samples_digest'][:8]}"
    return [_fig(f"dyn:{name}:{policy}:b{p['batch']}",
                 f"{entry['model']} {policy} b{p['batch']} samples/s", p["samples_per_s"],
                 "samples/s", "higher")
            for policy, points in entry["curves"].items() for p in points]


def run_figures(db, run_id: int) -> List[Figure]:
    """The figures of one 'dynamic' run (every model and sample set it measured)."""
    rows = db.dynamic_runs(run_id=run_id)
    figs: List[Figure] = []
    sets: Dict[Tuple[str, str], dict] = {}
    for row in rows:
        e = sets.setdefault((row["model_hash"], row["samples_digest"]), {
            "model": row["model"], "samples_digest": row["samples_digest"], "curves": {}})
        if row["samples_per_s"] is not None:
            e["curves"].setdefault(row["policy"], []).append(
                {k: row[k] for k in POINT_KEYS})
    for e in sets.values():
        figs += dynamic_figures(e)
    return figs
