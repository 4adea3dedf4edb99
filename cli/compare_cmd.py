"""`hwtune compare`: thin click layer over hwtune.compare."""

from __future__ import annotations

import json
import os

import click

from hwtune.cli.options import db_option, example, json_option, parse_overrides, shape_option
from hwtune.cli.run_cmd import input_files_callback


def _peers(ctx, param, value):
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def _threads(n: int) -> str:
    return f"{n} thread{'' if n == 1 else 's'}"


def _load(xs) -> str:
    return "/".join(f"{x:.2f}" for x in xs)


def markdown(r) -> str:
    lines = [f"### hwtune compare: {r.model}", "",
             f"{r.cpu}, kernels {r.isa}, {_threads(r.threads)}, {r.reps} interleaved samples "
             f"per side (medians); load average {_load(r.load_before)} before, "
             f"{_load(r.load_after)} after; inputs {r.inputs}.", "",
             "| side | how it runs | median | MAD | side / hwtune | outputs |",
             "|---|---|---:|---:|---:|---|"]
    for s in r.sides:
        lines.append(f"| {s.name} | {s.describe} | {_ms(s.median_s)} | {_ms(s.mad_s)} | "
                     f"{s.ratio:.2f}x | {_verdict(s)} |")
    return "\n".join(lines) + "\n"


def _verdict(s) -> str:
    if s.agree is None:
        return "reference"
    word = "ok" if s.agree else "WRONG"
    return f"{word} (max rel. diff {s.max_rel_err:.1e} on {s.worst_output})"


@click.command("compare", epilog=example("hwtune compare resnet.onnx --with ort,torch"))
@click.argument("model")
@click.option("--with", "peers", default="ort,torch", show_default=True, callback=_peers,
              metavar="PEERS", help="peers to run beside hwtune: ort (ONNX Runtime), torch "
                                    "(PyTorch eager); a missing one is skipped with a notice")
@click.option("--reps", type=int, default=10, show_default=True, metavar="N",
              help="interleaved samples per side")
@click.option("--threads", type=int, default=None, metavar="T",
              help="run every side on T threads (hwtune: 1 executor x T) instead of hwtune's "
                   "stored config")
@click.option("--input", "input_files", multiple=True, callback=input_files_callback,
              metavar="NAME=FILE.npy", help="use this input (repeatable); default: seeded values")
@shape_option
@click.option("--set", "overrides", multiple=True, callback=parse_overrides, metavar="NAME=VALUE",
              help="override a model var; for an ONNX model, size a symbolic dimension")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="append the table as Markdown (e.g. $GITHUB_STEP_SUMMARY)")
@db_option
@json_option
def compare(model, peers, reps, threads, input_files, shapes, overrides, md_path, db_path,
            as_json):
    """Run MODEL in hwtune and in ONNX Runtime and PyTorch on the same graph,
    weights and inputs; check that the outputs agree (within 1e-4 of each
    output's largest value, else WRONG and exit 1) and print each side's
    latency (interleaved samples, medians) and its ratio to hwtune.

    MODEL is an ONNX file (ONNX Runtime loads the file itself), a model.json
    or a bundled model's name (exported to ONNX for ONNX Runtime). hwtune
    runs with the stored tuned config of MODEL on this host (`hwtune
    tune-graph MODEL`), else the default; the peers get as many threads.
    PyTorch runs the same graph op by op in eager mode (see docs/compare.md).
    """
    from hwtune import machine
    from hwtune.compare.run import OutputsDiffer, compare as run_compare
    from hwtune.db import ResultsDB
    from hwtune.db.connect import resolve_path
    from hwtune.db.keys import graph_hash
    from hwtune.engine.runner import native_engine
    from hwtune.engine.tensor_files import load_inputs
    from hwtune.sources import load_any

    graph, path = load_any(model, overrides, shapes)
    inputs = load_inputs(graph, input_files)
    native_engine()
    db = None
    if os.path.exists(resolve_path(db_path)):
        db = ResultsDB.open(db_path)
    try:
        host_key = machine.host_key(machine.fingerprint())
        r = run_compare(graph, path, peers, inputs=inputs, reps=reps, threads=threads, db=db,
                        host_key=host_key, graph_hash=graph_hash(graph.to_json()),
                        notice=None if as_json else
                        (lambda m: click.echo(f"note: {m}", err=True)))
    finally:
        if db is not None:
            db.close()
    if md_path:
        with open(md_path, "a", encoding="utf-8") as fh:
            fh.write(markdown(r))
    if as_json:
        click.echo(json.dumps(r.to_json(), indent=2))
    else:
        click.echo(f"model:   {r.model} ({r.ops} ops) from {r.source}; inputs {r.inputs}")
        click.echo(f"machine: {r.cpu}, kernels {r.isa}, {_threads(r.threads)}; load average "
                   f"{_load(r.load_before)} before, {_load(r.load_after)} after")
        click.echo(f"timing:  {r.reps} interleaved samples per side, medians")
        w = max(len(s.name) for s in r.sides)
        click.echo(f"  {'side':{w}s}  {'median':>11s}  {'MAD':>9s}  {'x hwtune':>8s}  outputs")
        for s in r.sides:
            click.echo(f"  {s.name:{w}s}  {_ms(s.median_s):>11s}  {_ms(s.mad_s):>9s}  "
                       f"{s.ratio:7.2f}x  {_verdict(s)}")
        for s in r.sides:
            click.echo(f"  {s.name}: {s.describe}")
    if not r.ok:
        bad = [s for s in r.sides if s.agree is False]
        raise OutputsDiffer(f"outputs differ: {', '.join(s.name for s in bad)} "
                            f"(max rel. diff {max(s.max_rel_err for s in bad):.1e} > 1e-4)")
