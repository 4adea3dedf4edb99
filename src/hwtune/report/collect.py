"""Gather everything the report shows from results.db into one JSON-ready
document. Every renderer prints this document and nothing else, so
--format json is complete by construction."""

from typing import Dict, List, Optional, Sequence

from hwtune import __version__
from hwtune.db.timestamps import utc_now
from hwtune.errors import UsageError
from hwtune.report import figures, results, tune_verdict
from hwtune.report.dynamic_results import dynamic_figures, dynamic_results
from hwtune.report.dynamic_results import run_figures as dynamic_run_figures
from hwtune.report.sides import Side, compare_sides, resolve_host
from hwtune.scan import summary as scan_summary

REPORT_VERSION = 1
# Top ops shown per model: the ones that make up most of the time; a longer
# list is in --format json's op_costs.
TOP_OPS = 8
# Convergence series per model: more lines than this do not read in one chart.
MAX_SERIES = 6
# tune-graph's stages, in the order it runs them (tuners/pipeline.py).
STAGE_ORDER = ("sweep", "conv", "hillclimb")
# The options of a tune run the report shows (tune-graph's flags, as
# recorded in the run: --storage without its password).
TUNE_OPTIONS = ("budget_s", "trials", "only", "search", "reps", "strategy", "storage")


def _host(db, host_key: str) -> dict:
    row = db.host(host_key)
    fp = row["fingerprint"]
    caches = fp.get("caches") or {}
    return {
        "host_key": host_key,
        "cpu_model": fp.get("cpu_model"),
        "vendor": fp.get("vendor"),
        "arch": fp.get("arch"),
        "sockets": fp.get("sockets"),
        "physical_cores": fp.get("physical_cores"),
        "logical_cpus": fp.get("logical_cpus"),
        "usable_cpus": fp.get("usable_cpus"),
        "numa_nodes": fp.get("numa_nodes"),
        "isa_best": fp.get("isa_best"),
        "kernel_variants": fp.get("kernel_variants"),
        "isa": sorted(k for k, v in (fp.get("isa") or {}).items() if v),
        "caches": {k: (c or {}).get("size_bytes") for k, c in sorted(caches.items())},
        "cpu_quota": fp.get("cpu_quota"),
        "kernel_release": fp.get("kernel_release"),
        "first_seen": row["first_seen"],
        "last_seen": row["last_seen"],
    }


def _scan_at(db, side: Side) -> Optional[dict]:
    runs = db.runs(side.host_key, "scan", until=side.until)
    if not runs:
        return None
    return scan_summary.load_run(db, runs[-1]["run_id"])


def _subject_label(subject: str, graph_hash: str) -> str:
    if subject == graph_hash:
        return "graph"
    # workload key "conv2d|[1,3,32,32];[16,3,3,3]|{...}": op type and first input.
    parts = subject.split("|")
    shape = parts[1].split(";")[0] if len(parts) > 1 else ""
    return f"{parts[0]} {shape}".strip()[:32]


def _convergence(db, run_id: int, graph_hash: str) -> List[dict]:
    """Best-so-far median over each (tuner, subject)'s trials in id order;
    a failed trial keeps the previous best and is counted."""
    series: Dict[tuple, dict] = {}
    for t in db.trials(run_id=run_id):
        s = series.setdefault((t["tuner"], t["subject"]), {
            "tuner": t["tuner"], "subject": t["subject"], "search": t["search"],
            "label": f"{t['tuner']}: {_subject_label(t['subject'], graph_hash)}",
            "points": [], "failed": 0})
        best = s["points"][-1]["best_s"] if s["points"] else None
        ok = t["status"] == "ok" and t["median_s"] is not None
        if ok:
            best = t["median_s"] if best is None else min(best, t["median_s"])
        else:
            s["failed"] += 1
        s["points"].append({"trial": len(s["points"]) + 1, "status": t["status"],
                            "median_s": t["median_s"], "best_s": best})
    out = sorted(series.values(), key=lambda s: -len(s["points"]))
    for s in out:
        firsts = [p["best_s"] for p in s["points"] if p["best_s"] is not None]
        s["first_s"] = firsts[0] if firsts else None
        s["best_s"] = firsts[-1] if firsts else None
        s["trials"] = len(s["points"])
    return out


def _op_types(db, graph_hash: str) -> Dict[str, str]:
    g = db.graph(graph_hash)
    ops = (g or {}).get("expanded", {}).get("ops", []) if g else []
    return {o.get("name"): o.get("op") for o in ops if isinstance(o, dict)}


def _timeline(db, host_key: str, graph_hash: str, until: Optional[str],
              tune_run: int) -> Optional[dict]:
    run_id = db.traced_run(host_key, graph_hash, until=until, prefer=tune_run)
    if run_id is None:
        return None
    it = db.last_trace_iteration(run_id)
    events = db.trace(run_id, it)
    if not events:
        return None
    t0 = min(e["start_s"] for e in events)
    evs = [{"op_name": e["op_name"], "op_type": e["op_type"], "executor": e["executor"],
            "threads": e["threads"], "start_s": e["start_s"] - t0, "end_s": e["end_s"] - t0}
           for e in events]
    run = db.run(run_id)
    return {"run_id": run_id, "iteration": it, "kind": run["kind"],
            "started_at": run["started_at"],
            "config": run["options"].get("config"),
            "config_source": run["options"].get("config_source"),
            "makespan_s": max(e["end_s"] for e in evs),
            "executors": sorted({e["executor"] for e in evs}), "events": evs}


def _top_ops(costs: Dict[str, float], types: Dict[str, str], source: str) -> dict:
    total = sum(v for v in costs.values() if v) or 0.0
    ranked = sorted(((k, v) for k, v in costs.items() if v is not None), key=lambda kv: -kv[1])
    return {"source": source, "total_s": total, "ops": [
        {"op": k, "op_type": types.get(k), "seconds": v,
         "share": round(v / total, 4) if total else None} for k, v in ranked[:TOP_OPS]],
        "count": len(ranked)}


def _in_pipeline_order(stages: dict) -> dict:
    """Facts are stored with sorted keys; show stages in the order they ran."""
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    return dict(sorted(stages.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _model(db, run: dict, summary: dict, until: Optional[str]) -> dict:
    host_key, gh = run["host_key"], summary["graph_hash"]
    types = _op_types(db, gh)
    tuned_cfg = db.engine_config(host_key, gh, "tuned")
    timeline = _timeline(db, host_key, gh, until, run["run_id"])
    # Per-op seconds: the tuned config's profiled costs, else the trace's
    # op durations (a run without costs still shows where its time went).
    costs = dict((tuned_cfg or {}).get("op_cost") or {})
    source = "profiled op costs of the tuned config"
    if not costs and timeline:
        for e in timeline["events"]:
            costs[e["op_name"]] = costs.get(e["op_name"], 0.0) + e["end_s"] - e["start_s"]
            types.setdefault(e["op_name"], e["op_type"])
        source = f"op durations in the trace of run {timeline['run_id']}"
    return {
        "model": summary.get("model") or run["options"].get("model"),
        "model_path": run["options"].get("model"),
        "vars": run["options"].get("vars") or {},
        "train": results.train_of(run["options"], summary.get("model") or ""),
        "graph_hash": gh,
        "run_id": run["run_id"],
        "started_at": run["started_at"],
        "hwtune_version": run["hwtune_version"],
        "status": run["status"],
        "options": {k: run["options"][k] for k in TUNE_OPTIONS
                    if run["options"].get(k) not in (None, [], "")},
        "default": summary.get("default") or {},
        "tuned": summary.get("tuned") or {},
        "speedup": summary.get("speedup"),
        "verdict": summary.get("verdict") or tune_verdict.legacy(
            summary.get("default") or {}, summary.get("tuned") or {}, summary.get("speedup")),
        "candidates": summary.get("candidates") or [],
        "why": summary.get("why") or [],
        "tuning_s": summary.get("tuning_s"),
        "stages": _in_pipeline_order(summary.get("stages") or {}),
        "accuracy": summary.get("accuracy"),
        "stored_config_id": tuned_cfg["id"] if tuned_cfg else None,
        "convergence": _convergence(db, run["run_id"], gh)[:MAX_SERIES],
        "top_ops": _top_ops(costs, types, source) if costs else None,
        "timeline": timeline,
    }


def _tuned_models(db, side: Side) -> List[dict]:
    """The latest tuning of every model (by graph hash) up to side.until."""
    latest: Dict[str, tuple] = {}
    for run in db.runs(side.host_key, "tune", until=side.until):
        summary = db.facts(run["run_id"]).get("tune_summary")
        if isinstance(summary, dict) and summary.get("graph_hash"):
            latest[summary["graph_hash"]] = (run, summary)
    return [_model(db, run, s, side.until) for run, s in
            sorted(latest.values(), key=lambda rs: str(rs[1].get("model")))]


def _history(db, host_key: str, until: Optional[str]) -> List[dict]:
    """Every key figure over every scan and tuning of the host, oldest first."""
    series: Dict[str, dict] = {}

    def add(figs, run):
        for f in figs:
            if f["value"] is None:
                continue
            s = series.setdefault(f["key"], {k: f[k] for k in ("key", "label", "unit",
                                                                  "better")})
            s.setdefault("points", []).append({
                "run_id": run["run_id"], "date": run["started_at"],
                "version": run["hwtune_version"], "value": f["value"]})

    for run in db.runs(host_key, "scan", until=until):
        add(figures.scan_figures(scan_summary.load_run(db, run["run_id"])), run)
    for run in db.runs(host_key, "tune", until=until):
        s = db.facts(run["run_id"]).get("tune_summary")
        if isinstance(s, dict) and s.get("graph_hash"):
            add(figures.model_figures({"model": s.get("model"), "default": s.get("default") or {},
                                       "tuned": s.get("tuned") or {},
                                       "speedup": s.get("speedup")}), run)
    for kind in ("run", "check"):
        for run in db.runs(host_key, kind, until=until):
            try:
                got = results.one_run(db, run["run_id"])
            except UsageError:  # a run that stored no figure (failed early)
                continue
            add(got["figures"], run)
    for run in db.runs(host_key, "dynamic", until=until):
        add(dynamic_run_figures(db, run["run_id"]), run)
    for s in series.values():
        vals = [p["value"] for p in s["points"]]
        s["first"], s["latest"] = vals[0], vals[-1]
        s["change"] = round(vals[-1] / vals[0], 4) if vals[0] else None
        s["versions"] = sorted({p["version"] for p in s["points"]})
    return list(series.values())


def _plan_validation(db, host_key: str) -> dict:
    """hwtune plan --validate's latest figures per model and configuration."""
    from hwtune.planner.session import host_validations
    return host_validations(db, host_key)


def _snapshot(db, side: Side) -> dict:
    scan = _scan_at(db, side)
    models = _tuned_models(db, side)
    runs = results.run_results(db, side.host_key, side.until)
    checks = results.check_results(db, side.host_key, side.until)
    compares = results.compare_results(db, side.host_key, side.until)
    dynamic = dynamic_results(db, side.host_key, side.until)
    if scan is None and not models and not runs and not checks and not dynamic \
            and not compares:
        when = f" on or before {side.label}" if side.until else ""
        raise UsageError(f"host {side.host_key} has no scan, tuning, run, check or compare "
                         f"stored{when} in {db.path}")
    figs = figures.snapshot_figures(scan, models)
    for e in runs:
        figs += results.run_figures(e)
    for e in checks:
        figs += results.check_figures(e)
    for e in dynamic:
        figs += dynamic_figures(e)
    return {"side": side.to_json(), "host": _host(db, side.host_key), "scan": scan,
            "models": models, "runs": runs,
            "training": {"runs": results.run_pairs(runs), "tuned": results.tuned_pairs(models)},
            "checks": checks, "compares": compares, "dynamic": dynamic, "figures": figs}


def _run_compare(db, values: Sequence[str]) -> Optional[dict]:
    """--compare run:ID run:ID: two stored runs side by side (any host,
    same day or not). None when the values are not run references."""
    ids = []
    for v in values:
        kind, sep, num = v.partition(":")
        if not sep or kind != "run":
            return None
        if not num.isdigit():
            raise UsageError(f"--compare {v!r}: a run is run:ID with a numeric run id")
        ids.append(int(num))
    if len(ids) != 2:
        raise UsageError(f"--compare run:ID takes two runs, got {len(ids)}: "
                         f"{', '.join(values)}")
    if ids[0] == ids[1]:
        raise UsageError(f"--compare needs two different runs, both are run {ids[0]}")
    got = [results.one_run(db, i) for i in ids]
    kinds = [g["run"]["kind"] for g in got]
    if kinds[0] != kinds[1]:
        raise UsageError(f"--compare run:{ids[0]} run:{ids[1]}: a {kinds[0]} run and a "
                         f"{kinds[1]} run hold different figures; compare two of one kind")
    sides = []
    for g in got:
        r = g["run"]
        sides.append({"host_key": r["host_key"], "until": None, "run_id": r["run_id"],
                      "kind": r["kind"], "started_at": r["started_at"],
                      "label": f"run {r['run_id']} ({r['kind']}, {r['started_at'][:19]}Z)",
                      "cpu_model": (db.host(r["host_key"]) or {}).get("cpu_model")})
    return {"sides": sides, "rows": figures.ratio_rows(got[0]["figures"], got[1]["figures"]),
            "scan": [None, None]}


def build_report(db, *, host: Optional[str] = None, compare: Sequence[str] = (),
                 this_host: Optional[str] = None) -> dict:
    """The report document for `host` (a key or unique prefix; default
    this_host, the caller's machine). compare: --compare values."""
    host_key = resolve_host(db, host, this_host)
    by_run = _run_compare(db, list(compare)) if compare else None
    sides = [] if by_run else compare_sides(db, host_key, list(compare))
    main = _snapshot(db, Side(host_key, None, "latest"))
    doc = {
        "report_version": REPORT_VERSION,
        "generated_at": utc_now(),
        "hwtune_version": __version__,
        "db": str(db.path),
        "host": main["host"],
        "scan": main["scan"],
        "models": main["models"],
        "runs": main["runs"],
        "training": main["training"],
        "checks": main["checks"],
        "compares": main["compares"],
        "dynamic": main["dynamic"],
        "figures": main["figures"],
        "history": _history(db, host_key, None),
        "compare": by_run,
        "plan_validation": _plan_validation(db, host_key),
    }
    if sides:
        snaps = [_snapshot(db, s) for s in sides]
        doc["compare"] = {
            "sides": [dict(s.to_json(), cpu_model=sn["host"]["cpu_model"])
                      for s, sn in zip(sides, snaps)],
            "rows": figures.ratio_rows(snaps[0]["figures"], snaps[1]["figures"]),
            "scan": [sn["scan"] for sn in snaps],
        }
    return doc
