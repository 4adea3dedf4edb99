"""`hwtune report`: what results.db knows about a host, as one document
(collect.build_report) rendered for a terminal, markdown, JSON or one
self-contained HTML file."""

from hwtune.report.collect import build_report
from hwtune.report.render import FORMATS, render

__all__ = ["FORMATS", "build_report", "render"]
