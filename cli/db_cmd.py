"""`hwtune db`: look after results.db itself (thin layer over hwtune.db)."""

from __future__ import annotations

import json
import sys

import click

from hwtune.cli.options import db_option, example, json_option


@click.group("db", epilog=example("hwtune db check --fix",
                                   "hwtune db export --host HOST -o records.jsonl",
                                   "hwtune db merge a.db b.db -o fleet.db"))
def db():
    """Check, repair, export, import and merge results databases."""


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
    from hwtune.engine.config import stored_config_problems
    from hwtune.errors import UsageError

    path = resolve_path(db_path)
    if str(path) != ":memory:" and not path.exists():
        # A check repairs what is there: it never creates a database.
        raise UsageError(f"no results database at {path}: give --db PATH")
    db_path = path
    opener = ResultsDB.open if fix else ResultsDB.open_for_reading
    with opener(db_path) as handle:
        report = integrity.find(handle, {"engine_configs": stored_config_problems})
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


def _print_import(report, source: str) -> None:
    added = sum(report.added.values())
    same = sum(report.same.values())
    replaced = sum(report.replaced.values())
    click.echo(f"{source}: {added} row(s) added, {replaced} replaced by a better measured "
               f"one, {same} already there")
    for kind in sorted(set(report.added) | set(report.replaced)):
        click.echo(f"  {kind}: +{report.added.get(kind, 0)}"
                   + (f", {report.replaced[kind]} replaced" if kind in report.replaced else ""))


@db.command("export", epilog=example("hwtune db export -o records.jsonl",
                                     "hwtune db export --host $(hwtune scan --show --json | "
                                     "jq -r .host_key) -o mine.jsonl"))
@click.option("--host", "host", default=None, metavar="KEY",
              help="only this host's rows (and the graphs its configs run); default: every host")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="JSON Lines file to write ('-' for stdout)")
@db_option
def export_cmd(host, output, db_path):
    """Write results.db's records (hosts, runs with their measurements, facts
    and traces, check baselines, graphs with their lowered form, engine
    configs, op profiles, tuning trials, tuned subjects) as JSON Lines: one
    object per row, a versioned header first, per-kind counts last. The
    database is only read.
    """
    from hwtune.db import ResultsDB
    from hwtune.db import records

    with ResultsDB.open_snapshot(db_path) as handle:
        if output == "-":
            counts = records.write_jsonl(records.export_records(handle, host), sys.stdout)
        else:
            counts = records.export_to_file(handle, output, host)
    if output != "-":
        total = sum(counts.values())
        shown = ", ".join(f"{k} {v}" for k, v in counts.items()) or "nothing"
        click.echo(f"wrote {total} record(s) to {output} ({shown})", err=True)


@db.command("import", epilog=example("hwtune db import records.jsonl --db results.db"))
@click.argument("file", metavar="FILE")
@db_option
@json_option
def import_cmd(file, db_path, as_json):
    """Merge an exported records file into results.db (created if missing),
    in one transaction. Rows keep their host keys; a row already there is
    left alone, so importing twice changes nothing; a tuned result or tuned
    config held by both is settled by the better measured time.
    """
    from hwtune.db import ResultsDB
    from hwtune.db import records
    from hwtune.errors import UsageError

    try:
        f = sys.stdin if file == "-" else open(file, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    try:
        with ResultsDB.open(db_path) as handle:
            try:
                report = records.import_records(handle, records.read_jsonl(f, file), file)
            except UnicodeDecodeError:
                raise records.RecordsError(f"{file}: not UTF-8 text") from None
    finally:
        if f is not sys.stdin:
            f.close()
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_import(report, file)


@db.command("merge", epilog=example("hwtune db merge host1.db host2.db -o fleet.db"))
@click.argument("sources", nargs=-1, required=True, metavar="DB...")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="database to merge into (created if missing; its own rows are kept)")
@json_option
def merge_cmd(sources, output, as_json):
    """Merge every row of each DB into the output database, keeping host
    keys. Idempotent: merging the same files again changes nothing. Where
    two files hold a tuned result or tuned config for the same host and
    subject, the better measured time wins. The inputs are only read.
    """
    from hwtune.db import ResultsDB
    from hwtune.db import records
    from hwtune.db.connect import resolve_path
    from hwtune.errors import UsageError

    target = resolve_path(output)
    for s in sources:
        p = resolve_path(s)
        if not p.is_file():
            raise UsageError(f"no database at {p}")
        if p == target:
            raise UsageError(f"{s} is both an input and the output; merge into a new file, "
                             "or use `hwtune db import` to add records to it")
    with ResultsDB.open(target) as handle:
        reports = records.merge([resolve_path(s) for s in sources], handle,
                                ResultsDB.open_snapshot)
        counts = records.row_counts(handle)
    if as_json:
        click.echo(json.dumps({"output": str(target), "rows": counts,
                               "sources": {s: r.to_json() for s, r in zip(sources, reports)}},
                              indent=2))
    else:
        for s, r in zip(sources, reports):
            _print_import(r, s)
        click.echo(f"{target}: {sum(counts.values())} row(s)")
