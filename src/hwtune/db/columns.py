"""The JSON columns of results.db, read back as data from outside.

Another program, a disk error or a hand edit can leave any JSON column
unparseable or of the wrong shape. Every read decodes through `decode`,
which checks the column's shape (an object of numbers, a list of samples)
and raises CorruptRowError naming the table, the row's key and the column,
and how to repair it: `hwtune db check` lists every such row and `--fix`
repairs it (a column that can be rebuilt) or drops it (the row, with the
rows that depend on it), as COLUMNS says per column.
"""

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from hwtune.errors import DatabaseError

REPAIR_HINT = ("run `hwtune db check` to list the corrupt rows and `hwtune db check --fix` "
               "to repair or drop them")


class CorruptRowError(DatabaseError):
    """A stored row whose JSON column cannot be used."""

    def __init__(self, table: str, key: str, column: str, reason: str, path=None):
        self.table, self.key, self.column, self.reason = table, key, column, reason
        where = f" in {path}" if path else ""
        super().__init__(f"corrupt row{where}: {table} {key}: {column}: {reason}; {REPAIR_HINT}")


class _Bad(Exception):
    pass


def _reject_constant(text):
    raise _Bad(f"{text} is not JSON")


# -- shapes ------------------------------------------------------------------
def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def any_json(v) -> None:
    pass


def obj(v) -> None:
    if not isinstance(v, dict):
        raise _Bad(f"expected an object, got {type(v).__name__}")


def numbers(v) -> None:
    if not isinstance(v, list):
        raise _Bad(f"expected a list of numbers, got {type(v).__name__}")
    for i, x in enumerate(v):
        if not _finite(x):
            raise _Bad(f"item {i} is {x!r}, not a finite number")


def lowered(v) -> None:
    """A lowered graph (hwtune.engine.lowered): tensors and ops lists."""
    if v is None:
        return
    obj(v)
    for key in ("tensors", "ops"):
        if not isinstance(v.get(key), list):
            raise _Bad(f'expected "{key}" to be a list')


def expanded(v) -> None:
    """An expanded model.json: an object with an ops list (load_model
    checks the rest where it is used)."""
    obj(v)
    if not isinstance(v.get("ops"), list):
        raise _Bad('expected "ops" to be a list')


# -- the columns -------------------------------------------------------------
# What --fix does with a row whose column is corrupt:
#   reset  set the column to `empty` (a descriptive or rebuilt-later value)
#   null   set it to NULL (rebuilt by the next `hwtune run`)
#   drop   delete the row (and DEPENDENTS), which the next tune or run redoes
@dataclass(frozen=True)
class Column:
    check: Callable[[Any], None]
    fix: str
    empty: Optional[str] = None
    nullable: bool = False
    why: str = ""


@dataclass(frozen=True)
class Table:
    key: Tuple[str, ...]
    columns: Dict[str, Column]


TABLES: Dict[str, Table] = {
    "hosts": Table(("host_key",), {
        "fingerprint_json": Column(obj, "reset", "{}", why="the next command on that host "
                                                            "stores its fingerprint again")}),
    "runs": Table(("run_id",), {
        "options_json": Column(obj, "reset", "{}", why="the options are a description")}),
    "measurements": Table(("id",), {
        "params_json": Column(obj, "drop"),
        "samples_json": Column(numbers, "drop")}),
    "run_facts": Table(("id",), {
        "value_json": Column(any_json, "drop")}),
    "graphs": Table(("graph_hash",), {
        "expanded_json": Column(expanded, "drop", why="with its engine configs; the next run "
                                                       "or tune-graph of the model stores it"),
        "lowered_json": Column(lowered, "null", nullable=True,
                               why="the next `hwtune run` of the model stores it")}),
    # Per-op maps: objects here; their values are checked by the engine's
    # config rules (EngineConfig.validate), as hwtune-run checks them.
    "engine_configs": Table(("id",), {
        "op_threads_json": Column(obj, "drop"),
        "op_params_json": Column(obj, "drop"),
        "op_priority_json": Column(obj, "drop"),
        "op_cost_json": Column(obj, "drop"),
        "op_candidates_json": Column(obj, "drop"),
        "lowered_json": Column(lowered, "drop", nullable=True),
        "op_precision_json": Column(obj, "drop")}),
    "tuning_trials": Table(("id",), {
        "params_json": Column(obj, "drop"),
        "samples_json": Column(numbers, "drop")}),
    "tuned_subjects": Table(("id",), {
        "best_params_json": Column(obj, "drop", why="the next tuning reuses its trials")}),
    "check_baselines": Table(("id",), {
        "suite_json": Column(obj, "drop", why="with its figures")}),
    "check_baseline_figures": Table(("baseline_id", "figure"), {
        "params_json": Column(obj, "drop"),
        "samples_json": Column(numbers, "drop"),
        "ref_json": Column(numbers, "drop")}),
    "dynamic_runs": Table(("id",), {
        "op_threads_json": Column(obj, "reset", "{}", why="a description of the run"),
        "seconds_json": Column(numbers, "drop")}),
    "dynamic_configs": Table(("id",), {
        "op_threads_json": Column(obj, "drop", why="the next tune-graph --inputs redoes it")}),
}


def key_text(table: str, row: Dict[str, Any]) -> str:
    t = TABLES[table]
    return " ".join(f"{k}={row.get(k)!r}" if not isinstance(row.get(k), str)
                    else f"{k}={row[k][:16]}" for k in t.key)


def parse(text: Any, column: Column) -> Any:
    """The column's value, or _Bad saying why it cannot be used."""
    if text is None:
        if column.nullable:
            return None
        raise _Bad("NULL where JSON is required")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad("not UTF-8 text") from None
    if not isinstance(text, str):
        raise _Bad(f"a {type(text).__name__}, not JSON text")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _Bad(f"not valid JSON ({str(exc)[:80]})") from None
    column.check(value)
    return value


def decode(table: str, row: Dict[str, Any], column: str, path=None) -> Any:
    """Parse and check row[column] of table; CorruptRowError if it is bad."""
    try:
        return parse(row.get(column), TABLES[table].columns[column])
    except _Bad as exc:
        raise CorruptRowError(table, key_text(table, row), column, str(exc), path) from None


def problems(table: str, row: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(column, reason) for every corrupt JSON column of one row."""
    out = []
    for name, column in TABLES[table].columns.items():
        if name not in row:
            continue
        try:
            parse(row[name], column)
        except _Bad as exc:
            out.append((name, str(exc)))
    return out
