"""`hwtune run`: thin click layer over hwtune.engine (config, runner, trace)."""

from __future__ import annotations

import os

import click

from hwtune.cli.options import (AliasedOption, db_option, example, json_option,
                                min_time_option, scheduler_option, set_option, shape_option,
                                train_options, train_record, training_step)
from hwtune.errors import UsageError


def input_files_callback(ctx, param, values):
    """Repeatable --input NAME=FILE.npy."""
    out = {}
    for item in values:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f'"{item}" is not NAME=FILE.npy')
        out[name] = path
    return out


@click.command("run", epilog=example(
    "hwtune run configs/models/lstm_small.json --executors 2 --threads 1 "
    "--scheduler critical-path --reps 50 --trace lstm.trace.json",
    "hwtune run tree_lstm_childsum --inputs trees.jsonl --batch 1,64 "
    "--policy batched,serial --check"))
@click.argument("model")
@click.option("--executors", type=int, default=None, metavar="K",
              help="executors (teams of threads) running ops side by side "
                   "(default: stored config, else 1)")
@click.option("--threads", default=None, metavar="T[,T...]",
              help="threads per executor (default: stored config, else every usable CPU / K); "
                   "a list (1,2 or 1-4) runs the model at each count in turn")
@scheduler_option
@click.option("--pin/--no-pin", default=None,
              help="pin executor teams to disjoint CPUs (default: the scheduler's own: on for "
                   "those that pin by default, never for the unpinned baseline)")
@click.option("--reps", "--iterations", "iterations", type=int, default=20, show_default=True,
              metavar="N", cls=AliasedOption, help="timed runs of the whole graph")
@min_time_option
@click.option("--warmup", type=int, default=3, show_default=True, metavar="W",
              help="untimed runs first (caches, page faults, thread wake-up)")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="profile 5 extra runs; write the last as a Chrome trace "
                                   "(open in ui.perfetto.dev) and store it in results.db")
@set_option
@shape_option
@train_options
@click.option("--input", "input_files", multiple=True, callback=input_files_callback,
              metavar="NAME=FILE.npy",
              help="run on this input (a .npy array of the declared shape) instead of "
                   "seeded values (repeatable)")
@click.option("--save-outputs", "save_path", type=click.Path(dir_okay=False), default=None,
              metavar="OUT.npz", help="write the outputs of the last run, by name, to OUT.npz")
@click.option("--check", is_flag=True,
              help="compare the outputs with the numpy reference (exit 1 if they differ "
                   "beyond 1e-4 x max|reference|)")
@click.option("--save", is_flag=True,
              help="store the config run as this model's 'user' config on this host "
                   "(used when no tuned config exists)")
@click.option("--inputs", "inputs_path", type=click.Path(dir_okay=False), default=None,
              metavar="SAMPLES.jsonl",
              help="dynamic models: the per-sample input graphs, one JSON object a line "
                   "(hwtune model samples MODEL -o FILE writes one)")
@click.option("--batch", "batches", default=None, metavar="B[,B...]",
              help="dynamic models: samples evaluated together (default 64); a list "
                   "measures each, interleaved")
@click.option("--policy", "policies", default=None, metavar="P[,P...]",
              help="dynamic models: batched (Cavs), by-depth (Fold) or serial (default "
                   "batched); a list measures each, interleaved")
@click.option("--chunk", type=int, default=None, metavar="ROWS",
              help="dynamic models: most vertex rows one op call takes, a power of two "
                   "(default: the stored tuned config's, else 256)")
@click.option("--untuned", is_flag=True,
              help="dynamic models: ignore the config tune-graph stored for this model, "
                   "policy and batch (run the default, or the flags)")
@click.option("--precision", type=click.Choice(["fp32", "bf16"]), default="fp32",
              show_default=True,
              help="bf16: every matmul and dense NCHW conv2d on a weight rounds its "
                   "operands to bfloat16 and sums in fp32 (AVX512_BF16 where the CPU has "
                   "it, else portable C); other ops stay fp32")
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown", "json"]),
              default=None, help="output format (default terminal; --json is --format json)")
@db_option
@json_option
def run(model, executors, threads, scheduler, pin, iterations, min_time, warmup, trace_path,
        overrides,
        shapes, input_files, save_path, check, save, train, loss, optimizer, hyper, batch_norm,
        inputs_path, batches, policies, chunk, untuned, precision, fmt, db_path, as_json):
    """Run MODEL on the engine and report latency (median, MAD spread, min)
    and throughput (runs/s, GFLOP/s). MODEL is a model.json, an ONNX file
    (imported on the fly, cached) or a bundled model's name (`hwtune model
    list`). The config comes from the
    flags, else the stored 'tuned' or 'user' config of this model on this
    host, else 1 executor x all usable CPUs and the default scheduler. The run
    and its timings are stored in results.db; --trace profiles 5 more runs
    (per-op medians to op_profiles, which order later runs of the schedulers
    that need op costs) and writes the last one as a Chrome trace.

    With --inputs SAMPLES.jsonl, MODEL is a dynamic model (a vertex function
    over input graphs): each --policy x --batch runs with the config
    tune-graph --inputs stored for it (else the default; flags override,
    --untuned ignores it), measured interleaved, stored in results.db and
    shown by `hwtune report`.
    """
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.engine.config import resolve
    from hwtune.engine.prepare import prepare_run
    from hwtune.engine.runner import check_counts, native_engine, run_model
    from hwtune.engine.trace import summary, write_chrome_trace
    from hwtune.engine.tensor_files import load_inputs, save_outputs
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import allowed_cpus
    from hwtune.sources import load_any

    from hwtune.dynamic.sources import find_dynamic
    from hwtune.scan.steps import parse_threads
    thread_list = parse_threads(threads) if threads is not None else [None]
    if as_json and fmt not in (None, "json"):
        raise UsageError(f"--json and --format {fmt} ask for two formats: drop one")
    fmt = "json" if as_json else fmt or "terminal"
    if len(thread_list) > 1 and (inputs_path is not None or trace_path or save or save_path):
        raise UsageError("a list of --threads runs the model once per count: it takes no "
                         "--inputs, --trace, --save or --save-outputs")
    threads = thread_list[0]
    if inputs_path is not None:
        from hwtune.cli.run_dynamic import run_dynamic
        for flag, value in (("--trace", trace_path), ("--save-outputs", save_path),
                            ("--input", input_files), ("--shape", shapes), ("--save", save),
                            ("--scheduler", scheduler), ("--train", train),
                            ("--min-time", min_time)):
            if value:
                raise UsageError(f"{flag} is not supported for dynamic models (--inputs) yet")
        if precision != "fp32":
            raise UsageError("--precision is not supported for dynamic models (--inputs) yet")
        return run_dynamic(model, inputs_path, batches, policies, chunk, executors, threads,
                           pin, iterations, overrides, check, untuned, db_path, fmt)
    if find_dynamic(model):
        raise UsageError(f"{model} is a dynamic model (a vertex function): give its input "
                         "graphs with --inputs FILE.jsonl (hwtune model samples "
                         f"{model} -o FILE.jsonl writes some)")
    for flag, value in (("--batch", batches), ("--policy", policies), ("--chunk", chunk),
                        ("--untuned", untuned or None)):
        if value is not None:
            raise UsageError(f"{flag} is for dynamic models run with --inputs")

    check_counts(iterations, warmup)
    graph, model = load_any(model, overrides, shapes)
    if train:
        graph = training_step(graph, loss, optimizer, hyper, batch_norm)
    if precision != "fp32":
        from hwtune.graph.passes.precision import precision_counts, with_precision
        graph, n_set = with_precision(graph, precision)
        from hwtune.native.isa import bf16_variant
        variant = bf16_variant()  # a forced variant the CPU lacks is refused here
        counts = precision_counts(graph, precision)
        click.echo(f"note: --precision {precision}: {counts.get('matmul', 0)} matmul(s) and "
                   f"{counts.get('conv2d', 0)} conv2d(s) on weights run in {precision}"
                   + (f" ({variant} kernels)" if n_set else
                      " (none found: the model runs in fp32)"), err=True)
    inputs = load_inputs(graph, input_files)
    if save_path and not os.path.isdir(os.path.dirname(os.path.abspath(save_path))):
        raise UsageError(f"invalid --save-outputs {save_path}: its directory does not exist")
    cpus = allowed_cpus()
    op_names = [op.name for op in graph.ops]
    all_flags = [{"executors": executors, "threads": t, "scheduler": scheduler, "pin": pin}
                 for t in thread_list]
    for flags in all_flags:
        resolve(None, "", "", flags, cpus=cpus, op_names=op_names)  # refuse before the db
    if trace_path and not os.path.isdir(os.path.dirname(os.path.abspath(trace_path))):
        raise UsageError(f"invalid --trace {trace_path}: its directory does not exist")
    native_engine()

    from hwtune.report import export
    docs, results = [], []
    db = ResultsDB.open(db_path)
    with db:
        host_key = db.upsert_host(machine.fingerprint())
        graph_hash = db.put_graph(graph.to_json())
        said = set()  # a note said for one count of --threads 1,2 is not repeated
        for flags in all_flags:
            # The config (flags, else stored, else default) with each CONV's
            # knobs for the threads it runs at, on the graph built for them.
            prepared = prepare_run(db, host_key, graph, graph_hash, flags, cpus=cpus)
            resolved, cfg, run_graph, knobs = (prepared.resolved, prepared.config,
                                               prepared.graph, prepared.knobs)
            for line in ([resolved.notice] if resolved.notice else []) + knobs.notes:
                if line not in said:
                    said.add(line)
                    click.echo(f"note: {line}", err=True)
            if cfg.op_precision and fmt != "json":
                counts = {}
                for p in cfg.op_precision.values():
                    counts[p["precision"]] = counts.get(p["precision"], 0) + 1
                click.echo("note: the config runs " + ", ".join(
                    f"{n} op(s) in {p}" for p, n in sorted(counts.items())) +
                    " (tune-graph --precision); the rest in fp32", err=True)
            config_id = prepared.config_id(db, host_key, graph_hash, save=save)
            options = {"model": model, "graph_hash": graph_hash, "vars": overrides,
                       "config": cfg.to_json(), "config_source": resolved.source,
                       "iterations": iterations, "min_time": min_time, "warmup": warmup,
                       "trace": trace_path,
                       "inputs": input_files or None, "conv_knobs": knobs.to_json(),
                       "train": train_record(train, loss, optimizer, hyper, batch_norm)}
            result = run_model(db, host_key, run_graph, graph_hash, cfg, iterations=iterations,
                               min_time=min_time, warmup=warmup, trace=trace_path is not None, options=options,
                               kernel_variant=selected_isa(), config_id=config_id,
                               check=check, base_graph=graph, inputs=inputs,
                               keep_outputs=bool(save_path))
            if save_path:
                save_outputs(save_path, result.outputs)
            trace_info = None
            if trace_path:
                n = write_chrome_trace(trace_path, result.events,
                                       process_name=f"hwtune {graph.name}",
                                       metadata={"model": graph.name, "graph_hash": graph_hash,
                                                 "config": cfg.to_json(),
                                                 "run_id": result.run_id})
                trace_info = dict(summary(result.events), path=trace_path, events=n)
            doc = {"model": graph.name, "graph_hash": graph_hash, "ops": len(graph.ops),
                   "config": cfg.to_json(), "config_text": cfg.describe(),
                   "config_source": resolved.source, "iterations": len(result.samples),
                   "warmup": warmup, "db": str(db.path), "trace": trace_info,
                   "notice": resolved.notice, "outputs_file": save_path,
                   "outputs": list(graph.outputs) if save_path else None,
                   "conv_knobs": knobs.to_json(),
                   "knobs_text": knobs.summary() if knobs.sources else None}
            doc.update(result.to_json())
            docs.append(doc)
            results.append(result)

    export.write("run", docs[0] if len(docs) == 1 else {"runs": docs}, fmt)
    for result in results:
        if result.noisy and fmt != "json":
            click.echo(f"warning: latency spread {result.rel_spread:.1%} (MAD/median): the "
                       f"machine is busy; consider --reps {max(2 * iterations, 50)} or --warmup "
                       f"{max(2 * warmup, 5)}", err=True)
    for result in results:
        _fail_check(result.check)


def _fail_check(check) -> None:
    from hwtune.engine.runner import OutputMismatch
    if check and not check["ok"]:
        raise OutputMismatch(f"outputs differ from the numpy reference: max |engine - numpy| "
                          f"{check['max_abs']:.3g} on {check['output']} is {check['rel']:.2g} x "
                          f"max|numpy| (tolerance {check['tolerance']:g})")
