"""`hwtune tune-graph`: thin click layer over hwtune.tuners.pipeline."""

from __future__ import annotations

import sys

import click

from hwtune.cli.options import (db_option, example, json_option, set_option, shape_option,
                                train_options, train_record, training_step)
from hwtune.cli.run_cmd import input_files_callback
from hwtune.errors import UsageError


def _only(ctx, param, value):
    if not value:
        return None
    out = []
    for item in value:
        out += [s.strip() for s in item.split(",") if s.strip()]
    if not out:  # "--only ," names no stage: not "every stage"
        raise click.BadParameter("name at least one stage: sweep, conv, hillclimb")
    return out


def _thread_list(value):
    """--conv-threads "1,2" -> [1, 2] (None when not given)."""
    if value is None:
        return None
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        out = []
    if not out:
        raise UsageError(f"invalid --conv-threads {value!r}: give thread counts separated by "
                         "commas, e.g. 1,2")
    return out


@click.command("tune-graph", epilog=example(
    "hwtune tune-graph configs/models/lstm_medium.json --budget 300",
    "hwtune tune-graph tree_lstm_binary --inputs trees.jsonl --batch 64 --budget 120"))
@click.argument("model")
@click.option("--budget", "budget_s", type=float, default=None, metavar="SECONDS",
              help="the whole command's time: shared among the stages and workloads by "
                   "their share of the graph's time (see --plan); what is cut is listed, "
                   "and a rerun with a bigger budget finishes it")
@click.option("--plan", "plan_only", is_flag=True,
              help="print the tuning plan (each stage's and workload's estimated cost and "
                   "share of the budget) and stop; it only probes the default config")
@click.option("--trials", type=int, default=None, metavar="N",
              help="at most N trials per CONV workload (default: 15% of its grid with optuna, "
                   "all of it with grid)")
@click.option("--only", multiple=True, callback=_only, metavar="STAGE",
              help="run only these stages: sweep, conv, hillclimb (repeatable or comma list)")
@click.option("--search", default="optuna", show_default=True, metavar="NAME",
              help="CONV template search: optuna (TPE, 15% of each workload's grid unless "
                   "--trials) or grid (exhaustive)")
@click.option("--reps", type=int, default=5, show_default=True, metavar="N",
              help="samples per trial")
@click.option("--storage", default=None, metavar="URL",
              help="share each CONV workload's Optuna study with other hosts through this "
                   "database (e.g. postgresql://user:pw@host/db; pip install 'hwtune[fleet]'): "
                   "each host measures on itself, no point is measured twice")
@click.option("--strategy", type=int, default=1, show_default=True, metavar="1|2",
              help="per-op thread counts: 1 per op, 2 one count per op type (its largest "
                   "instance decides)")
@click.option("--conv-threads", "conv_threads", default=None, metavar="N[,N...]",
              help="threads per executor to tune the CONV knobs at besides the chosen "
                   "team's (default: those of the executor x threads configs the sweep "
                   "measures); `hwtune run --threads N` then uses knobs tuned for N")
@click.option("--precision", "precision", default=None, metavar="P[,P...]",
              help="precisions each CONV / matmul may run in: fp32,int8[,bf16]; each op "
                   "keeps the fastest whose end-to-end error stays within --max-error "
                   "(docs/precision.md); `hwtune run` and hwtune-run apply the choice")
@click.option("--max-error", "max_error", type=float, default=None, metavar="E",
              help="with --precision: the largest end-to-end error accepted, max |y - "
                   "y_fp32| / max |y_fp32| over the outputs and calibration samples "
                   "(e.g. 1e-2)")
@click.option("--input", "input_files", multiple=True, callback=input_files_callback,
              metavar="NAME=FILE.npy",
              help="with --precision: calibrate and measure the error on this input (a .npy "
                   "array of the declared shape) instead of 4 seeded samples (repeatable)")
@set_option
@shape_option
@train_options
@click.option("--inputs", "inputs_path", type=click.Path(dir_okay=False), default=None,
              metavar="SAMPLES.jsonl",
              help="dynamic models: tune on these input graphs (executors x threads x chunk, "
                   "then per-op threads at the row counts a pass runs at)")
@click.option("--batch", type=int, default=None, metavar="B",
              help="dynamic models: the batch to tune for (default 64); `hwtune run --inputs` "
                   "uses the result at this batch")
@click.option("--policy", default=None, metavar="P",
              help="dynamic models: batched (default), by-depth or serial")
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown", "json"]),
              default=None, help="dynamic models: output format (default terminal)")
@db_option
@json_option
def tune_graph(model, budget_s, plan_only, trials, only, search, reps, storage, strategy,
               conv_threads, precision, max_error, input_files, overrides, shapes, train, loss,
               optimizer, hyper, batch_norm, inputs_path, batch, policy, fmt, db_path, as_json):
    """Tune MODEL (a model.json, an ONNX file or a bundled model's name) on
    this machine and store the result.

    Sweeps executors x threads per executor, searches the CONV template
    knobs per workload and the layouts across CONVs, hill-climbs per-op
    thread counts, then measures the tuned config against the default (1
    executor x all threads, default CONV knobs) interleaved and keeps the
    faster. `hwtune run` and the C runner (hwtune-run) use the stored
    config automatically. Ctrl-C keeps every finished trial; running again
    resumes, and workloads tuned on this host are never measured twice.

    With --inputs SAMPLES.jsonl, MODEL is a dynamic model (a vertex function
    over input graphs): tunes executors x threads x chunk on those samples
    at --batch, then per-op threads at the row counts a pass runs at, and
    prints the tuned-vs-default ratio measured interleaved; `hwtune run
    MODEL --inputs` uses the result at that policy and batch.
    """
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.engine.runner import native_engine
    from hwtune.native.threads import allowed_cpus
    from hwtune.report import export
    from hwtune.sources import load_any
    from hwtune.cli.progress import tune_progress
    from hwtune.tuners.pipeline import TuneOptions, tune_graph as run_tuning

    if inputs_path is not None:
        for flag, value in (("--plan", plan_only), ("--trials", trials), ("--only", only),
                            ("--storage", storage), ("--conv-threads", conv_threads),
                            ("--shape", shapes), ("--train", train),
                            ("--precision", precision), ("--max-error", max_error),
                            ("--input", input_files)):
            if value:
                raise UsageError(f"{flag} is not supported for dynamic models (--inputs)")
        if click.get_current_context().get_parameter_source("search") == \
                click.core.ParameterSource.COMMANDLINE:
            raise UsageError("--search is for CONV templates; dynamic models (--inputs) "
                             "sweep and hill-climb")
        if as_json and fmt not in (None, "json"):
            raise UsageError(f"--json and --format {fmt} ask for two formats: drop one")
        from hwtune.cli.tune_dynamic import tune_dynamic_cmd
        return tune_dynamic_cmd(model, inputs_path, batch, policy, budget_s, reps, strategy,
                                overrides, db_path, "json" if as_json else fmt or "terminal")
    from hwtune.dynamic.sources import find_dynamic
    if find_dynamic(model):
        raise UsageError(f"{model} is a dynamic model (a vertex function): give its input "
                         "graphs with --inputs FILE.jsonl (hwtune model samples "
                         f"{model} -o FILE.jsonl writes some)")
    for flag, value in (("--batch", batch), ("--policy", policy), ("--format", fmt)):
        if value is not None:
            raise UsageError(f"{flag} is for dynamic models tuned with --inputs")

    from hwtune.precision.options import parse_precisions
    precisions = parse_precisions(precision) if precision is not None else ["fp32"]
    if input_files and len(precisions) < 2:
        raise UsageError("--input gives calibration samples for --precision: add --precision "
                         "fp32,int8 --max-error E")
    if train and len(precisions) > 1:
        raise UsageError("--precision tunes inference graphs: drop --train")
    opts = TuneOptions(budget_s=budget_s, trials=trials, only=only, search=search, reps=reps,
                       strategy=strategy, plan_only=plan_only, storage=storage,
                       conv_threads=_thread_list(conv_threads), precisions=precisions,
                       max_error=max_error).check()
    model_arg = model
    graph, model = load_any(model, overrides, shapes)
    if train:
        graph = training_step(graph, loss, optimizer, hyper, batch_norm)
    if input_files:
        from dataclasses import replace as _replace
        from hwtune.engine.tensor_files import load_inputs
        opts = _replace(opts, calibration=load_inputs(graph, input_files))
    native_engine()
    cpus = allowed_cpus()

    db = ResultsDB.open(db_path)
    # A bar with the plan's ETA on a terminal; progress lines on stderr
    # otherwise (also with --json: stdout stays the result).
    with tune_progress(live=sys.stderr.isatty() and not plan_only) as (progress, on_plan):
        with db:
            host_key = db.upsert_host(machine.fingerprint())
            graph_hash = db.put_graph(graph.to_json())
            res = run_tuning(db, host_key, graph, graph_hash, opts, cpus=cpus,
                             model_path=model, progress=progress, on_plan=on_plan,
                             run_options={"vars": overrides or {},
                                          "train": train_record(train, loss, optimizer, hyper,
                                                                batch_norm)})
            db_file = str(db.path)

    doc = {"model": graph.name, "graph_hash": graph_hash, "ops": len(graph.ops), "db": db_file}
    if plan_only:
        doc.update(res.to_json(), lines=res.lines())
        if as_json:
            export.write("tune", doc, "json")
        else:
            click.echo("\n".join(res.lines()))
        return
    doc.update(res.to_json())
    doc["next"] = _next(res, model_arg, overrides, shapes, budget_s, train)
    export.write("tune", doc, "json" if as_json else "terminal")


def _next(res, model, overrides, shapes, budget_s, train) -> str:
    """The one command to run after this tuning."""
    import math

    from hwtune.cli.options import model_args
    args = model_args(model, overrides, shapes)
    if res.cuts:
        more = math.ceil((budget_s or 0) + res.resume_s)
        return (f"hwtune tune-graph {args} --budget {more}   (finishes what this budget cut; "
                "finished work is reused)")
    if train:
        return "hwtune report   (the tuned training step beside its forward pass)"
    uses = res.verdict.get("uses") if res.verdict else "tuned"
    if uses == "default":
        return f"hwtune run {args}   (the default config; hwtune report shows every candidate)"
    return f"hwtune run {args}   (uses the tuned config; hwtune report shows the tuning)"
