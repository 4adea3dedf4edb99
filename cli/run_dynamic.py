"""`hwtune run MODEL --inputs FILE`: a dynamic model (a vertex function over
per-sample input graphs) on the engine, thin over hwtune.dynamic.runs; the
output goes through hwtune.report.export (kind "dynamic")."""

from __future__ import annotations

from typing import List

import click

from hwtune.errors import UsageError


def parse_list(text: str, what: str, convert=str) -> List:
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise UsageError(f"invalid {what} {text!r}: give a value or a comma-separated list")
    try:
        return [convert(t) for t in items]
    except ValueError:
        raise UsageError(f"invalid {what} {text!r}: not a comma-separated list of "
                         f"{'integers' if convert is int else 'names'}") from None


def parse_batches(text) -> List[int]:
    batches = parse_list(text or "64", "--batch", int)
    for b in batches:
        if b < 1:
            raise UsageError(f"invalid --batch {b}: must be >= 1")
    return batches


def parse_policies(text) -> List[str]:
    from hwtune.native.dynamic import POLICIES
    policies = parse_list(text or "batched", "--policy")
    for p in policies:
        if p not in POLICIES:
            raise UsageError(f"invalid --policy {p!r}: one of {', '.join(POLICIES)}")
    return policies


def run_dynamic(model_arg, inputs, batches, policies, chunk, executors, threads, pin,
                iterations, overrides, check, untuned, db_path, fmt):
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.dynamic.configs import check_flags
    from hwtune.dynamic.executor import read_samples
    from hwtune.dynamic.model import load_dynamic
    from hwtune.dynamic.runs import RunRequest, mismatch, run_dynamic as run_and_store
    from hwtune.dynamic.sources import resolve_dynamic
    from hwtune.engine.runner import OutputMismatch
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import allowed_cpus
    from hwtune.report import export

    export.exporter(fmt, "dynamic")  # refuse an unknown format before measuring
    flags = {"executors": executors, "threads": threads, "chunk": chunk, "pin": pin}
    cpus = allowed_cpus()
    check_flags(flags, cpus)
    req = RunRequest(inputs=inputs, batches=parse_batches(batches),
                     policies=parse_policies(policies), flags=flags, iterations=iterations,
                     check=check, use_stored=not untuned)
    if iterations < 1:
        raise UsageError(f"invalid --iterations {iterations}: must be >= 1")
    model = load_dynamic(resolve_dynamic(model_arg), overrides)
    samples = read_samples(model, inputs)
    fp = machine.fingerprint()
    with ResultsDB.open(db_path) as db:
        host_key = db.upsert_host(fp)
        doc = run_and_store(db, host_key, model, samples, req, model_path=model_arg,
                            cpus=cpus, kernel_variant=selected_isa(),
                            cpu_model=fp.get("cpu_model"))
    for note in doc["notes"]:
        click.echo(f"note: {note}", err=True)
    export.write("dynamic", doc, fmt)
    bad = mismatch(doc)
    if bad:
        raise OutputMismatch(bad)
