"""hwtune's output layer and `hwtune report`.

export/ holds one exporter per format (terminal, markdown, JSON, HTML,
JUnit), each showing every kind of document a command produces (scan
summary, report, check result, tune-graph result); the click layer picks
one and writes. The rest serves them: fmt (numbers), views (what a part of
a document says, whatever the format), verdicts (a check outcome's words),
text_charts and svg (charts), files (writing a file).

`hwtune report`'s own document, everything results.db knows about a host,
is built by collect.build_report (figures: the key figures it follows over
time and across hosts; sides: which host and date each side is)."""

from hwtune.report.collect import build_report

__all__ = ["build_report"]
