"""`hwtune scan`: thin click layer over hwtune.scan."""

from __future__ import annotations

import click

from hwtune.errors import UsageError

from hwtune.cli.options import example, db_option, isa_option, json_option, reps_option, threads_option
from hwtune.scan.steps import DEFAULT_ELTWISE_SIZE, DEFAULT_GEMM, DEFAULT_NOISE, DEFAULT_SATURATION


def _options(quick, threads, isa, reps, gemm, eltwise_size, no_corun, saturation, noise):
    from hwtune.scan.steps import ScanOptions, parse_shape, parse_size, parse_threads
    return ScanOptions(
        threads=parse_threads(threads) if threads is not None else None,
        quick=quick, isa=isa, reps=reps,
        gemm=tuple(parse_shape(g) for g in gemm) if gemm else DEFAULT_GEMM,
        eltwise_size=parse_size(eltwise_size) if eltwise_size is not None
        else DEFAULT_ELTWISE_SIZE,
        corun=not no_corun, saturation=saturation, noise=noise)


@click.command(epilog=example(
    "hwtune scan --quick --threads 1,2 --gemm 64x512x512 --gemm 1x512x2048"))
@db_option
@click.option("--quick", is_flag=True, help="shorter scan (< 15 s): fewer repetitions, "
              "FMA peak of the selected ISA only")
@threads_option
@isa_option
@reps_option
@click.option("--gemm", "gemm", multiple=True, metavar="MxKxN",
              help="GEMM shape [M,K]x[K,N] to scale; repeatable (default: 64x512x512)")
@click.option("--eltwise-size", default=None, metavar="N",
              help="elements per element-wise op (default: 32768)")
@click.option("--saturation", type=float, default=DEFAULT_SATURATION, show_default=True,
              metavar="FRAC",
              help="a thread step must gain this fraction of throughput to count as "
                   "scaling (10% is ~2x the run-to-run noise of a median on a shared machine)")
@click.option("--noise", type=float, default=DEFAULT_NOISE, show_default=True, metavar="FRAC",
              help="re-measure (up to 2x) when MAD/median exceeds this; still above it: "
                   "stored as 'noisy'")
@click.option("--no-corun", is_flag=True, help="skip the co-running / pinning benchmark")
@json_option
@click.option("--show", is_flag=True, help="print the last stored scan of this host, "
              "measuring nothing (with --saturation: re-derive saturation points)")
def scan(db_path, quick, threads, isa, reps, gemm, eltwise_size, saturation, noise, no_corun,
         as_json, show):
    """Characterise this machine: peak FLOPS and bandwidth, GEMM and
    element-wise scaling over threads (vs numpy's BLAS), co-running executors
    pinned vs OS-placed. Every figure is a median with its spread, stored in
    results.db as it is measured. --show prints the last stored scan of this
    host instead.
    """
    from hwtune.db import ResultsDB
    from hwtune.report import export
    from hwtune.scan.summary import load_last, load_run

    if show:
        from hwtune import machine
        ctx = click.get_current_context()
        measuring = [f"--{name.replace('_', '-')}" for name in
                     ("quick", "threads", "isa", "reps", "gemm", "eltwise_size", "noise",
                      "no_corun")
                     if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
        if measuring:
            raise UsageError(f"--show prints the stored scan and measures nothing: drop "
                             f"{', '.join(measuring)} (only --db, --json and --saturation apply)")
        db = ResultsDB.open(db_path)
        sat = (saturation if ctx.get_parameter_source("saturation")
               == click.core.ParameterSource.COMMANDLINE else None)
        summary = load_last(db, machine.host_key(machine.fingerprint()), saturation=sat)
    else:
        from hwtune.cli.progress import scan_progress
        from hwtune.native.isa import supported_isas
        from hwtune.native.threads import allowed_cpus
        from hwtune.scan.steps import validate
        from hwtune.scan.runner import run_scan

        opts = _options(quick, threads, isa, reps, gemm, eltwise_size, no_corun, saturation,
                        noise)
        validate(opts, len(allowed_cpus()), supported_isas())  # before creating results.db
        db = ResultsDB.open(db_path)
        with scan_progress() as (on_step, on_warn):
            result = run_scan(db, opts, progress=on_step, warn=on_warn)
        summary = load_run(db, result.run_id)

    export.write("scan", summary, "json" if as_json else "terminal")
    if as_json:  # the terminal format prints them itself
        for a in summary["advice"]:
            click.echo(click.style("note:", fg="yellow") + f" {a}", err=True)
    elif not show:
        from hwtune.cli.options import echo_next
        echo_next("hwtune tune-graph MODEL (e.g. lstm_small; `hwtune model list` names them), "
                  "then hwtune report")
