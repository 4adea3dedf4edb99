"""`hwtune check`: thin click layer over hwtune.check (suite, gate, output)."""

from __future__ import annotations

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
              help="measure and record a new baseline for this host; no comparison")
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
@click.option("--samples", type=int, default=None, metavar="N",
              help="samples per figure (default: the suite's)")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="write JUnit XML, one test case per figure")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
@db_option
@json_option
def check(suite_path, init, baseline_file, update_baseline, mode, relative, figures, samples,
          junit_path, md_path, db_path, as_json):
    """Run the performance suite and compare it with this host's baseline.

    Each figure keeps its raw samples; a figure regresses only when it is
    slower with statistical significance (one-sided Mann-Whitney U, a
    bootstrap CI on the ratio of medians above 1) AND by at least the
    suite's min_effect. When the host's noise floor exceeds min_effect the
    figure is 'undecidable'. Exit 0: pass (or baseline recorded); 1: a
    regression; 2: an error, or undecidable.
    """
    if init:
        _init_suite(suite_path or "hwtune-check.toml")
        return
    from rich.console import Console

    from hwtune.check.gate import run_check, with_figures, with_samples
    from hwtune.check.suite import load_suite
    from hwtune.db import ResultsDB
    from hwtune.report import export
    from hwtune.report.files import write_file

    suite = with_samples(with_figures(load_suite(suite_path), list(figures)), samples)
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
                               progress=progress, warn=warn)
    if junit_path:
        write_file(junit_path, export.render("check", report, "junit"))
    if md_path:
        write_file(md_path, export.render("check", report, "markdown"), append=True)
    export.write("check", report, "json" if as_json else "terminal")
    sys.exit(report.exit_code)


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
