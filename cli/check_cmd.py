"""`hwtune check`: thin click layer over hwtune.check (suite, gate, output)."""

from __future__ import annotations

import shlex
import sys

import click

from hwtune.cli.options import db_option, example, json_option


@click.command("check", epilog=example(
    "hwtune check --baseline perf-baseline.json --junit check.xml --markdown \"$GITHUB_STEP_SUMMARY\""))
@click.option("--suite", "suite_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="suite to run (default: ./configs/ci.toml, else the suite "
                                   "bundled with hwtune)")
@click.option("--init", "init", is_flag=True,
              help="write the default suite to --suite FILE (default: ./hwtune-check.toml) "
                   "to edit, and exit")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="compare with (or, with --update-baseline, record to) this "
                                   "JSON baseline instead of results.db")
@click.option("--update-baseline", is_flag=True,
              help="measure and record a new baseline for this host (each time figure in "
                   "--processes fresh processes); no comparison")
@click.option("--processes", type=click.IntRange(1, 50), default=None, metavar="K",
              help="processes a recorded baseline spans, whose spread a check is judged "
                   "against (default: the suite's processes, else 6)")
@click.option("--mode", type=click.Choice(["gate", "record-or-report"]), default="gate",
              show_default=True,
              help="gate: fail on any significant regression beyond min_effect; "
                   "record-or-report: record when this host has no baseline, else fail only "
                   "on a significant regression beyond large_effect")
@click.option("--relative/--absolute", default=None,
              help="divide each figure by the reference kernel measured right before it, so "
                   "a slower or busier machine does not read as a regression; also allows a "
                   "baseline from another host (default: the suite's setting, else absolute)")
@click.option("--figure", "figures", multiple=True, metavar="NAME",
              help="only this figure of the suite (repeatable)")
@click.option("--against", "against", default=None, metavar="PYTHON",
              help="compare with another hwtune build now instead of a baseline: the Python "
                   "interpreter it is installed for (e.g. the base branch's .venv/bin/python); "
                   "each figure runs in both builds, interleaved round by round")
@click.option("--metric", type=click.Choice(["time", "cycles", "instructions",
                                             "estimated-cycles"]), default=None,
              help="measure every figure that allows it this way (default: each figure's "
                   "metric in the suite): time, or counts (hardware counters where the "
                   "machine has them, else valgrind)")
@click.option("--max-seconds", type=float, default=None, metavar="S",
              help="cap on sampling one time figure (default: the suite's max_seconds)")
@click.option("--compare", "compare", nargs=2, type=click.Path(dir_okay=False), default=None,
              metavar="A.json B.json",
              help="decide two saved `hwtune check --json` results (A the baseline, B the "
                   "current run) by the same rules, exit codes and outputs; measures nothing")
@click.option("--undecidable-ok", is_flag=True,
              help="exit 0 instead of 3 when the machine was too noisy to decide")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="write JUnit XML, one test case per figure")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
@db_option
@json_option
def check(suite_path, init, baseline_file, update_baseline, processes, mode, relative, figures,
          against, metric, max_seconds, compare, undecidable_ok, junit_path, md_path, db_path,
          as_json):
    """Run the performance suite and compare it with this host's baseline
    (or with another build: --against).

    \b
    The default recipe:
      hwtune check --update-baseline --baseline perf-baseline.json   # once per runner
      hwtune check --baseline perf-baseline.json                     # every build
    (without --baseline the baseline lives in results.db). The baseline
    records each time figure in 6 fresh processes (--processes); a check
    fails a figure only when it is significantly slower, by min_effect or
    more, than that spread allows, and again when measured in fresh
    processes interleaved with its reference kernel. A runner whose speed
    drifts between runs moves the figures with no change of code: there,
    --against PYTHON (the base build) compares the two builds interleaved,
    and counted figures (--metric estimated-cycles) do not drift.

    Time figures are sampled in rounds beside a partner (the reference
    kernel, or the other build) until a group-sequential test decides or
    max_seconds pass: a regression is significantly slower by at least
    min_effect, with the false-positive rate held at alpha however many
    looks it took. Counted figures (instructions, cycles, estimated cycles)
    are compared without statistics against count_threshold. Exit 0: pass
    (an improvement passes, with a note) or baseline recorded; 1: a
    regression; 2: an error; 3: undecidable (too noisy; 0 with
    --undecidable-ok). --compare A.json B.json decides two saved --json
    results the same way, measuring nothing.
    """
    if compare:
        from hwtune.check.compare_files import compare_files
        from hwtune.errors import UsageError
        measuring = [flag for flag, given in (
            ("--init", init), ("--suite", suite_path is not None),
            ("--baseline", baseline_file is not None), ("--update-baseline", update_baseline),
            ("--against", against is not None), ("--metric", metric is not None),
            ("--max-seconds", max_seconds is not None),
            ("--processes", processes is not None)) if given]
        if measuring:
            raise UsageError(f"--compare decides two saved results and measures nothing: it "
                             f"takes no {measuring[0]}")
        report = compare_files(*compare, mode=mode, relative=relative,
                               undecidable_ok=undecidable_ok, figures=list(figures))
        _output(report, junit_path, md_path, as_json)
        return
    if init:
        _init_suite(suite_path or "hwtune-check.toml")
        return
    from rich.console import Console

    from hwtune.check.gate import run_check, with_figures, with_max_seconds, with_metric
    from hwtune.check.suite import load_suite
    from hwtune.db import ResultsDB

    suite = with_max_seconds(with_metric(with_figures(load_suite(suite_path), list(figures)),
                                         metric), max_seconds)
    err = Console(stderr=True, highlight=False)

    def warn(msg):
        if not as_json:
            return  # the summary lists every undecidable or slower figure
        err.print(f"warning: {msg}", markup=False)

    with err.status("measuring") if sys.stderr.isatty() else _null() as status:
        def progress(done, total, name):
            if status is not None and name:
                status.update(f"measuring {name} ({done + 1}/{total})")

        with ResultsDB.open(db_path) as db:
            report = run_check(suite, db=db, mode=mode, baseline_file=baseline_file,
                               update_baseline=update_baseline, relative=relative,
                               against=against, undecidable_ok=undecidable_ok,
                               progress=progress, warn=warn, processes=processes)
    _output(report, junit_path, md_path, as_json, baseline_file)


def _output(report, junit_path, md_path, as_json, baseline_file=None):
    """Every output the options ask for, then the report's exit code."""
    from hwtune.report import export
    from hwtune.report.files import write_file

    if junit_path:
        write_file(junit_path, export.render("check", report, "junit"))
    if md_path:
        write_file(md_path, export.render("check", report, "markdown"), append=True)
    export.write("check", report, "json" if as_json else "terminal")
    if not as_json:
        from hwtune.cli.options import echo_next
        echo_next(_next(report, baseline_file))
    sys.exit(report.exit_code)


def _next(report, baseline_file=None) -> str:
    """What to do after this check, by its outcome: a command that checks
    against the same baseline (the file when one was given)."""
    bad = [o.name for o in report.outcomes if o.status in ("regression", "error")]
    check = f"hwtune check --baseline {shlex.quote(baseline_file)}" if baseline_file \
        else "hwtune check"
    if report.status == "recorded":
        return f"{check} (compares the next build with this baseline)"
    if report.status == "regression":
        return (f"{check} --figure {bad[0]} to measure it again, or hwtune check --against "
                "PYTHON to compare two builds interleaved (docs/check.md)")
    if report.status == "error":
        return f"fix what {bad[0] if bad else 'the figure'} reports above, then {check}"
    if report.status == "undecidable":
        return ("hwtune check --max-seconds N (more rounds for the undecided figures), or "
                "--against PYTHON (two builds interleaved, which decides on a noisy machine)")
    return "hwtune report (this check beside the earlier ones)"


def _init_suite(path):
    import os
    import shutil

    from hwtune.errors import UsageError
    from hwtune.sources import default_suite
    if os.path.exists(path):
        raise UsageError(f"{path} exists: not overwriting it (choose another --suite FILE)")
    try:
        shutil.copyfile(default_suite(), path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    click.echo(f"wrote {path}: edit its figures and thresholds, then run "
               f"`hwtune check --suite {path}`")


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
