"""`hwtune plan` without the click layer: one 'plan' run in results.db
holding the calibration it measured, the fitted parameters and, with
validation, every predicted-vs-measured row; the document every output
format shows (kind "plan")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from hwtune.db.lifecycle import finishing
from hwtune.planner import inputs, intervals, search, validate
from hwtune.planner.beside import BesideProbes

Progress = Callable[[str], None]


@dataclass
class PlanOptions:
    cores: Sequence[int] = (16, 32, 64)
    machine: Optional[str] = None      # a TOML file or bundled name; None: this host scaled
    validate: bool = False
    fresh: bool = False                # profile and calibrate again
    # validation: also probe the machine's scaling figures beside the samples
    # and predict again from them (beside.py), a diagnostic shown apart
    explain: bool = False
    # validation: take the inputs on this many of the host's CPUs (a scratch
    # database, fromcores.py) and validate on all of them; None: all
    from_cores: Optional[int] = None
    # --from-cores: keep the scratch database here (None: removed after)
    keep_inputs: Optional[str] = None


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
        "machine": opts.machine, "validate": opts.validate, "fresh": opts.fresh,
        "from_cores": opts.from_cores})
    doc = {"model": graph.name, "graph_hash": graph_hash, "ops": len(graph.ops),
           "db": str(db.path), "run_id": run_id, "host": _host_doc(fp, host_key)}
    with finishing(db, run_id, "plan run", kept="the calibration and profiles measured so far "
                   "are kept"):
        # One prediction path: both modes predict from the stored scan, the
        # stored 1-thread profiles (in each scheduler's order) and the
        # machine description, measuring only what is missing (or all of it
        # with --fresh).
        data = "scan"
        here = int(fp.get("usable_cpus") or 1)
        if opts.validate and opts.from_cores is not None and opts.from_cores < here:
            # the same path on inputs taken on fewer CPUs than the truth
            from hwtune.planner import fromcores
            p, fits, doc["from_cores"] = fromcores.inputs_on(
                opts.from_cores, graph, graph_hash, _rows(), host_cores=here,
                progress=progress, keep=opts.keep_inputs)
        else:
            max_cores = max(opts.cores) if not opts.validate else None
            p, fits = inputs.build(db, host_key, fp, graph, run_id=run_id, machine=(
                None if opts.validate else opts.machine), max_cores=max_cores, data=data,
                fresh=opts.fresh, progress=progress)
        try:
            if not doc.get("from_cores"):
                p.order = inputs.order_scales(db, host_key, run_id, p, graph_hash, _rows(),
                                              fresh=opts.fresh, progress=progress)
            _describe(doc, p, data, fits)
            if opts.validate:
                doc["mode"] = "validate"
                doc["validation"] = _validate(db, host_key, run_id, fp, graph, graph_hash, p,
                                              opts, doc["host"]["isa"], progress, cores=here)
            else:
                doc["mode"] = "predict"
                _predict(doc, db, host_key, p, opts, progress)
        finally:
            p.close()
    db.add_fact(run_id, "plan_summary", {k: v for k, v in doc.items()
                                         if k in ("model", "mode", "cores", "validation")})
    return doc


def _describe(doc: dict, p, data: str, fits) -> None:
    """The inputs' part of the document: the machine, the fits, the
    calibration and each scheduler's 1-thread order factor."""
    # per scheduler: its order's 1-thread op total over the sequential one's
    doc["order_vs_sequential"] = {
        k: float(p.t1_for(k).sum() / p.t1.sum()) for k in p.order if p.t1.sum() > 0}
    doc["whole_run"] = p.whole_run
    doc.update(machine=p.target.to_json(), fit_data=data,
               fits=[f.to_json() for f in fits], calibration=p.calibration.to_json())


def _predict(doc: dict, db, host_key: str, p, opts: PlanOptions, progress) -> None:
    inputs.check_target_cores(p.target, opts.cores)
    results = search.plan(p, opts.cores, _rows(), progress)
    doc["cores"] = results
    doc["chart"] = {k: [[c, s] for c, s in v]
                    for k, v in search.chart_series(results).items()}
    seq = [r["schedulers"].get("sequential", {}).get("best") for r in results]
    doc["speedup_vs_sequential"] = [
        (s["latency_s"] / r["best"]["latency_s"]) if s else None
        for s, r in zip(seq, results)]
    doc["intervals"] = _intervals(db, host_key, p, doc["host"]["isa"], results)


def _intervals(db, host_key: str, p, isa: str, results) -> dict:
    """Each core count's best prediction with the range this host's stored
    validations allow (intervals.py); 'records': the validations used
    (none: no interval, and the document says so)."""
    shares = intervals.family_shares(p.ops, p.t1)
    records = intervals.stored(db, host_key, isa)
    ranges = intervals.family_ranges(records)
    iv = intervals.interval(shares, ranges)
    for r in results:
        r["best"]["interval_s"] = intervals.latency_range(r["best"]["latency_s"], iv)
    return {"shares": shares, "ranges": ranges, "error_lo": iv["lo"], "error_hi": iv["hi"],
            "missing": iv["missing"],
            "records": [{"model": x["model"], "run_id": x["run_id"], "configs": len(x["errors"]),
                         "from_cores": x.get("from_cores")} for x in records]}


def _validate(db, host_key: str, run_id: int, fp: dict, graph, graph_hash: str, p,
              opts: PlanOptions, isa: str, progress, cores: Optional[int] = None) -> dict:
    """Every configuration on `cores` CPUs (this host's) predicted by p,
    then measured; with opts.explain, the probes beside the samples and
    their prediction as a diagnostic apart. Rows stored with the run."""
    cores = cores or p.host.cores
    if opts.explain and cores != p.host.cores:
        from hwtune.errors import UsageError
        raise UsageError("--explain probes the machine the inputs describe: drop --from-cores")
    load: dict = {}
    probes = BesideProbes(p.scan, cores, graph=p.graph) if opts.explain else None
    try:
        rows = validate.validate(
            p, _rows(), cores, progress=progress, load=load, beside=probes,
            repredict=lambda figs, cal, t1w: _with_gap(inputs.assemble(
                fp, figs, cal, p.graph, p.ops, inputs.t1_array(p.ops, t1w, p.t1),
                order=p.order)[0], p.run_gap_s))
    finally:
        if probes is not None:
            probes.close()
    for r in rows:
        db.add_validation(host_key, run_id, dict(r.to_json(), model=graph.name,
                                                 graph_hash=graph_hash, isa=isa))
    js = [r.to_json() for r in rows]
    intervals.record(db, run_id, graph.name, graph_hash, isa,
                     intervals.family_shares(p.ops, p.t1), js, opts.from_cores)
    out = {"rows": js, "summary": validate.summary(js),
           "summary_undisturbed": validate.undisturbed_summary(js),
           "summary_paired": validate.paired_summary(js), **load}
    if opts.from_cores is not None and cores != p.host.cores:
        out["attribution"] = _attribute(db, host_key, fp, isa, p, js)
    if probes is not None:
        # the stored profiles' 1-thread op total, beside the probed one
        # ("model run, 1 thread (op total)"): what the two predictions'
        # 1-thread rows differ by
        out["explain"] = {"beside": probes.summary(),
                          "op_total_stored_s": float(p.t1.sum()),
                          "summary": validate.summary(js, "predicted_beside_s")}
    return out


def _with_gap(p, gap_s: float):
    """p charging the stored inputs' per-op run gap (inputs.run_gap) too."""
    p.run_gap_s = gap_s
    return p


def _attribute(db, host_key: str, fp: dict, isa: str, p, js) -> dict:
    """--from-cores: each row predicted again with one part from this
    host's own stored inputs (attribute.py), a diagnostic apart."""
    from hwtune.planner import attribute
    got = attribute.from_db(db, host_key, fp, isa)
    if got is None:
        return {"source": None, "note": "no stored scan and multi-core plan calibration of "
                "this host in the database: run `hwtune scan --quick` and `hwtune plan MODEL` "
                "on all its CPUs to see which part a miss comes from"}
    host_all, fits_all, cal_all, source = got
    variants = attribute.variants(p, host_all, fits_all, cal_all)
    try:
        attribute.predict_rows(variants, js, _rows())
    finally:
        for v in variants.values():
            v.close()
    return {"source": source, "parts": attribute.summary(js)}


def host_validations(db, host_key: str) -> dict:
    """The report's section: the latest validation rows of every model on
    this host, with their summary."""
    rows = [dict(r, rel_error=r["rel_error"]) for r in db.validations(host_key)]
    return {"rows": rows, "summary": validate.summary(rows)}
