"""`hwtune tune-graph MODEL --inputs FILE`: thin click layer over
hwtune.tuners.dynamic_graph; the summary goes through hwtune.report.export
(kind "dynamic-tune")."""

from __future__ import annotations


def tune_dynamic_cmd(model_arg, inputs, batch, policy, budget_s, reps, strategy, overrides,
                     db_path, fmt):
    from hwtune import machine
    from hwtune.cli.progress import tune_progress
    from hwtune.db import ResultsDB
    from hwtune.dynamic.executor import read_samples
    from hwtune.dynamic.model import load_dynamic
    from hwtune.dynamic.sources import resolve_dynamic
    from hwtune.native.threads import allowed_cpus
    from hwtune.report import export
    from hwtune.tuners.dynamic_graph import DynTuneOptions, tune_dynamic

    export.exporter(fmt, "dynamic-tune")
    opts = DynTuneOptions(batch=64 if batch is None else batch, policy=policy or "batched",
                          budget_s=budget_s, reps=reps, strategy=strategy).check()
    model = load_dynamic(resolve_dynamic(model_arg), overrides)
    samples = read_samples(model, inputs)
    fp = machine.fingerprint()
    # Progress lines on stderr ("[stage] message"): stdout stays the result.
    with tune_progress(live=False) as (progress, _):
        with ResultsDB.open(db_path) as db:
            host_key = db.upsert_host(fp)
            doc = tune_dynamic(db, host_key, model, samples, opts, inputs=inputs,
                               model_path=model_arg, cpus=allowed_cpus(),
                               cpu_model=fp.get("cpu_model"), progress=progress)
    export.write("dynamic-tune", doc, fmt)
