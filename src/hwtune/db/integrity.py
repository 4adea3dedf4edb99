"""`hwtune db check`: find every stored row hwtune could not use, and with
--fix repair or drop it (hwtune.db.columns says which per column).

A row is corrupt when a JSON column does not parse or has the wrong shape,
or when an engine config holds a value no engine runs (a stored config is
checked by the same rules `hwtune run` and hwtune-run apply, minus this
machine's CPU count: a config tuned on a larger host is still good data).
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from hwtune.db import columns


@dataclass
class RowProblem:
    table: str
    key: Dict[str, Any]             # the row's key columns
    reasons: List[Tuple[str, str]]  # (column, why)
    action: str                     # what --fix does
    label: str = ""                 # extra words naming the row for a person

    @property
    def key_text(self) -> str:
        return columns.key_text(self.table, self.key)

    def to_json(self) -> Dict[str, Any]:
        return {"table": self.table, "key": self.key, "label": self.label,
                "problems": [{"column": c, "reason": r} for c, r in self.reasons],
                "fix": self.action}


@dataclass
class Report:
    path: str
    rows_checked: int = 0
    problems: List[RowProblem] = field(default_factory=list)
    fixed: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {"db": self.path, "rows_checked": self.rows_checked, "ok": not self.problems,
                "problems": [p.to_json() for p in self.problems], "fixed": self.fixed}


def _action(table: str, column_names) -> str:
    cols = [columns.TABLES[table].columns[c] for c in column_names]
    if any(c.fix == "drop" for c in cols):
        why = next((c.why for c in cols if c.fix == "drop" and c.why), "")
        return "drop the row" + (f" ({why})" if why else "")
    parts = []
    for name, c in zip(column_names, cols):
        value = "NULL" if c.fix == "null" else c.empty
        parts.append(f"set {name} to {value}" + (f" ({c.why})" if c.why else ""))
    return "; ".join(parts)


def _label(table: str, row: Dict[str, Any]) -> str:
    if table == "engine_configs":
        return f"{row.get('source')} config of graph {str(row.get('graph_hash'))[:12]}"
    if table == "graphs":
        return f"graph {row.get('name')!r}"
    if table in ("measurements", "run_facts", "tuning_trials", "dynamic_runs"):
        return f"run {row.get('run_id')}"
    return ""


# A check of a table's rows by rules a higher layer holds: (column, why)
# for each problem of the row. The engine's config rules are one
# (hwtune.engine.config.stored_config_problems, for engine_configs).
RowCheck = Callable[[Dict[str, Any]], List[Tuple[str, str]]]


def find(db, value_checks: Optional[Mapping[str, RowCheck]] = None) -> Report:
    """Every corrupt row of db (a ResultsDB), in table order. value_checks:
    table -> a check of the values of each of its rows whose JSON columns
    are sound (a reason under the column "config" drops the row)."""
    value_checks = value_checks or {}
    report = Report(str(db.path))
    for table, spec in columns.TABLES.items():
        cols = ", ".join(dict.fromkeys(spec.key + tuple(spec.columns) + _extra(table)))
        for row in db._query(f"SELECT {cols} FROM {table}"):
            report.rows_checked += 1
            reasons = columns.problems(table, row)
            if table in value_checks and not reasons:
                reasons = value_checks[table](row)
            if reasons:
                names = [c for c, _ in reasons if c in spec.columns] or list(spec.columns)[:1]
                action = ("drop the row" if any(c == "config" for c, _ in reasons)
                          else _action(table, names))
                report.problems.append(RowProblem(table, {k: row[k] for k in spec.key},
                                                  reasons, action, _label(table, row)))
    return report


def _extra(table: str) -> Tuple[str, ...]:
    return {"engine_configs": ("graph_hash", "source", "executors", "threads_per_executor",
                               "scheduler", "pin"),
            "graphs": ("name",), "measurements": ("run_id",), "run_facts": ("run_id",),
            "tuning_trials": ("run_id",), "dynamic_runs": ("run_id",)}.get(table, ())


def _where(key: Dict[str, Any]) -> Tuple[str, List[Any]]:
    return " AND ".join(f"{k} = ?" for k in key), list(key.values())


def _drop(conn, table: str, key: Dict[str, Any]) -> List[str]:
    """Delete one row and what refers to it; returns what was deleted."""
    done = []
    where, args = _where(key)
    if table == "graphs":
        for (cid,) in conn.execute("SELECT id FROM engine_configs WHERE graph_hash = ?", args):
            done += _drop(conn, "engine_configs", {"id": cid})
    elif table == "engine_configs":
        conn.execute("UPDATE op_profiles SET config_id = NULL WHERE config_id = ?", args)
    elif table == "check_baselines":
        n = conn.execute("DELETE FROM check_baseline_figures WHERE baseline_id = ?",
                         args).rowcount
        if n:
            done.append(f"dropped {n} figure(s) of check_baselines {columns.key_text(table, key)}")
    conn.execute(f"DELETE FROM {table} WHERE {where}", args)
    done.append(f"dropped {table} {columns.key_text(table, key)}")
    return done


def fix(db, report: Report) -> List[str]:
    """Repair or drop every row of report, in one transaction."""
    done: List[str] = []
    with db._write("repair"):
        conn = db._conn
        for p in report.problems:
            if p.action.startswith("drop"):
                if conn.execute(f"SELECT 1 FROM {p.table} WHERE {_where(p.key)[0]}",
                                _where(p.key)[1]).fetchone():
                    done += _drop(conn, p.table, p.key)
                continue
            where, args = _where(p.key)
            for name, _ in p.reasons:
                c = columns.TABLES[p.table].columns[name]
                conn.execute(f"UPDATE {p.table} SET {name} = ? WHERE {where}",
                             [None if c.fix == "null" else c.empty] + args)
                done.append(f"set {p.table} {p.key_text} {name} to "
                            f"{'NULL' if c.fix == 'null' else c.empty}")
    report.fixed = done
    return done
