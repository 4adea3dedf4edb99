"""`hwtune plan` without the click layer: one 'plan' run in results.db
holding the calibration it measured, the fitted parameters and, with
validation, every predicted-vs-measured row; the document every output
format shows (kind "plan")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from hwtune.db.lifecycle import finishing
from hwtune.planner import inputs, search, validate
from hwtune.planner.beside import BesideProbes

Progress = Callable[[str], None]


@dataclass
class PlanOptions:
    cores: Sequence[int] = (16, 32, 64)
    machine: Optional[str] = None      # a TOML file or bundled name; None: this host scaled
    validate: bool = False
    fresh: bool = False                # profile and calibrate again
    # validation: predict from the machine's scaling figures probed beside
    # the samples (beside.py); False: from the stored scan only
    beside: bool = True


def _host_doc(fp: dict, host_key: str) -> dict:
    from hwtune.native.isa import selected_isa
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"host_key": host_key, "cpu_model": fp.get("cpu_model"), "isa": selected_isa(),
            "cores": fp.get("usable_cpus"), "load_1min": load}


def _rows():
    from hwtune.native import sched
    return list(sched.schedulers().values())


def run_plan(db, host_key: str, fp: dict, graph, graph_hash: str, opts: PlanOptions, *,
             progress: Optional[Progress] = None) -> dict:
    """Predictions (or, with opts.validate, the validation on this host) as
    the plan document."""
    progress = progress or (lambda m: None)
    run_id = db.start_run(host_key, "plan", {
        "model": graph.name, "graph_hash": graph_hash, "cores": list(opts.cores),
        "machine": opts.machine, "validate": opts.validate, "fresh": opts.fresh})
    doc = {"model": graph.name, "graph_hash": graph_hash, "ops": len(graph.ops),
           "db": str(db.path), "run_id": run_id, "host": _host_doc(fp, host_key)}
    with finishing(db, run_id, "plan run", kept="the calibration and profiles measured so far "
                   "are kept"):
        data = "scan" if opts.validate else "all"
        max_cores = max(opts.cores) if not opts.validate else None
        p, fits = inputs.build(db, host_key, fp, graph, run_id=run_id, machine=(
            None if opts.validate else opts.machine), max_cores=max_cores, data=data,
            fresh=opts.fresh, fresh_profiles=opts.validate, progress=progress)
        try:
            p.order = inputs.order_scales(db, host_key, run_id, p, graph_hash, _rows(),
                                          measure=opts.validate or opts.fresh,
                                          progress=progress)
            # per scheduler: its order's 1-thread op total over the sequential one's
            doc["order_vs_sequential"] = {
                k: float(p.t1_for(k).sum() / p.t1.sum()) for k in p.order if p.t1.sum() > 0}
            doc.update(machine=p.target.to_json(), fit_data=data,
                       fits=[f.to_json() for f in fits], calibration=p.calibration.to_json())
            if opts.validate:
                doc["mode"] = "validate"
                load: dict = {}
                probes = (BesideProbes(p.scan, p.host.cores, graph=p.graph)
                          if opts.beside else None)
                try:
                    rows = validate.validate(
                        p, _rows(), p.host.cores, progress=progress, load=load, beside=probes,
                        repredict=lambda figs, cal, t1w: inputs.assemble(
                            fp, figs, cal, p.graph, p.ops, inputs.t1_array(p.ops, t1w, p.t1),
                            order=p.order)[0])
                finally:
                    if probes is not None:
                        probes.close()
                if probes is not None:
                    load["beside"] = probes.summary()
                for r in rows:
                    db.add_validation(host_key, run_id, dict(
                        r.to_json(), model=graph.name, graph_hash=graph_hash,
                        isa=doc["host"]["isa"]))
                js = [r.to_json() for r in rows]
                doc["validation"] = {"rows": js, "summary": validate.summary(js),
                                     "summary_paired": validate.paired_summary(js), **load}
                if probes is not None:
                    doc["validation"]["summary_stored_scan"] = validate.summary(
                        js, "predicted_stored_s")
            else:
                doc["mode"] = "predict"
                inputs.check_target_cores(p.target, opts.cores)
                results = search.plan(p, opts.cores, _rows(), progress)
                doc["cores"] = results
                doc["chart"] = {k: [[c, s] for c, s in v]
                                for k, v in search.chart_series(results).items()}
                seq = [r["schedulers"].get("sequential", {}).get("best") for r in results]
                doc["speedup_vs_sequential"] = [
                    (s["latency_s"] / r["best"]["latency_s"]) if s else None
                    for s, r in zip(seq, results)]
        finally:
            p.close()
    db.add_fact(run_id, "plan_summary", {k: v for k, v in doc.items()
                                         if k in ("model", "mode", "cores", "validation")})
    return doc


def host_validations(db, host_key: str) -> dict:
    """The report's section: the latest validation rows of every model on
    this host, with their summary."""
    rows = [dict(r, rel_error=r["rel_error"]) for r in db.validations(host_key)]
    return {"rows": rows, "summary": validate.summary(rows)}
