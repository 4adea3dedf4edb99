"""`hwtune report`: thin click layer over hwtune.report."""

from __future__ import annotations

import click

from hwtune.cli.options import db_option, example, json_option
from hwtune.report.export import formats

FORMATS = formats("report")


@click.command(epilog=example("hwtune report --json > report.json",
                              "hwtune report --format html -o report.html"))
@db_option
@click.option("--host", "host", default=None, metavar="KEY",
              help="a stored host key or a unique prefix of one (default: this machine)")
@click.option("--compare", "compare", multiple=True, metavar="HOST_OR_DATE",
              help="compare side by side with ratios: one host (vs --host), one date "
                   "YYYY-MM-DD (then vs now), or two of either kind; repeatable twice")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal",
              show_default=True, help="terminal (rich, 80 columns), markdown, json "
              "(everything; same as --json), html (one self-contained file with SVG charts)")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="write the report to FILE instead of stdout")
@json_option
def report(db_path, host, compare, fmt, output, as_json):
    """Show what results.db knows about a host: the machine fingerprint,
    scan results with GEMM / element-wise scaling charts (saturation point
    marked) and the co-run pinned-vs-OS grid, every tuned model (default vs
    tuned latency, speedup, chosen config, convergence, top ops, executor
    timeline), the history of each figure across hwtune versions and dates,
    and --compare two hosts or two dates side by side. Measures nothing.
    """
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.db.connect import resolve_path
    from hwtune.errors import UsageError
    from hwtune.report import build_report, export
    from hwtune.report.files import write_file

    if as_json:
        if click.get_current_context().get_parameter_source("fmt") == \
                click.core.ParameterSource.COMMANDLINE and fmt != "json":
            raise click.UsageError(f"--json and --format {fmt} ask for two formats: drop one")
        fmt = "json"
    if fmt == "html" and not output:
        raise click.UsageError("--format html needs -o FILE (one self-contained page)")
    path = resolve_path(db_path)
    if not path.exists():
        # A report measures nothing: never create an empty database for it.
        raise UsageError(f"no results database at {path}: run 'hwtune scan' first, or give "
                         "--db PATH")
    # A report only reads: a database in a read-only directory is enough.
    with ResultsDB.open_for_reading(path) as db:
        this_host = None if host else machine.host_key(machine.fingerprint())
        doc = build_report(db, host=host, compare=compare, this_host=this_host)
    if output:
        write_file(output, export.render("report", doc, fmt))
        click.echo(f"report written to {output}", err=True)
    else:
        export.write("report", doc, fmt)
