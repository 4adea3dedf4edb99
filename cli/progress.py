"""Progress on stderr for long commands (stdout stays the result)."""

from __future__ import annotations

import contextlib

import click

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


@contextlib.contextmanager
def scan_progress():
    """A progress bar on stderr; yields (on_step, on_warn) callbacks."""
    console = Console(stderr=True)
    bar = Progress(TextColumn("[bold]scan[/]"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.description}"),
                   console=console, transient=True)
    task = None

    def on_step(done, total, step):
        nonlocal task
        if task is None:
            task = bar.add_task("", total=total)
        bar.update(task, completed=done, description=step.label if step else "done")

    def on_warn(msg):
        console.print(f"[yellow]warning:[/] {msg}", highlight=False)

    with bar:
        yield on_step, on_warn


@contextlib.contextmanager
def tune_progress(live: bool):
    """tune-graph's progress; yields (progress(stage, message), on_plan(plan)).

    live (a terminal): a bar over the plan's seconds with elapsed time and
    ETA, the latest message beside it, each stage's first line kept above.
    Otherwise one line per message on stderr ("[stage] message"), with the
    elapsed and planned seconds once the plan is known."""
    from hwtune.measure import clock

    watch = clock.Stopwatch()
    planned = [None]
    if not live:
        def progress(stage, message):
            eta = ""
            if planned[0]:
                eta = f" ({watch.elapsed():.0f}/{planned[0]:.0f} s)"
            click.echo(f"[{stage}]{eta} {message}", err=True)

        def on_plan(plan):
            planned[0] = plan.planned_s
        yield progress, on_plan
        return

    console = Console(stderr=True)
    bar = Progress(TextColumn("[bold]tune[/]"), BarColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
                   console=console, transient=True)
    task = bar.add_task("probing", total=None)
    seen = set()

    def progress(stage, message):
        if stage not in seen or stage == "plan":
            seen.add(stage)
            console.print(f"[{stage}] {message}", markup=False, highlight=False)
        bar.update(task, completed=watch.elapsed() if planned[0] else None,
                   description=f"[{stage}] {message}"[:60])

    def on_plan(plan):
        planned[0] = plan.planned_s
        bar.update(task, total=plan.planned_s, completed=watch.elapsed())
    with bar:
        yield progress, on_plan
