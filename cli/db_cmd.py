"""`hwtune db`: look after results.db itself (thin layer over hwtune.db)."""

from __future__ import annotations

import json
import sys

import click

from hwtune.cli.options import db_option, example, json_option


@click.group("db", epilog=example("hwtune db check --fix"))
def db():
    """Check and repair results.db."""


@db.command("check", epilog=example("hwtune db check --db results.db --fix"))
@click.option("--fix", is_flag=True,
              help="repair each corrupt row where its value can be rebuilt, else drop it "
                   "(with the rows that depend on it), in one transaction")
@db_option
@json_option
def check_cmd(fix, db_path, as_json):
    """List every stored row hwtune cannot use: a JSON column that does not
    parse or has the wrong shape, an engine config with values no engine
    runs. Exit 0 when there is none (or --fix repaired them all), 1 when
    there are some, 2 when the database cannot be opened.
    """
    from hwtune.db import ResultsDB
    from hwtune.db import integrity

    from hwtune.db.connect import resolve_path
    from hwtune.errors import UsageError

    path = resolve_path(db_path)
    if str(path) != ":memory:" and not path.exists():
        # A check repairs what is there: it never creates a database.
        raise UsageError(f"no results database at {path}: give --db PATH")
    db_path = path
    opener = ResultsDB.open if fix else ResultsDB.open_for_reading
    with opener(db_path) as handle:
        report = integrity.find(handle)
        if fix and report.problems:
            integrity.fix(handle, report)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        if not report.problems:
            click.echo(f"ok: {report.path}: {report.rows_checked} rows checked, none corrupt")
        else:
            n = len(report.problems)
            click.echo(f"{report.path}: {n} corrupt row{'s' if n != 1 else ''} of "
                       f"{report.rows_checked}")
            for p in report.problems:
                label = f" ({p.label})" if p.label else ""
                for column, reason in p.reasons:
                    click.echo(f"  {p.table} {p.key_text}{label}: {column}: {reason}")
                click.echo(f"    --fix: {p.action}")
            if fix:
                click.echo(f"fixed: {len(report.fixed)} change(s) committed")
            else:
                click.echo("run `hwtune db check --fix` to repair or drop them")
    sys.exit(1 if report.problems and not fix else 0)
