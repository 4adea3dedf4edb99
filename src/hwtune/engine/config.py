"""Engine configuration: what runs where, validated against this machine,
and resolved from command-line flags, results.db and defaults.

Precedence (highest first): flags given on the command line, the stored
'tuned' config of (host, graph), the stored 'user' config, the default
(1 executor x all usable CPUs, the default scheduler).

Scheduler names and the properties this module branches on (one team,
worker groups, default pinning) come from the engine's scheduler table
(hwtune.native.sched), never from a list here.
"""

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from hwtune.errors import UsageError
from hwtune.native import sched as sched_table

# Flags this module resolves (the CLI passes them as overrides).
FLAG_FIELDS = ("executors", "threads", "scheduler", "pin")


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"invalid {_flag(name)} {value!r}: must be an integer >= 1")
    return value


def _default_scheduler() -> str:
    return sched_table.default().name


@dataclass(frozen=True)
class EngineConfig:
    executors: int = 1
    threads: int = 1  # per executor
    scheduler: str = field(default_factory=_default_scheduler)
    # None: the scheduler's default (its table row says whether it pins by
    # default; a scheduler that never pins ignores True).
    pin: Optional[bool] = None
    op_threads: Dict[str, int] = field(default_factory=dict)
    op_params: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    op_priority: Dict[str, float] = field(default_factory=dict)
    # Profiled seconds per op (levels, the tiny-op and solo tests).
    op_cost: Dict[str, float] = field(default_factory=dict)
    # Worker-group schedulers (corun): op -> [[threads, seconds], ...], best
    # first (Strategy 3's candidates); threads count workers out of
    # executors x threads.
    op_candidates: Dict[str, List[List[float]]] = field(default_factory=dict)

    @property
    def sched(self) -> "sched_table.Scheduler":
        """The scheduler's table row (UsageError for an unknown name)."""
        return sched_table.lookup(self.scheduler, "--scheduler")

    @property
    def pinned(self) -> bool:
        if self.pin is not None:
            return bool(self.pin)
        return self.sched.pinned_by_default

    @property
    def workers(self) -> int:
        """Threads one op may get: a team's, or every worker for a
        worker-group scheduler."""
        return self.total_threads if self.sched.worker_groups else self.threads

    @property
    def total_threads(self) -> int:
        return self.executors * self.threads

    def validate(self, cpus: Sequence[int], op_names: Optional[Sequence[str]] = None
                 ) -> "EngineConfig":
        """Raise UsageError naming the flag for anything impossible here;
        returns self so calls chain."""
        from hwtune.native.pool import format_cpus

        sched = self.sched
        _count("executors", self.executors)
        _count("threads", self.threads)
        if sched.single_team and self.executors != 1:
            others = [s.name for s in sched_table.schedulers().values() if not s.single_team]
            raise UsageError(
                f"invalid --executors {self.executors} with --scheduler {sched.name} (one "
                f"executor with all threads): use --executors 1 or --scheduler "
                f"{' / '.join(others)}")
        n = len(cpus)
        if self.total_threads > n:
            raise UsageError(
                f"invalid --executors {self.executors} --threads {self.threads}: "
                f"{self.total_threads} threads but this process may use {n} CPU"
                f"{'s' if n != 1 else ''} ({format_cpus(cpus)}); keep executors x threads <= {n}")
        known = set(op_names) if op_names is not None else None
        for what, table in (("op_threads", self.op_threads), ("op_params", self.op_params),
                            ("op_priority", self.op_priority), ("op_cost", self.op_cost),
                            ("op_candidates", self.op_candidates)):
            if not isinstance(table, Mapping):
                raise UsageError(f"{what} must map op names to values, got {type(table).__name__}")
            unknown = sorted(k for k in table if known is not None and k not in known)
            if unknown:
                raise UsageError(f"{what} names op{'s' if len(unknown) > 1 else ''} not in the "
                                 f"graph: {', '.join(unknown[:5])}")
        workers = self.workers
        for name, t in self.op_threads.items():
            if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= workers:
                what = f"{sched.name}'s workers" if sched.worker_groups else "one executor"
                raise UsageError(f"op_threads[{name!r}] = {t!r}: must be an integer in "
                                 f"1..{workers} (the threads of {what})")
        for name, p in self.op_priority.items():
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
                raise UsageError(f"op_priority[{name!r}] = {p!r}: must be a finite number")
        for name, c in self.op_cost.items():
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) \
                    or c < 0:
                raise UsageError(f"op_cost[{name!r}] = {c!r}: must be seconds >= 0")
        for name, cands in self.op_candidates.items():
            if not isinstance(cands, Sequence) or isinstance(cands, str) or not cands:
                raise UsageError(f"op_candidates[{name!r}] must be a non-empty list of "
                                 f"[threads, seconds] pairs, got {cands!r}")
            for pair in cands:
                ok = (isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 2
                      and isinstance(pair[0], int) and not isinstance(pair[0], bool)
                      and 1 <= pair[0] <= workers
                      and isinstance(pair[1], (int, float)) and not isinstance(pair[1], bool)
                      and math.isfinite(pair[1]) and pair[1] >= 0)
                if not ok:
                    raise UsageError(f"op_candidates[{name!r}] has {pair!r}: each candidate is "
                                     f"[threads 1..{workers}, seconds >= 0]")
        for name, p in self.op_params.items():
            if not isinstance(p, Mapping):
                raise UsageError(f"op_params[{name!r}] must be an object of template "
                                 f"parameters, got {p!r}")
        return self

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out["pin"] = self.pinned
        return out

    def describe(self) -> str:
        pin = "pinned" if self.pinned else "unpinned"
        return f"{self.executors} executor x {self.threads} threads, {self.scheduler}, {pin}"

    @classmethod
    def from_db_row(cls, row: Mapping[str, Any]) -> "EngineConfig":
        return cls(executors=row["executors"], threads=row["threads_per_executor"],
                   scheduler=row["scheduler"], pin=bool(row["pin"]),
                   op_threads=dict(row["op_threads"]), op_params=dict(row["op_params"]),
                   op_priority=dict(row["op_priority"]), op_cost=dict(row.get("op_cost") or {}),
                   op_candidates={k: [list(p) for p in v]
                                  for k, v in (row.get("op_candidates") or {}).items()})

    def db_fields(self) -> Dict[str, Any]:
        """Keyword arguments of ResultsDB.put_engine_config."""
        return dict(executors=self.executors, threads_per_executor=self.threads,
                    scheduler=self.scheduler, pin=self.pinned, op_threads=dict(self.op_threads),
                    op_params=dict(self.op_params), op_priority=dict(self.op_priority),
                    op_cost=dict(self.op_cost),
                    op_candidates={k: [list(p) for p in v] for k, v in self.op_candidates.items()})


def default_config(usable: int) -> EngineConfig:
    return EngineConfig(executors=1, threads=max(1, usable),
                        scheduler=sched_table.default().name)


def usable_cpu_count(cpus: Sequence[int]) -> int:
    """The affinity mask capped by a cgroup CPU quota (as hwtune scan uses)."""
    from hwtune.machine.cgroup import cpu_quota, usable_cpus
    return max(1, usable_cpus(len(cpus), cpu_quota()["quota_cpus"]) or len(cpus))


@dataclass(frozen=True)
class Resolved:
    config: EngineConfig
    source: str  # 'default', 'tuned', 'user', optionally '+flags'
    notice: Optional[str] = None


def _apply_flags(base: EngineConfig, flags: Mapping[str, Any], n_allowed: int,
                 usable: int) -> Tuple[EngineConfig, List[str]]:
    """Flags replace fields of base; a count left out is re-derived when the
    stored one no longer fits beside the given one."""
    notes = []
    cfg = replace(base, **{k: flags[k] for k in FLAG_FIELDS if k in flags})
    if "executors" in flags:
        _count("executors", flags["executors"])
        if cfg.sched.single_team and flags["executors"] > 1 and "scheduler" not in flags:
            parallel = sched_table.default(many_executors=True).name
            cfg = replace(cfg, scheduler=parallel)
            notes.append(f"--executors {flags['executors']} runs several executors: using "
                         f"--scheduler {parallel} (name another with --scheduler)")
        if "threads" not in flags and cfg.total_threads > n_allowed:
            cfg = replace(cfg, threads=max(1, usable // flags["executors"]))
    elif "threads" in flags:
        _count("threads", flags["threads"])
        if cfg.total_threads > n_allowed:
            cfg = replace(cfg, executors=max(1, usable // flags["threads"]))
    if "scheduler" in flags and cfg.sched.single_team and "executors" not in flags:
        cfg = replace(cfg, executors=1)
    limit = cfg.workers
    if cfg.op_threads and (cfg.threads, cfg.executors) != (base.threads, base.executors):
        # Stored per-op counts were tuned for another team size.
        cfg = replace(cfg, op_threads={k: v for k, v in cfg.op_threads.items()
                                       if isinstance(v, int) and v <= limit})
    if cfg.op_candidates and (cfg.threads, cfg.executors) != (base.threads, base.executors):
        kept = {k: [p for p in v if isinstance(p, (list, tuple)) and p and p[0] <= limit]
                for k, v in cfg.op_candidates.items()}
        cfg = replace(cfg, op_candidates={k: v for k, v in kept.items() if v})
    return cfg, notes


def resolve(db, host_key: str, graph_hash: str, overrides: Optional[Mapping[str, Any]] = None,
            *, cpus: Optional[Sequence[int]] = None, op_names: Optional[Sequence[str]] = None
            ) -> Resolved:
    """The config to run graph_hash with on host_key. overrides holds the
    flags the user gave (keys of FLAG_FIELDS, absent = not given); db may be
    None (nothing stored). Raises UsageError for impossible settings."""
    if cpus is None:
        from hwtune.native.pool import allowed_cpus
        cpus = allowed_cpus()
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    bad = sorted(set(flags) - set(FLAG_FIELDS))
    if bad:
        raise UsageError(f"unknown engine setting{'s' if len(bad) > 1 else ''}: {', '.join(bad)}")
    if "scheduler" in flags:
        sched_table.lookup(flags["scheduler"], "--scheduler")
    usable = min(usable_cpu_count(cpus), len(cpus))

    base, source, notice = None, "default", None
    if db is not None:
        for stored in ("tuned", "user"):
            row = db.engine_config(host_key, graph_hash, stored)
            if row is not None:
                base, source = EngineConfig.from_db_row(row), stored
                if row["scheduler"] not in sched_table.names() and "scheduler" not in flags:
                    # Written by an hwtune with a scheduler this one lacks.
                    raise UsageError(
                        f"the {stored} engine config of this graph names scheduler "
                        f"{row['scheduler']!r}, unknown to this hwtune (one of: "
                        f"{', '.join(sched_table.names())}): pass --scheduler to override")
                break
    if base is None:
        base = default_config(usable)
        if not flags:
            notice = (f"no tuned or user engine config for this graph on this host: using the "
                      f"default {base.describe()} (set --executors/--threads/--scheduler to "
                      f"choose)")
        elif not {"executors", "threads", "scheduler"} <= set(flags):
            notice = (f"no tuned or user engine config for this graph on this host: flags "
                      f"apply to the default {base.describe()}")
    cfg, notes = _apply_flags(base, flags, len(cpus), usable)
    if flags:
        source += "+flags"
    if notes:
        notice = "; ".join(([notice] if notice else []) + notes)
    cfg.validate(cpus, op_names)
    return Resolved(cfg, source, notice)
