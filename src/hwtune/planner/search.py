"""The prediction: per core count, every scheduler of the engine's table
and every split of the cores into executors x threads, simulated by the
schedulers themselves in virtual time (hwtune.native.simulate) with op
times from the cost model; then per-op thread counts for the best split of
each team scheduler (Liu et al.'s Strategy 1: each op's fastest count up to
the team size; Strategy 2: every op of a type gets the count fastest for the
type's largest instance), and corun with each op's three fastest counts as
its candidates (Strategy 3).

What a simulated configuration gets is what the engine gets from a tuned
config on that machine: per-op costs (the predicted seconds at the op's
thread count) for schedulers that order by levels, nothing for the others
(their tiny/solo flags come from the plan's own estimate, as in a real
run). Data another core wrote last costs what this host's calibration
measured between two of its cores (the transfer term of the simulator),
on every machine: a bundled description carries no such figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from hwtune.engine.simulator import Simulator
from hwtune.native.simulate import Overheads
from hwtune.planner.calibrate import Calibration
from hwtune.planner.costmodel import CostModel, OpTable
from hwtune.planner.machine import Machine
from hwtune.planner.opdata import OpData

# The engine's limit on executors (and corun's workers): one idle-bitmap word
# (HWT_EXEC_MAX_EXECUTORS, engine/exec/exec_internal.h).
MAX_EXECUTORS = 64
STRATEGIES = ("team", "strategy1", "strategy2")


@dataclass
class Split:
    """A scheduler running executors x threads: what a plan predicts and a
    validation measures."""
    scheduler: str
    executors: int
    threads: int

    @property
    def label(self) -> str:
        return f"{self.executors}x{self.threads}"

    def to_json(self) -> dict:
        return {"scheduler": self.scheduler, "executors": self.executors,
                "threads": self.threads}


@dataclass
class Config(Split):
    strategy: str = "team"        # team | strategy1 | strategy2 | strategy3
    latency_s: Optional[float] = None
    note: str = ""

    def to_json(self) -> dict:
        return {**super().to_json(), "strategy": self.strategy, "latency_s": self.latency_s,
                "note": self.note}


def splits(cores: int, single_team: bool = False) -> List[Tuple[int, int]]:
    """(executors, threads) with executors x threads = cores and at most
    MAX_EXECUTORS executors, fewest executors first."""
    if single_team:
        return [(1, cores)]
    return [(n, cores // n) for n in range(1, min(cores, MAX_EXECUTORS) + 1) if cores % n == 0]


@dataclass
class Predictor:
    """Everything one model's predictions on one machine need."""
    graph: object
    ops: List[OpData]
    t1: np.ndarray            # [n_ops] seconds on one thread of this host
    model: CostModel
    calibration: Calibration
    host: Machine
    scan: Optional[object] = None   # machine.HostFigures the fits came from
    # scheduler name -> per op, its 1-thread time in that scheduler's order
    # over the sequential order's (calibrate.order_scales); t1 is the latter
    order: Dict[str, np.ndarray] = field(default_factory=dict)
    # seconds charged to every op that runs, at every thread count: the
    # model's whole 1-thread run measured plain against the simulated one,
    # per op (inputs.run_gap)
    run_gap_s: float = 0.0
    whole_run: Optional[dict] = None   # how run_gap_s was found (inputs.run_gap)
    _sim: Optional[Simulator] = None
    _tables: Dict[tuple, OpTable] = field(default_factory=dict)

    @property
    def target(self) -> Machine:
        return self.model.target

    def sim(self) -> Simulator:
        if self._sim is None:
            self._sim = Simulator(self.graph)
        return self._sim

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    def t1_for(self, scheduler: Optional[str] = None) -> np.ndarray:
        """The ops' 1-thread seconds in the order scheduler runs them."""
        scale = self.order.get(scheduler) if scheduler else None
        return self.t1 if scale is None else self.t1 * scale

    def table(self, max_threads: int, scheduler: Optional[str] = None) -> OpTable:
        key = (max_threads, scheduler if scheduler in self.order else None)
        if key not in self._tables:
            tab = self.model.table(
                self.t1_for(key[1]), [d.bytes for d in self.ops], [d.fit_type for d in self.ops],
                max_threads, flops=[d.flops for d in self.ops])
            if self.run_gap_s:
                tab = tab.plus(np.array([0.0 if d.folded else self.run_gap_s
                                         for d in self.ops]))
            self._tables[key] = tab
        return self._tables[key]

    def overheads(self, scheduler: str, executors: int) -> Overheads:
        t = self.target
        return self.calibration.overheads_for(scheduler, executors, t.overhead_scale,
                                              t.forkjoin(executors) - t.forkjoin(2))

    # -- per-op thread counts -------------------------------------------------
    def strategy_threads(self, strategy: str, limit: int,
                         scheduler: Optional[str] = None) -> Optional[np.ndarray]:
        """Threads per op (graph.ops order) under Strategy 1 or 2 (op times
        in scheduler's order); None for the team default."""
        if strategy == "team":
            return None
        best = self.table(limit, scheduler).best_threads(limit)
        if strategy == "strategy1":
            return best
        largest: Dict[str, int] = {}
        for i, d in enumerate(self.ops):
            j = largest.get(d.type)
            if j is None or self.t1[i] > self.t1[j]:
                largest[d.type] = i
        return np.array([best[largest[d.type]] for d in self.ops])

    def op_cost(self, sched_row, executors: int, threads: int,
                op_threads: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """The per-op costs (graph.ops order) a scheduler that orders by
        levels gets, as a profiled run of this config would store them: each
        op's predicted seconds at its thread count; None for the others."""
        if not sched_row.needs_costs:
            return None
        tab = self.table(max(executors * threads, threads), sched_row.name)
        counts = op_threads if op_threads is not None else np.full(len(self.ops), threads)
        return tab.seconds[np.arange(len(self.ops)), counts - 1]

    # -- one simulated configuration --------------------------------------------
    def simulate(self, sched_row, executors: int, threads: int, strategy: str = "team",
                 events: bool = False):
        """(latency seconds, events) of one configuration on the target."""
        workers = executors * threads
        wide = workers if sched_row.worker_groups else threads
        tab = self.table(max(wide, 1), sched_row.name)
        op_threads = self.strategy_threads(strategy, threads, sched_row.name) \
            if not sched_row.worker_groups else None
        cands = None
        if sched_row.worker_groups and strategy == "strategy3":
            # within a team's worth of workers, as tune-graph's hill climb
            # finds them (its climb stops at the team size)
            cands = {d.name: [[t, s] for t, s in c]
                     for d, c in zip(self.ops, tab.candidates(threads))}
        op_cost = self.op_cost(sched_row, executors, threads, op_threads)
        return self.sim().run(
            executors=executors, threads=threads, scheduler=sched_row.name,
            seconds=tab.seconds, op_threads=op_threads, op_cost=op_cost, op_candidates=cands,
            mem_frac=tab.mem_frac, mem_bps=tab.mem_bps, bw_cap=self.target.bw_cap(),
            overheads=self.overheads(sched_row.name, workers if sched_row.worker_groups
                                     else executors),
            transfer=self.calibration.transfer(), events=events)


def plan_cores(p: Predictor, cores: int, rows: Sequence, progress=None) -> dict:
    """Every scheduler and split at `cores` cores, then per-op thread counts
    for each team scheduler's best split; the best of all."""
    out = {"cores": cores, "schedulers": {}, "best": None}
    every: List[Config] = []
    for row in rows:
        configs: List[Config] = []
        if row.worker_groups and cores > MAX_EXECUTORS:
            out["schedulers"][row.name] = {
                "splits": [], "best": None,
                "note": f"not simulated: the engine runs at most {MAX_EXECUTORS} workers"}
            continue
        for n, k in splits(cores, row.single_team):
            c = Config(row.name, n, k)
            c.latency_s, _ = p.simulate(row, n, k)
            configs.append(c)
        best = min(configs, key=lambda c: c.latency_s)
        # worker groups: each op on its own group of workers (Strategy 3);
        # teams: per-op counts inside the best split's teams (1 and 2)
        more = ("strategy3",) if row.worker_groups else (
            ("strategy1", "strategy2") if best.threads > 1 else ())
        for strategy in more:
            c = Config(row.name, best.executors, best.threads, strategy)
            c.latency_s, _ = p.simulate(row, best.executors, best.threads, strategy)
            configs.append(c)
        every += configs
        top = min(configs, key=lambda c: c.latency_s)
        out["schedulers"][row.name] = {
            "splits": [c.to_json() for c in configs if c.strategy == "team"],
            "strategies": [c.to_json() for c in configs if c.strategy != "team"],
            "best": top.to_json()}
        if progress:
            progress(f"{cores} cores: {row.name} best {top.label} {top.strategy} "
                     f"{top.latency_s * 1e3:.3f} ms")
    best = min(every, key=lambda c: c.latency_s)
    out["best"] = best.to_json()
    out["op_threads"] = op_thread_summary(p, best)
    return out


def op_thread_summary(p: Predictor, best: Config) -> dict:
    """Per-op thread counts of Strategies 1 and 2 for the best split's team
    size: per op type, how many ops get each count (and every op's count)."""
    limit = best.executors * best.threads if best.scheduler == "corun" else best.threads
    out = {"team_threads": limit}
    for strategy in ("strategy1", "strategy2"):
        counts = p.strategy_threads(strategy, limit, best.scheduler)
        by_type: Dict[str, Dict[int, int]] = {}
        for i, d in enumerate(p.ops):
            t = int(counts[i])
            by_type.setdefault(d.type, {}).setdefault(t, 0)
            by_type[d.type][t] += 1
        out[strategy] = {"by_type": {k: {str(t): n for t, n in sorted(v.items())}
                                     for k, v in sorted(by_type.items())},
                         "ops": {d.name: int(t) for d, t in zip(p.ops, counts)}}
    return out


def plan(p: Predictor, cores: Sequence[int], rows: Sequence,
         progress: Optional[Callable[[str], None]] = None) -> List[dict]:
    return [plan_cores(p, c, rows, progress) for c in cores]


def chart_series(results: List[dict]) -> Dict[str, List[Tuple[int, Optional[float]]]]:
    """scheduler -> [(cores, its best predicted latency)] for the chart."""
    series: Dict[str, List[Tuple[int, Optional[float]]]] = {}
    for r in results:
        for name, s in r["schedulers"].items():
            series.setdefault(name, []).append(
                (r["cores"], s["best"]["latency_s"] if s.get("best") else None))
    return series
