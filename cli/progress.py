"""Progress on stderr for long commands (stdout stays the result)."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


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
