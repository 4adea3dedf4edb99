"""hwtune's output layer: one exporter per format, each usable by every
command that produces that format. The click layer picks one and writes;
nothing else in hwtune formats a result.

A document is what one command produces, named by its kind:

  scan    the scan summary dict (hwtune.scan.summary)
  report  the report document dict (hwtune.report.collect)
  check   the regression gate's CheckReport (hwtune.check.gate)
  tune    tune-graph's result: TuneResult.to_json() plus model, graph_hash,
          ops (the graph's op count) and db
  compare hwtune compare's CompareResult (hwtune.compare.run)
  plan    hwtune plan's predictions or validation (hwtune.planner.session)
  run     hwtune run MODEL: the run's document (its --json), or {"runs":
          [...]} for a --threads list
  dynamic hwtune run MODEL --inputs FILE: a dynamic model's measured
          (policy, batch) configs (hwtune.dynamic.runs)
  dynamic-tune
          hwtune tune-graph MODEL --inputs FILE (hwtune.tuners.dynamic_graph)

A new format is one module here with one Exporter and a row in EXPORTERS;
a new kind of document (or a new report section) is one function in each
format that shows it. JSON shows every kind: the document itself, or its
to_json()."""

import sys
from typing import Any, Dict, Tuple

from hwtune.errors import UsageError
from hwtune.report.export import html, json, junit, markdown, terminal
from hwtune.report.export.base import Exporter

EXPORTERS: Dict[str, Exporter] = {e.name: e for e in (
    terminal.EXPORTER, markdown.EXPORTER, json.EXPORTER, html.EXPORTER, junit.EXPORTER)}


def formats(kind: str) -> Tuple[str, ...]:
    """The formats that can show a kind of document, in EXPORTERS order."""
    return tuple(name for name, e in EXPORTERS.items() if kind in e.kinds)


def exporter(fmt: str, kind: str) -> Exporter:
    e = EXPORTERS.get(fmt)
    if e is None or kind not in e.kinds:
        raise UsageError(f"unknown --format {fmt!r} for {kind}: choose one of "
                         f"{', '.join(formats(kind))}")
    return e


def render(kind: str, data: Any, fmt: str) -> str:
    """The document as text in one format, for a file (the terminal format
    as plain text, 80 columns)."""
    return exporter(fmt, kind).render(kind, data)


def write(kind: str, data: Any, fmt: str, stream=None) -> None:
    """Print the document on stream (default: stdout)."""
    exporter(fmt, kind).write(kind, data, stream if stream is not None else sys.stdout)


__all__ = ["EXPORTERS", "Exporter", "exporter", "formats", "render", "write"]
