"""One entry point per output format over the report document."""

import io
import json
import os
import tempfile
from typing import Optional

from hwtune.errors import UsageError

FORMATS = ("terminal", "markdown", "json", "html")


def render(doc: dict, fmt: str, *, width: Optional[int] = None) -> str:
    """The report as text in one format (terminal: plain text, for a file;
    the CLI prints to a live terminal with colour instead)."""
    if fmt == "json":
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if fmt == "markdown":
        from hwtune.report.markdown import render as md
        return md(doc)
    if fmt == "html":
        from hwtune.report.html_page import render as html
        return html(doc)
    if fmt == "terminal":
        from rich.console import Console
        from hwtune.report.terminal import WIDTH, render as term
        console = Console(width=width or WIDTH, record=True, file=io.StringIO(),
                          color_system=None)
        term(doc, console)
        return console.export_text()
    raise UsageError(f"unknown --format {fmt!r}: choose one of {', '.join(FORMATS)}")


def write(text: str, path: str) -> None:
    """Atomically: a browser or CI upload never sees half a report."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide it from a web server
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
