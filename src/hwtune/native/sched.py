"""Binding for the scheduler table of hwtune/engine.h: every scheduler's
name and the properties callers branch on, read from the library (the
table in engine/exec/sched_table.c is the only list of schedulers)."""

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Tuple

from hwtune.errors import UsageError
from hwtune.native._lib import enum_names, sig
from hwtune.native.abi import mirror


SchedInfo = mirror("hwt_sched_info")


_count = sig("hwt_sched_count", ctypes.c_int)
_at = sig("hwt_sched_at", ctypes.POINTER(SchedInfo), ctypes.c_int)
PINNING = enum_names("hwt_sched_pinning")  # "never" / "on_request" / "by_default"


@dataclass(frozen=True)
class Scheduler:
    """One row of the table (see hwt_sched_info for each property)."""

    name: str
    summary: str
    single_team: bool    # one executor with every thread
    worker_groups: bool  # executors x threads workers; op thread counts count workers
    in_order: bool       # the plan's topological order, one op at a time
    needs_costs: bool    # orders ops by levels: profile per-op costs for it
    pins: str            # "never", "on_request" or "by_default"
    default_one: bool    # the scheduler of a config that names none
    default_many: bool   # what several executors get when none is named

    @property
    def pinned_by_default(self) -> bool:
        return self.pins == "by_default"

    @property
    def can_pin(self) -> bool:
        return self.pins != "never"


@lru_cache(maxsize=None)
def _table() -> Tuple[Scheduler, ...]:
    pin_names = {v: k for k, v in PINNING.items()}
    rows = []
    for i in range(_count()):
        r = _at(i).contents
        rows.append(Scheduler(
            name=r.name.decode(), summary=r.summary.decode(), single_team=bool(r.single_team),
            worker_groups=bool(r.worker_groups), in_order=bool(r.in_order),
            needs_costs=bool(r.needs_costs), pins=pin_names[r.pins],
            default_one=bool(r.default_one), default_many=bool(r.default_many)))
    return tuple(rows)


def schedulers() -> Dict[str, Scheduler]:
    """name -> row, in table order."""
    return {s.name: s for s in _table()}


def names() -> Tuple[str, ...]:
    return tuple(s.name for s in _table())


def default(many_executors: bool = False) -> Scheduler:
    """The scheduler a config that names none gets (with several executors:
    the one they get)."""
    return next(s for s in _table() if (s.default_many if many_executors else s.default_one))


def lookup(name, flag: Optional[str] = None) -> Scheduler:
    """The row called name; otherwise UsageError naming the flag that gave
    it (if any) and the choices, and the spelling meant when only '_' for
    '-' differs."""
    table = schedulers()
    if isinstance(name, str) and name in table:
        return table[name]
    hint = ""
    if isinstance(name, str) and name.replace("_", "-") in table:
        hint = f" (did you mean {name.replace('_', '-')!r}?)"
    what = f"invalid {flag}" if flag else "unknown scheduler"
    raise UsageError(f"{what} {name!r}{hint}: choose one of {', '.join(table)}")


def help_text() -> str:
    """The names for a --scheduler help text, default first."""
    return ", ".join(names())
