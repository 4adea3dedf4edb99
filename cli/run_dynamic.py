"""`hwtune run MODEL --inputs FILE`: a dynamic model (a vertex function over
per-sample input graphs) on the engine, thin over hwtune.dynamic."""

from __future__ import annotations

import json
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


def run_dynamic(model_arg, inputs, batches, policies, chunk, executors, threads, pin,
                iterations, overrides, check, as_json):
    from hwtune.dynamic.executor import DynConfig, read_samples
    from hwtune.dynamic.measure import measure
    from hwtune.dynamic.model import load_dynamic
    from hwtune.dynamic.sources import resolve_dynamic
    from hwtune.native.dynamic import POLICIES
    from hwtune.native.isa import selected_isa

    batch_list = parse_list(batches or "64", "--batch", int)
    policy_list = parse_list(policies or "batched", "--policy")
    for p in policy_list:
        if p not in POLICIES:
            raise UsageError(f"invalid --policy {p!r}: one of {', '.join(POLICIES)}")
    for b in batch_list:
        if b < 1:
            raise UsageError(f"invalid --batch {b}: must be >= 1")
    if iterations < 1:
        raise UsageError(f"invalid --iterations {iterations}: must be >= 1")
    model = load_dynamic(resolve_dynamic(model_arg), overrides)
    samples = read_samples(model, inputs)
    configs = [DynConfig(policy=p, batch=b, chunk=chunk, executors=executors or 1,
                         threads=threads, pin=True if pin is None else pin)
               for b in batch_list for p in policy_list]
    results = measure(model, samples, configs, reps=iterations, check=check)
    serial = {r.config.batch: r for r in results if r.config.policy == "serial"}
    if as_json:
        click.echo(json.dumps({
            "model": model.name, "inputs": inputs, "samples": samples.count,
            "vertices": samples.n_vertices, "isa": selected_isa(), "iterations": iterations,
            "results": [r.to_json() for r in results]}, indent=2))
    else:
        click.echo(f"model:    {model.name} ({len(model.graph.ops)} ops in F and readouts, "
                   f"{len(model.states)} states)")
        click.echo(f"inputs:   {inputs}: {samples.count} samples, {samples.n_vertices} "
                   f"vertices, {samples.n_edges} child links")
        click.echo(f"engine:   {results[0].config.executors} executor x {results[0].threads} "
                   f"threads, kernels {selected_isa()}, {iterations} passes each, interleaved")
        click.echo(f"{'policy':<9} {'batch':>5} {'samples/s':>11} {'pass (ms)':>10} "
                   f"{'F calls':>8} {'rows/call':>9} {'vs serial':>9}  check")
        for r in results:
            base = serial.get(r.config.batch)
            vs = f"{base.median_s / r.median_s:.2f}x" if base else "-"
            chk = "-" if r.check is None else (
                f"{'ok' if r.check['ok'] else 'MISMATCH'} ({r.check['rel']:.1e})")
            click.echo(f"{r.config.policy:<9} {r.config.batch:>5} {r.samples_per_s:>11.1f} "
                       f"{r.median_s * 1e3:>10.2f} {r.groups:>8} "
                       f"{r.rows / max(r.groups, 1):>9.1f} {vs:>9}  {chk}")
    bad = [r for r in results if r.check is not None and not r.check["ok"]]
    if bad:
        from hwtune.engine.runner import OutputMismatch
        c = bad[0].check
        raise OutputMismatch(f"outputs of policy {bad[0].config.policy} at batch "
                             f"{bad[0].config.batch} differ from the numpy reference: max "
                             f"|engine - numpy| {c['max_abs']:.3g} on {c['output']} is "
                             f"{c['rel']:.2g} x max|numpy| (tolerance {c['tolerance']:g})")
