"""`hwtune run`, `hwtune check` and `hwtune compare` results in the report:
the latest run of every graph, check of every suite and comparison of every
model, each with its history, and
the key figures of any one stored run (what `--compare run:ID run:ID` puts
side by side)."""

import json
from typing import Callable, Dict, List, Optional

from hwtune.errors import UsageError
from hwtune.report.figures import Figure, _fig, model_figures, scan_figures

# hwtune.graph.autodiff names a model's training step "<model>.train".
TRAIN_SUFFIX = ".train"
# Entries of a run's or a check's history kept in the document (newest last);
# older ones stay in results.db and in the history figures.
MAX_HISTORY = 20


def _graph_measurement(db, run_id: int) -> Optional[dict]:
    ms = [m for m in db.measurements(run_id, bench="graph") if m["median_s"] is not None]
    return ms[-1] if ms else None


def _run_entry(db, run: dict, m: dict) -> dict:
    facts = db.facts(run["run_id"])
    check, memory = facts.get("check"), facts.get("memory")
    cfg = run["options"].get("config") or m["params"].get("config") or {}
    return {"run_id": run["run_id"], "started_at": run["started_at"],
            "hwtune_version": run["hwtune_version"], "status": run["status"],
            "model": m["op"], "model_path": run["options"].get("model"),
            "vars": run["options"].get("vars") or {},
            "train": train_of(run["options"], m["op"]),
            "graph_hash": m["params"].get("graph_hash"),
            "median_s": m["median_s"], "mad_s": m["mad_s"], "gflops": m["value"],
            "samples": m["n_samples"], "noisy": m["status"] == "noisy",
            "kernel_variant": m["kernel_variant"], "config": cfg,
            "config_source": run["options"].get("config_source"),
            "check_ok": check.get("ok") if isinstance(check, dict) else None,
            # the planned tensor arena (runner.arena_fact); None for runs
            # stored before it was recorded
            "arena_bytes": memory.get("arena_bytes") if isinstance(memory, dict) else None}


def run_results(db, host_key: str, until: Optional[str] = None) -> List[dict]:
    """Per graph run with `hwtune run`: its latest run and the ones before."""
    by_graph: Dict[str, List[dict]] = {}
    for run in db.runs(host_key, "run", until=until):
        m = _graph_measurement(db, run["run_id"])
        if m is None:
            continue
        e = _run_entry(db, run, m)
        by_graph.setdefault(e["graph_hash"] or e["model"], []).append(e)
    out = []
    for entries in by_graph.values():
        latest = entries[-1]
        out.append(dict(latest, runs=len(entries), history=[
            {k: e[k] for k in ("run_id", "started_at", "hwtune_version", "median_s", "mad_s",
                               "config_source")} for e in entries[-MAX_HISTORY:]]))
    return sorted(out, key=lambda e: (str(e["model"]), e["started_at"]))


def train_of(options: dict, model: str) -> Optional[dict]:
    """What a run recorded of --train (loss, optimizer), {} for a training
    step stored before runs recorded it (its graph is "<model>.train"), None
    for a forward pass."""
    train = options.get("train")
    if not train and str(model).endswith(TRAIN_SUFFIX):
        return {}
    return train if isinstance(train, dict) else None


def training_pairs(entries: List[dict], fields: Callable[[dict], dict],
                   seconds: str) -> List[dict]:
    """Each training step (entries with a `train` record) beside the forward
    pass of the same model with the same --set values, both the latest of
    their kind; entries carry model, vars and train. fields(entry): what a
    side shows; seconds: the field the step / forward ratio divides. A step
    whose forward pass is not stored stands alone (forward None)."""
    def key(model, e):
        return (model, json.dumps(e["vars"], sort_keys=True))

    forward = {key(e["model"], e): e for e in entries if e["train"] is None}
    out = []
    for e in entries:
        if e["train"] is None:
            continue
        name = e["model"][:-len(TRAIN_SUFFIX)] if e["model"].endswith(TRAIN_SUFFIX) \
            else e["model"]
        f, t = forward.get(key(name, e)), fields(e)
        fw = fields(f) if f else None
        ratio = t[seconds] / fw[seconds] if fw and fw[seconds] and t[seconds] else None
        out.append({"model": name, "vars": e["vars"],
                    "loss": e["train"].get("loss"), "optimizer": e["train"].get("optimizer"),
                    "batch_norm": e["train"].get("batch_norm"), "training": t, "forward": fw,
                    "step_over_forward": None if ratio is None else round(ratio, 3)})
    return sorted(out, key=lambda r: (str(r["model"]), json.dumps(r["vars"], sort_keys=True)))


def run_pairs(runs: List[dict]) -> List[dict]:
    """`run --train` beside `run`: latencies of the latest runs."""
    return training_pairs(runs, lambda e: {k: e.get(k) for k in ("run_id", "median_s", "gflops",
                                                                "noisy", "arena_bytes")},
                          "median_s")


def tuned_pairs(models: List[dict]) -> List[dict]:
    """`tune-graph --train` beside `tune-graph`: tuned latencies (the step
    over the forward pass, both tuned) and each side's tuning speedup.
    tuned_s is what `hwtune run` uses after the tuning: the default's figure
    when the tuning kept the default (nothing stored as tuned)."""
    return training_pairs(models, lambda m: {
        "run_id": m["run_id"], "default_s": m["default"].get("median_s"),
        "tuned_s": (m["tuned"] or m["default"]).get("median_s"), "speedup": m.get("speedup")},
        "tuned_s")


def _check_entry(run: dict, fact: dict) -> dict:
    return {"run_id": run["run_id"], "started_at": run["started_at"],
            "hwtune_version": run["hwtune_version"], "suite": fact.get("suite"),
            "mode": fact.get("mode"), "status": fact.get("status"),
            "exit_code": fact.get("exit_code"), "counts": fact.get("counts") or {},
            "noise_floor": fact.get("noise_floor"),
            "figures": [{k: f.get(k) for k in ("name", "unit", "status", "ratio",
                                               "current_median", "baseline_median", "reason")}
                        for f in fact.get("figures") or [] if isinstance(f, dict)]}


def check_results(db, host_key: str, until: Optional[str] = None) -> List[dict]:
    """Per suite checked with `hwtune check`: its latest check and the ones
    before (status and counts)."""
    by_suite: Dict[str, List[dict]] = {}
    for run in db.runs(host_key, "check", until=until):
        fact = db.facts(run["run_id"]).get("check")
        if isinstance(fact, dict) and fact.get("suite"):
            by_suite.setdefault(fact["suite"], []).append(_check_entry(run, fact))
    out = []
    for suite, entries in sorted(by_suite.items()):
        out.append(dict(entries[-1], checks=len(entries), history=[
            {k: e[k] for k in ("run_id", "started_at", "hwtune_version", "status", "counts")}
            for e in entries[-MAX_HISTORY:]]))
    return out


def compare_results(db, host_key: str, until: Optional[str] = None) -> List[dict]:
    """Per model compared with `hwtune compare`: its latest comparison
    (each side's median and ratio to hwtune's) and the ones before."""
    by_model: Dict[str, List[dict]] = {}
    for run in db.runs(host_key, "compare", until=until):
        fact = db.facts(run["run_id"]).get("compare")
        if not isinstance(fact, dict) or not isinstance(fact.get("sides"), list):
            continue
        sides = [{"key": sd.get("key"), "name": sd.get("name"), "median_s": sd.get("median_s"),
                  "ratio": sd.get("ratio"), "agree": sd.get("agree")}
                 for sd in fact["sides"] if isinstance(sd, dict)]
        if not sides:
            continue
        e = {"run_id": run["run_id"], "started_at": run["started_at"],
             "hwtune_version": run["hwtune_version"], "model": str(fact.get("model")),
             "graph_hash": run["options"].get("graph_hash"), "threads": fact.get("threads"),
             "reps": fact.get("reps"), "ok": fact.get("ok"), "sides": sides}
        by_model.setdefault(e["graph_hash"] or e["model"], []).append(e)
    out = []
    for entries in by_model.values():
        out.append(dict(entries[-1], compares=len(entries), history=[
            {k: e[k] for k in ("run_id", "started_at", "hwtune_version", "sides")}
            for e in entries[-MAX_HISTORY:]]))
    return sorted(out, key=lambda e: (e["model"], e["started_at"]))


def run_figures(entry: dict) -> List[Figure]:
    name = entry["model"]
    return [_fig(f"run:{name}:latency", f"{name} run latency", entry["median_s"], "s",
                 "lower"),
            _fig(f"run:{name}:gflops", f"{name} run GFLOP/s", entry["gflops"], "GFLOP/s",
                 "higher")]


def check_figures(entry: dict) -> List[Figure]:
    out = []
    for f in entry["figures"]:
        unit = f.get("unit") or ""
        # check figures are times unless their unit is a rate
        better = "higher" if "/s" in unit or unit.upper().startswith("GFLOP") else "lower"
        out.append(_fig(f"check:{entry['suite']}:{f['name']}",
                        f"{entry['suite']}: {f['name']}", f.get("current_median"), unit, better))
    return out


def one_run(db, run_id: int) -> dict:
    """The key figures of one stored run of any kind, for --compare run:ID."""
    run = db.run(run_id)
    kind, figs = run["kind"], []
    if kind == "run":
        m = _graph_measurement(db, run_id)
        if m is not None:
            figs = run_figures(_run_entry(db, run, m))
    elif kind == "check":
        fact = db.facts(run_id).get("check")
        if isinstance(fact, dict):
            figs = check_figures(_check_entry(run, fact))
    elif kind == "dynamic":
        from hwtune.report.dynamic_results import run_figures as dynamic_run_figures
        figs = dynamic_run_figures(db, run_id)
    elif kind == "tune":
        s = db.facts(run_id).get("tune_summary")
        if isinstance(s, dict):
            figs = model_figures({"model": s.get("model"), "default": s.get("default") or {},
                                  "tuned": s.get("tuned") or {}, "speedup": s.get("speedup")})
    else:
        from hwtune.scan import summary as scan_summary
        figs = scan_figures(scan_summary.load_run(db, run_id))
    if not figs:
        raise UsageError(f"run {run_id} ({kind}, {run['status']}) stored no figures to compare")
    return {"run": run, "figures": figs}
