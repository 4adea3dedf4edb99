"""`hwtune compare`: thin click layer over hwtune.compare."""

from __future__ import annotations

import click

from hwtune.cli.options import (db_option, example, json_option, min_time_option,
                                parse_overrides, shape_option)
from hwtune.cli.run_cmd import input_files_callback
from hwtune.report import export


def _peers(ctx, param, value):
    return [p.strip() for p in (value or "").split(",") if p.strip()]


@click.command("compare", epilog=example("hwtune compare resnet.onnx --with ort,torch"))
@click.argument("model")
@click.option("--with", "peers", default="ort,torch", show_default=True, callback=_peers,
              metavar="PEERS", help="peers to run beside hwtune: ort (ONNX Runtime), torch "
                                    "(PyTorch eager); a peer named here that is not installed "
                                    "is an error (exit 2), one missing from the default list "
                                    "is skipped with a notice")
@click.option("--reps", type=int, default=10, show_default=True, metavar="N",
              help="interleaved samples per side")
@min_time_option
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
def compare(model, peers, reps, min_time, threads, input_files, shapes, overrides, md_path, db_path,
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
    from hwtune.db.keys import graph_hash
    from hwtune.engine.runner import native_engine
    from hwtune.engine.tensor_files import load_inputs
    from hwtune.sources import load_any

    named = (click.get_current_context().get_parameter_source("peers")
             is not click.core.ParameterSource.DEFAULT)
    graph, path = load_any(model, overrides, shapes)
    inputs = load_inputs(graph, input_files)
    native_engine()
    from hwtune.compare.store import store_compare
    db = ResultsDB.open(db_path)
    try:
        host_key = db.upsert_host(machine.fingerprint())
        ghash = graph_hash(graph.to_json())
        r = run_compare(graph, path, peers, inputs=inputs, reps=reps, threads=threads, db=db,
                        min_time=min_time,
                        host_key=host_key, graph_hash=ghash,
                        required=named, notice=None if as_json else
                        (lambda m: click.echo(f"note: {m}", err=True)))
        run_id = store_compare(db, host_key, r, graph_hash=ghash, options={
            "model": model, "vars": overrides, "peers": list(peers), "reps": reps,
            "min_time": min_time, "threads": threads})
        stored = f"compare run {run_id} in {db.path}"
    finally:
        db.close()
    if md_path:
        with open(md_path, "a", encoding="utf-8") as fh:
            fh.write(export.render("compare", r, "markdown"))
    export.write("compare", r, "json" if as_json else "terminal")
    if not as_json:
        click.echo(f"stored:   {stored} (hwtune report shows it over time)")
        from hwtune.cli.options import echo_next, model_args
        args = model_args(model, overrides, shapes)
        if "[default" in r.sides[0].describe:
            echo_next(f"hwtune tune-graph {args}, then compare again (hwtune ran its default "
                      "config)")
        else:
            echo_next("hwtune report (the tuning behind hwtune's row)")
    if not r.ok:
        bad = [s for s in r.sides if s.agree is False]
        raise OutputsDiffer(f"outputs differ: {', '.join(s.name for s in bad)} "
                            f"(max rel. diff {max(s.max_rel_err for s in bad):.1e} > 1e-4)")
