"""`hwtune run MODEL --inputs FILE` as one library call: every (policy,
batch) resolved to its config (hwtune.dynamic.configs), measured
interleaved and checked (hwtune.dynamic.measure), each result stored as a
dynamic_runs row of one 'dynamic' run, and the document the output layer
shows (kind "dynamic", hwtune.report.export) returned."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from hwtune.db.lifecycle import finishing
from hwtune.dynamic import configs
from hwtune.dynamic.measure import DynResult, measure
from hwtune.dynamic.model import DynModel


@dataclass
class RunRequest:
    inputs: str                     # the samples file
    batches: Sequence[int]
    policies: Sequence[str]
    flags: Dict[str, object]        # executors, threads, chunk, pin (None: not given)
    iterations: int = 10
    check: bool = False
    use_stored: bool = True         # False: --untuned


def _check_fields(r: DynResult) -> Dict[str, object]:
    if r.check is None:
        return {"check_status": None, "check_rel": None}
    return {"check_status": "ok" if r.check["ok"] else "wrong_answer",
            "check_rel": r.check["rel"]}


def run_dynamic(db, host_key: str, model: DynModel, samples, req: RunRequest, *,
                model_path: str, cpus: Sequence[int], kernel_variant: str,
                cpu_model: Optional[str] = None) -> dict:
    """Measure, store and describe one `hwtune run --inputs`; returns the
    "dynamic" document (its results in (batch, policy) order)."""
    from hwtune.dynamic.model import model_hash
    from hwtune.dynamic.sources import samples_digest

    mhash, digest = model_hash(model), samples_digest(req.inputs)
    notes: List[str] = []
    cfgs, sources = [], []
    for b in req.batches:
        for p in req.policies:
            got = configs.resolve(db, host_key, mhash, p, b, req.flags, cpus=cpus,
                                  use_stored=req.use_stored)
            cfgs.append(got.config)
            sources.append(got.source)
            if got.notice and got.notice not in notes:
                notes.append(got.notice)
    load_before = os.getloadavg()[0]
    run_id = db.start_run(host_key, "dynamic", {
        "model": model_path, "model_hash": mhash, "inputs": req.inputs,
        "samples_digest": digest, "batches": list(req.batches),
        "policies": list(req.policies), "flags": dict(req.flags),
        "iterations": req.iterations, "check": req.check, "untuned": not req.use_stored})
    with finishing(db, run_id, "dynamic run"):
        results = measure(model, samples, cfgs, reps=req.iterations, check=req.check)
        for r, source in zip(results, sources):
            db.add_dynamic_run(run_id, dict(
                model=model.name, model_hash=mhash, inputs=req.inputs, samples_digest=digest,
                n_samples=samples.count, n_vertices=samples.n_vertices,
                policy=r.config.policy, batch=r.config.batch, executors=r.config.executors,
                threads=r.threads, chunk=r.config.chunk, pinned=r.config.pin,
                config_source=source, op_threads=r.config.op_threads or {},
                seconds=r.seconds, median_s=r.median_s, mad_s=r.to_json()["mad_s"],
                samples_per_s=r.samples_per_s, groups=r.groups, rows=r.rows,
                kernel_variant=kernel_variant, **_check_fields(r)))
    serial = {r.config.batch: r for r in results if r.config.policy == "serial"}
    rows = []
    for r, source in zip(results, sources):
        base = serial.get(r.config.batch)
        rows.append(dict(r.to_json(), config_source=source,
                         op_threads=len(r.config.op_threads or {}),
                         vs_serial=(base.median_s / r.median_s) if base else None))
    return {"model": model.name, "model_hash": mhash, "model_path": model_path,
            "inputs": req.inputs, "samples_digest": digest, "samples": samples.count,
            "vertices": samples.n_vertices, "edges": samples.n_edges,
            "ops": len(model.graph.ops), "states": len(model.states), "isa": kernel_variant,
            "cpu": cpu_model, "iterations": req.iterations,
            "load": [load_before, os.getloadavg()[0]], "run_id": run_id,
            "db": str(db.path), "notes": notes, "results": rows}


def mismatch(doc: dict) -> Optional[str]:
    """The first result whose outputs differ from the reference, as the
    sentence `hwtune run` fails with (None: every checked result is ok)."""
    for r in doc["results"]:
        c = r.get("check")
        if c is not None and not c["ok"]:
            return (f"outputs of policy {r['policy']} at batch {r['batch']} differ from the "
                    f"numpy reference: max |engine - numpy| {c['max_abs']:.3g} on "
                    f"{c['output']} is {c['rel']:.2g} x max|numpy| (tolerance "
                    f"{c['tolerance']:g})")
    return None
