"""Graphi's profiler (Section 4.2): how many executors, how many threads each.

Candidates are symmetric teams, every executor count k with the largest team
t = n // k that fits, kept only when no larger k fits with the same t (7
CPUs: 1x7, 2x3, 3x2, 7x1; 4x1 is dropped because 7x1 fits too). That covers
every factorization of n and the non-power-of-two splits Graphi tried (6x10
on 60 cores; 3x20 rather than 3x10, which leaves half of them idle).

Pruning by width: the best executor count tracks the parallel ops per layer
(Graphi, Figure 6: 6 executors for PathNet's 6 modules, 2-3 for GoogleNet's
2-3 branches). With width w (most ops sharing one ASAP level) at most w ops
are ready at once within a level, plus one more when a short branch lets an
op of the next level start while a long one still runs: executors beyond
w + 1 would never have work, so k is capped at w + 1.

Each candidate's makespan is sampled round-robin with the others (a burst of
background load hits all alike) and stored as one trial (tuner
'executor-sweep', subject the graph hash). The sweep is a fixed list of
proposals (ListSearch) run by the one search driver (hwtune.tuners.loop),
which hands every unstored candidate to the measure at once so their samples
interleave; a rerun reuses stored trials, so an interrupted sweep resumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from hwtune.engine import runner
from hwtune.engine.config import EngineConfig
from hwtune.errors import HwtuneError, UsageError
from hwtune.measure import FixedSampling, Measurement, settle
from hwtune.measure import output_check as checks
from hwtune.measure.engine import measure_engines
from hwtune.tuners.context import TuneContext
from hwtune.tuners.search import OK, ListSearch, Outcome

TUNER = "executor-sweep"
# Untimed runs per candidate before its first sample (the first faults in
# the arena and forms the teams). On lstm_small the first three runs were
# 0.6-1.6x the median of the next 15 (3 engines per config, load average ~11
# on this 2-core box): load noise hides any warm-up effect beyond that, and
# the interleaved median absorbs what is left.
WARMUP = 2
# Per-op medians behind the critical-path levels: 5 profiled runs were
# within ~10% of 21 on lstm_small here (the value hwtune run --trace uses).
PROFILE_RUNS = 5


def _pos(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def candidates(n_cpus: int, *, width: Optional[int] = None) -> List[Tuple[int, int]]:
    """(executors, threads per executor) pairs for n_cpus, executors
    ascending; width caps executors at width + 1 (see the module doc)."""
    n = _pos("n_cpus", n_cpus)
    k_max = n if width is None else min(n, _pos("width", width) + 1)
    out = []
    for k in range(1, k_max + 1):
        t = n // k
        if k == k_max or (k + 1) * t > n:
            out.append((k, t))
    return out


def scheduler_for(executors: int) -> str:
    return "sequential" if executors == 1 else "critical-path"


def candidate_configs(n_cpus: int, *, width: Optional[int] = None) -> List[EngineConfig]:
    return [EngineConfig(executors=k, threads=t, scheduler=scheduler_for(k))
            for k, t in candidates(n_cpus, width=width)]


def pin_variants(configs: List[EngineConfig]) -> List[EngineConfig]:
    """Each config whose scheduler can pin, with the other pinning: the
    tuner measures both so that the stored config's pin is a measured
    choice, not the scheduler's default (issue #12)."""
    return [replace(c, pin=not c.pinned) for c in configs if c.sched.can_pin]


def graph_width(graph) -> int:
    """Most ops sharing one ASAP depth level (hwtune model info's width)."""
    from hwtune.graph.info import graph_info
    return max(1, graph_info(graph).width)


def config_params(cfg: EngineConfig) -> Dict[str, Any]:
    """The trial params of a config: executors, threads and scheduler, plus
    whatever else an extra config sets (so it is not confused with the
    plain candidate of the same shape)."""
    p: Dict[str, Any] = {"executors": cfg.executors, "threads": cfg.threads,
                         "scheduler": cfg.scheduler}
    if cfg.pin is not None and cfg.pin != EngineConfig(scheduler=cfg.scheduler).pinned:
        p["pin"] = bool(cfg.pin)
    for name in ("op_threads", "op_params", "op_priority", "op_cost", "op_candidates"):
        value = getattr(cfg, name, None)
        if value:
            p[name] = value
    return p


@dataclass
class SweepResult:
    best: EngineConfig
    best_s: Optional[float]      # None: nothing measured before the deadline
    rows: List[Tuple[EngineConfig, Optional[float], str]]
    measured: int = 0
    reused: int = 0
    stopped: str = "done"
    width: Optional[int] = None
    samples: Dict[int, List[float]] = field(default_factory=dict)  # row index -> seconds


def _open(graph, cfg: EngineConfig, op_cost: Optional[Dict[str, float]]):
    """runner.open_engine, plus corun's per-op candidates when cfg has them."""
    from hwtune.engine.runner import open_engine
    cands = getattr(cfg, "op_candidates", None)
    return open_engine(graph, cfg, op_cost, **({"op_candidates": cands} if cands else {}))


class _SweepMeasure:
    """The sweep's measure: batch(params) times every given config on the
    graph interleaved (measure.engine.measure_engines: opened side by side,
    warmed up, checked against the reference once, then round-robin
    samples, fewer when the deadline passes)."""

    def __init__(self, ctx: TuneContext, graph, configs: Dict[str, EngineConfig], costs):
        self.ctx, self.graph, self.configs, self.costs = ctx, graph, configs, costs

    def __call__(self, params) -> Outcome:
        return self.batch([params])[0]

    def batch(self, params_list) -> List[Outcome]:
        cfgs = [self.configs[_key(p)] for p in params_list]
        return [Outcome.of(m) for m in _measure_interleaved(
            self.graph, cfgs, self.ctx.reps, self.ctx.deadline, self.costs, self.ctx.check,
            self.ctx.say("sweep"))]


def _measure_interleaved(graph, configs: List[EngineConfig], reps: int, deadline,
                         op_cost: Callable[[EngineConfig], Optional[Dict[str, float]]],
                         check: str, say) -> List[Measurement]:
    """One Measurement per config, sampled interleaved."""
    ref = runner.reference_outputs(graph, check) if check != "none" else None

    def on_round(r, n):
        say(f"sweep: interleaved sample {n}/{reps} of {len(configs)} configs")

    return measure_engines([lambda c=c: _open(graph, c, op_cost(c)) for c in configs],
                           FixedSampling(reps), warmup=WARMUP, reference=ref,
                           outputs=graph.outputs, deadline=deadline, settle=settle,
                           on_round=on_round)


def _key(params: Dict[str, Any]) -> str:
    return repr(sorted(params.items()))


def sweep(ctx: TuneContext, graph, graph_hash: str, *,
          extra: Optional[List[EngineConfig]] = None, prune: bool = True) -> SweepResult:
    """Measure every candidate's makespan on graph (validated), interleaved,
    and pick the fastest. prune caps executors at graph width + 1; extra
    configs are measured beside the candidates; ctx.check ('peer', 'numpy'
    or 'none', see hwtune.engine.runner.reference_outputs) compares each
    candidate's outputs once (a mismatch is stored as 'wrong_answer').
    ctx.deadline cuts the samples and the remaining candidates; stored
    trials are reused, not re-measured. ctx.reps samples per candidate."""
    from hwtune.engine.config import usable_cpu_count
    from hwtune.engine.runner import profiled_costs
    from hwtune.tuners.loop import run_search

    _pos("reps", ctx.reps)
    if ctx.check not in checks.CHECKS:
        raise UsageError(f"invalid check {ctx.check!r}: choose one of "
                         f"{', '.join(checks.CHECKS)}")
    cpus = ctx.cpus
    usable = min(usable_cpu_count(list(cpus)), len(cpus))
    width = graph_width(graph) if prune else None
    configs = candidate_configs(usable, width=width)
    for cfg in extra or []:
        cfg.validate(cpus, [op.name for op in graph.ops])
        if cfg not in configs:
            configs.append(cfg)
    params = [config_params(c) for c in configs]
    keys = [_key(p) for p in params]
    if len(set(keys)) != len(keys):
        raise UsageError("two sweep configs have the same executors/threads/scheduler but "
                         "differ otherwise: give extra configs distinct settings")
    store = ctx.store(tuner=TUNER, subject=graph_hash, threads=usable)

    def costs(cfg: EngineConfig):
        if getattr(cfg, "op_cost", None):
            return dict(cfg.op_cost)
        return profiled_costs(ctx.db, ctx.host_key, graph, cfg) \
            if cfg.scheduler != "sequential" else None

    measure = _SweepMeasure(ctx, graph, dict(zip(keys, configs)), costs)
    result = run_search(ListSearch(params), measure, store, deadline=ctx.deadline)
    rows: List[Tuple[EngineConfig, Optional[float], str]] = []
    samples: Dict[int, List[float]] = {}
    for i, p in enumerate(params):
        o = store.lookup(p)
        if o is None:
            rows.append((configs[i], None, "skipped"))
            continue
        rows.append((configs[i], o.seconds if o.status == OK else None, o.status))
        if o.samples:
            samples[i] = list(o.samples)
    ok = [(s, i) for i, (_, s, st) in enumerate(rows) if st == OK and s is not None]
    if not ok and all(st == "skipped" for _, _, st in rows):
        # The budget ran out before anything was measured: the default
        # (1 executor x all CPUs) stands, unmeasured.
        return SweepResult(best=configs[0], best_s=None, rows=rows, measured=0,
                           reused=0, stopped=result.stopped, width=width)
    if not ok:
        raise HwtuneError(f"executor sweep of {graph.name}: no configuration ran "
                          f"({'; '.join(f'{c.executors}x{c.threads}: {st}' for c, _, st in rows)})")
    best_s, best_i = min(ok)
    return SweepResult(best=configs[best_i], best_s=best_s, rows=rows,
                       measured=result.measured, reused=result.reused,
                       stopped=result.stopped, width=width, samples=samples)


def profile_op_costs(graph, cfg: EngineConfig, *, runs: int = PROFILE_RUNS,
                     warmup: int = WARMUP, db=None, host_key: Optional[str] = None,
                     config_id: Optional[int] = None) -> Dict[str, float]:
    """Per-op median seconds over `runs` profiled runs under cfg (Graphi's
    profiler after the sweep): the op costs the critical-path levels use.
    With db and host_key the per-workload medians are also stored as
    op_profiles rows (what hwtune run's critical-path levels look up)."""
    from hwtune.engine.runner import store_op_profiles
    from hwtune.engine.trace import op_medians, profiled_runs

    _pos("runs", runs)
    e = _open(graph, cfg, dict(getattr(cfg, "op_cost", None) or {}) or None)
    try:
        history = profiled_runs(e, graph, runs, warmup)
    finally:
        e.close()
    if db is not None and host_key is not None:
        store_op_profiles(db, host_key, graph, cfg, history, config_id)
    return op_medians(history)
