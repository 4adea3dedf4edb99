"""Engine configuration: what runs where, validated against this machine,
and resolved from command-line flags, results.db and defaults.

Precedence (highest first): flags given on the command line, the stored
'tuned' config of (host, graph), the stored 'user' config, the default
(1 executor x all usable CPUs, the default scheduler).

Scheduler names and the properties this module branches on (one team,
worker groups, default pinning) come from the engine's scheduler table
(hwtune.native.sched), never from a list here.
"""

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from hwtune.db import columns
from hwtune.errors import HwtuneError, UsageError
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
    # tune-graph --precision (issue #43): op -> {"precision": "int8" | "bf16",
    # int8: the calibrated activation "a_scale", "a_zero"}; absent ops run
    # fp32 (hwtune.graph.passes.op_precision applies it).
    op_precision: Dict[str, Dict[str, Any]] = field(default_factory=dict)

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

    def validate(self, cpus: Optional[Sequence[int]], op_names: Optional[Sequence[str]] = None,
                 *, origin: Optional[str] = None) -> "EngineConfig":
        """Raise UsageError for anything impossible here; returns self so
        calls chain. The rules are the C engine's (engine/exec/
        config_check.c), which hwtune-run applies too. cpus: the CPUs the
        run may use (None: no CPU budget, e.g. checking a stored row); origin:
        where the values came from ("the stored tuned engine config of graph
        ..."), else they are named as the flags that set them."""
        from hwtune.native import config_check as cc

        if not isinstance(self.scheduler, str) or self.scheduler not in sched_table.names():
            if origin:
                raise UsageError(f"{origin} names scheduler {self.scheduler!r}, unknown to this "
                                 f"hwtune (one of: {', '.join(sched_table.names())}): pass "
                                 "--scheduler to override" + _repair(origin))
            sched_table.lookup(self.scheduler, "--scheduler")
        for name in ("executors", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"{_prefix(origin, _flag(name), value)}: must be an integer"
                                 + _repair(origin))
        # A stored pin is 0 or 1; any other value reaches the C check as is.
        pin = self.pin if isinstance(self.pin, int) and not isinstance(self.pin, bool) \
            else int(self.pinned)
        n = None if cpus is None else len(cpus)
        field, msg = cc.check(self.executors, self.threads, self.scheduler, pin, n)
        if field != cc.OK:
            raise UsageError(self._scalar_message(field, msg, cpus, origin))
        known = set(op_names) if op_names is not None else None
        for what, table in (("op_threads", self.op_threads), ("op_params", self.op_params),
                            ("op_priority", self.op_priority), ("op_cost", self.op_cost),
                            ("op_candidates", self.op_candidates),
                            ("op_precision", self.op_precision)):
            if not isinstance(table, Mapping):
                raise UsageError(f"{_where(origin)}{what} must map op names to values, got "
                                 f"{type(table).__name__}" + _repair(origin))
            unknown = sorted(k for k in table if known is not None and k not in known)
            if unknown:
                raise UsageError(f"{_where(origin)}{what} names op{'s' if len(unknown) > 1 else ''}"
                                 f" not in the graph: {', '.join(map(str, unknown[:5]))}")
        c = cc.CConfig(self.executors, self.threads, self.scheduler, int(self.pinned))

        def refuse(what, name, msg):
            raise UsageError(f"{_where(origin)}{what}[{name!r}]: {msg}" + _repair(origin))

        for what, field, table in (("op_threads", cc.OP_THREADS, self.op_threads),
                                   ("op_priority", cc.OP_PRIORITY, self.op_priority),
                                   ("op_cost", cc.OP_COST, self.op_cost)):
            for name, v in table.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    refuse(what, name, f"must be a number, got {v!r}")
                got, msg = cc.check_op(c, field, v)
                if got != cc.OK:
                    refuse(what, name, msg)
        for name, cands in self.op_candidates.items():
            if not isinstance(cands, Sequence) or isinstance(cands, str) or not cands:
                refuse("op_candidates", name, f"must be a non-empty list of [threads, seconds] "
                                              f"pairs, got {cands!r}")
            if len(cands) > cc.limit(cc.OP_CANDIDATES):
                refuse("op_candidates", name, f"more than {cc.limit(cc.OP_CANDIDATES)} "
                                              "candidates")
            for pair in cands:
                if (not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2
                        or any(isinstance(x, bool) or not isinstance(x, (int, float))
                               for x in pair)):
                    refuse("op_candidates", name, f"each candidate is a [threads, seconds] "
                                                  f"pair, got {pair!r}")
                got, msg = cc.check_op(c, cc.OP_CANDIDATES, pair[0], pair[1])
                if got != cc.OK:
                    refuse("op_candidates", name, msg)
        for name, p in self.op_params.items():
            if not isinstance(p, Mapping):
                refuse("op_params", name, f"must be an object of template parameters, got {p!r}")
        from hwtune.graph.passes.op_precision import check_entry
        for name, p in self.op_precision.items():
            msg = check_entry(p)
            if msg:
                refuse("op_precision", name, msg)
        return self

    def _scalar_message(self, field: int, msg: str, cpus, origin: Optional[str]) -> str:
        from hwtune.native import config_check as cc
        from hwtune.native.threads import format_cpus

        if field == cc.CPUS:
            if cpus:  # name them: "may use 2 CPUs (0-1); keep ..."
                msg = msg.replace(";", f" ({format_cpus(cpus)});", 1)
            if origin:
                return (f"{origin} runs {self.executors} executor(s) x {self.threads} thread(s): "
                        f"{msg}; choose a smaller config with --executors/--threads")
            return f"invalid --executors {self.executors} --threads {self.threads}: {msg}"
        if origin:
            return f"{origin}: {msg}" + _repair(origin)
        if field == cc.EXECUTORS and self.sched.single_team:
            return f"invalid --executors {self.executors} with --scheduler {self.scheduler}: {msg}"
        flag = {cc.SCHEDULER: "--scheduler", cc.EXECUTORS: "--executors",
                cc.THREADS: "--threads", cc.PIN: "--pin"}.get(field, "config")
        value = {cc.SCHEDULER: self.scheduler, cc.EXECUTORS: self.executors,
                 cc.THREADS: self.threads, cc.PIN: self.pin}.get(field)
        return f"invalid {flag} {value}: {msg}"

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out["pin"] = self.pinned
        return out

    def describe(self) -> str:
        pin = "pinned" if self.pinned else "unpinned"
        return f"{self.executors} executor x {self.threads} threads, {self.scheduler}, {pin}"

    @classmethod
    def from_db_row(cls, row: Mapping[str, Any]) -> "EngineConfig":
        pin = row["pin"]  # 0 or 1; anything else is kept for validate() to refuse
        return cls(executors=row["executors"], threads=row["threads_per_executor"],
                   scheduler=row["scheduler"], pin=bool(pin) if pin in (0, 1) else pin,
                   op_threads=dict(row["op_threads"]), op_params=dict(row["op_params"]),
                   op_priority=dict(row["op_priority"]), op_cost=dict(row.get("op_cost") or {}),
                   # kept as stored where it is not a list of pairs: validate() says why
                   op_candidates={k: [list(p) if isinstance(p, (list, tuple)) else p for p in v]
                                  if isinstance(v, list) else v
                                  for k, v in (row.get("op_candidates") or {}).items()},
                   op_precision=dict(row.get("op_precision") or {}))

    def db_fields(self) -> Dict[str, Any]:
        """Keyword arguments of ResultsDB.put_engine_config."""
        return dict(executors=self.executors, threads_per_executor=self.threads,
                    scheduler=self.scheduler, pin=self.pinned, op_threads=dict(self.op_threads),
                    op_params=dict(self.op_params), op_priority=dict(self.op_priority),
                    op_cost=dict(self.op_cost),
                    op_candidates={k: [list(p) for p in v] for k, v in self.op_candidates.items()},
                    op_precision={k: dict(v) for k, v in self.op_precision.items()})


def _prefix(origin: Optional[str], flag: str, value) -> str:
    return f"{origin}: {flag.lstrip('-')} {value!r}" if origin else f"invalid {flag} {value!r}"


def _where(origin: Optional[str]) -> str:
    return f"{origin}: " if origin else ""


def _repair(origin: Optional[str]) -> str:
    if not origin:
        return ""
    from hwtune.db.columns import REPAIR_HINT
    return f"; {REPAIR_HINT}"


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
    # The threads per executor the config's op_params (CONV knobs) were
    # chosen at: the stored config's own count, whatever flags changed
    # (hwtune.engine.conv_knobs picks each CONV's knobs for the count run).
    params_threads: Optional[int] = None


def _apply_flags(base: EngineConfig, flags: Mapping[str, Any], n_allowed: int,
                 usable: int) -> Tuple[EngineConfig, List[str]]:
    """Flags replace fields of base; a count left out is re-derived when the
    stored one no longer fits beside the given one."""
    notes = []
    cfg = replace(base, **{k: flags[k] for k in FLAG_FIELDS if k in flags})
    if "scheduler" in flags and "pin" not in flags and flags["scheduler"] != base.scheduler:
        # A stored pin was measured for the stored scheduler (the tuner
        # measures each pinning scheduler both ways): another scheduler
        # starts from its own default, not from that choice (issue #12:
        # --scheduler corun inherited an unpinned config and ran 7-25x
        # slower). --pin names it.
        cfg = replace(cfg, pin=None)
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
        from hwtune.native.threads import allowed_cpus
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
                if row["scheduler"] not in sched_table.names() and "scheduler" in flags:
                    # Written by an hwtune with a scheduler this one lacks:
                    # the flag names the one to use.
                    base = replace(base, scheduler=flags["scheduler"])
                # A stored row is data from outside: its values are checked
                # as hwtune-run checks them, and named as stored values.
                base.validate(None, origin=_stored(stored, graph_hash))
                break
    if base is None:
        base = default_config(usable)
        where = f" in {db.path}" if db is not None and getattr(db, "path", None) else ""
        if not flags:
            notice = (f"no tuned or user engine config for this graph on this host{where}: "
                      f"using the "
                      f"default {base.describe()} (set --executors/--threads/--scheduler to "
                      f"choose)")
        elif not {"executors", "threads", "scheduler"} <= set(flags):
            notice = (f"no tuned or user engine config for this graph on this host{where}: "
                      f"flags apply to the default {base.describe()}")
    cfg, notes = _apply_flags(base, flags, len(cpus), usable)
    if notes:
        notice = "; ".join(([notice] if notice else []) + notes)
    # Counts no flag set are the stored config's: say so if they do not fit.
    counts_flagged = bool({"executors", "threads"} & set(flags))
    origin = _stored(source, graph_hash) if source != "default" and not counts_flagged else None
    if flags:
        source += "+flags"
    cfg.validate(cpus, op_names, origin=origin)
    return Resolved(cfg, source, notice,
                    params_threads=base.threads if base.op_params else None)


def _stored(source: str, graph_hash: str) -> str:
    return f"the stored {source} engine config of graph {graph_hash[:12]}"


def stored_config_problems(row: Dict[str, Any]) -> List[Tuple[str, str]]:
    """Values of a stored engine config (an engine_configs row whose JSON
    columns parse) that no engine runs: the engine's own config check,
    without this machine's CPU budget (a config tuned on a larger host is
    still good data). `hwtune db check` hands it to hwtune.db.integrity."""
    try:
        cfg = EngineConfig.from_db_row({
            "executors": row["executors"], "threads_per_executor": row["threads_per_executor"],
            "scheduler": row["scheduler"], "pin": row["pin"],
            **{k: columns.parse(row[f"{k}_json"], columns.TABLES["engine_configs"]
                                .columns[f"{k}_json"]) or {}
               for k in ("op_threads", "op_params", "op_priority", "op_cost", "op_candidates",
                         "op_precision")}})
        cfg.validate(None, origin="stored")
    except HwtuneError as exc:
        return [("config", str(exc))]
    except Exception as exc:  # a shape the JSON checks already report
        return [("config", f"unusable values ({type(exc).__name__})")]
    return []
