"""`hwtune plan`: thin click layer over hwtune.planner.session."""

from __future__ import annotations

import click

from hwtune.cli.options import (db_option, example, json_option, parse_overrides, shape_option,
                                train_options, training_step)

FORMATS = ("terminal", "markdown", "html", "json")


@click.command("plan", epilog=example(
    "hwtune plan lstm_medium --cores 16,32,64",
    "hwtune plan pathnet_medium --machine xeon-phi-7250 --cores 16,32,64,68",
    "hwtune plan lstm_small --validate",
    "hwtune plan lstm_small --validate --from-cores 1",
    "hwtune plan pathnet_medium --train --machine xeon-phi-7250 --cores 64"))
@click.argument("model")
@click.option("--cores", default="16,32,64", show_default=True, metavar="LIST",
              help="core counts to plan for, e.g. 16,32,64,128,256")
@click.option("--machine", default=None, metavar="FILE|NAME",
              help="a machine description (TOML; bundled: configs/machines/, by name); "
                   "default: this host's CPU with that many cores")
@click.option("--validate", is_flag=True,
              help="predict every configuration that fits this host from the inputs a plan "
                   "uses (stored scan, stored 1-thread profiles), then measure them "
                   "interleaved and print predicted vs measured")
@click.option("--fresh", is_flag=True,
              help="measure the host calibration and the model's 1-thread profiles (in the "
                   "sequential order and in each other scheduler's) again")
@click.option("--explain", is_flag=True,
              help="with --validate: also probe the scan's scaling figures and fork-join "
                   "beside the samples and predict again from them, shown apart as a "
                   "diagnostic (the reported error stays the stored inputs')")
@click.option("--from-cores", "from_cores", type=int, default=None, metavar="K",
              help="with --validate: take the inputs (quick scan, calibration, 1-thread "
                   "profiles) on K of this host's CPUs, into a scratch database, predict every "
                   "configuration of all its CPUs from them, then measure those: the error on "
                   "cores the inputs never saw (default: all CPUs)")
@click.option("--keep-inputs", "keep_inputs", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="with --from-cores: keep the scratch database in FILE")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal",
              show_default=True, help="output format (--json is --format json)")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="write the document to FILE instead of stdout")
@click.option("--set", "overrides", multiple=True, callback=parse_overrides, metavar="NAME=VALUE",
              help="override a declared model var (repeatable), e.g. --set seq=5")
@shape_option
@train_options
@db_option
@json_option
def plan(model, cores, machine, validate, fresh, explain, from_cores, keep_inputs, fmt, output, overrides, shapes, train,
         loss, optimizer, hyper, batch_norm, db_path, as_json):
    """Predict the best executors x threads, scheduler and latency of MODEL
    (a model.json, an ONNX file or a bundled model's name) on machines of
    --cores cores, from profiles taken on this one.

    Every op's time on t threads comes from its 1-thread time here (profiled
    when not stored) through a cost model with stated parts (compute at the
    per-core peak, memory traffic against the bandwidth curve, fork-join,
    a serial fraction fitted per op type); every scheduler and split is then
    simulated by the engine's own schedulers in virtual time. Needs a scan of
    this host (hwtune scan --quick). --validate checks the predictions,
    made from the same stored inputs, against measurements on this host. --train plans the model's training
    step (forward, loss, backward, update), as Graphi measured its models.
    """
    from hwtune import machine as machine_info
    from hwtune.db import ResultsDB
    from hwtune.engine.runner import native_engine
    from hwtune.errors import UsageError
    from hwtune.planner.machine import parse_cores, resolve
    from hwtune.planner.session import PlanOptions, run_plan
    from hwtune.report import export
    from hwtune.sources import load_any

    core_list = parse_cores(cores)
    if machine is not None:
        resolve(machine)  # a bad --machine fails before anything is measured
    if validate and machine is not None:
        raise UsageError("--validate measures this host: drop --machine")
    if explain and not validate:
        raise UsageError("--explain explains a validation: add --validate")
    if from_cores is not None and not validate:
        raise UsageError("--from-cores takes a validation's inputs on fewer CPUs: add --validate")
    if keep_inputs is not None and from_cores is None:
        raise UsageError("--keep-inputs keeps --from-cores's scratch database: add --from-cores")
    if from_cores is not None:
        from hwtune.planner.fromcores import pick
        pick(from_cores)  # a bad K fails before anything is measured
        if explain:
            raise UsageError("--explain probes the machine the inputs describe: drop "
                             "--from-cores")
    graph, _ = load_any(model, overrides, shapes)
    if train:
        graph = training_step(graph, loss, optimizer, hyper, batch_norm)
    native_engine()
    fmt = "json" if as_json else fmt

    def progress(message):
        if fmt == "terminal" or output:
            click.echo(f"[plan] {message}", err=True)

    db = ResultsDB.open(db_path)
    with db:
        fp = machine_info.fingerprint()
        host_key = db.upsert_host(fp)
        graph_hash = db.put_graph(graph.to_json())
        doc = run_plan(db, host_key, fp, graph, graph_hash,
                       PlanOptions(cores=core_list, machine=machine, validate=validate,
                                   fresh=fresh, explain=explain, from_cores=from_cores,
                                   keep_inputs=keep_inputs), progress=progress)
    if output:
        from pathlib import Path
        Path(output).write_text(export.render("plan", doc, fmt))
        click.echo(f"wrote {output}", err=True)
    else:
        export.write("plan", doc, fmt)
