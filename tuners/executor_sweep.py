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
'executor-sweep', subject the graph hash); a rerun reuses stored trials
through hwtune.tuners.loop, so an interrupted sweep resumes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from hwtune.engine.config import EngineConfig
from hwtune.errors import HwtuneError, UsageError
from hwtune.tuners.search import ERROR, OK, TIMEOUT, WRONG_ANSWER, Outcome, Search, Space

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


class ListSearch(Search):
    """Proposes a fixed list of params in order: the sweep enumerates, it
    does not search (not registered: it has no space of its own)."""

    name = "enumerate"

    def __init__(self, points: Sequence[Dict[str, Any]]):
        knobs: Dict[str, List[Any]] = {}
        for p in points:
            for k, v in p.items():
                if v not in knobs.setdefault(k, []):
                    knobs[k].append(v)
        super().__init__(Space(knobs or {"executors": [1]}))
        self._points = [dict(p) for p in points]

    def propose(self) -> Optional[Dict[str, Any]]:
        for p in self._points:
            if not self.seen(p):
                return p
        return None


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


CHECKS = ("peer", "numpy", "none")


def _reference_outputs(graph, check: str = "peer"):
    """What every candidate's outputs must match. 'numpy': the numpy
    reference (hwtune run --check's oracle; 45 s for inception_small and 18 s
    for lstm_medium on this shared box, too slow for every sweep). 'peer':
    one sequential 1-thread engine run, so a scheduler that races or skips
    an op shows as a mismatch while kernel correctness stays the kernels'
    own tests' job."""
    if check == "numpy":
        from hwtune.graph import run_reference
        return run_reference(graph)
    from hwtune.engine.runner import open_engine
    e = open_engine(graph, EngineConfig(executors=1, threads=1, scheduler="sequential"))
    try:
        e.run()
        return e.outputs()
    finally:
        e.close()


def output_mismatch(got, want) -> Optional[str]:
    """None when got is within the engine's --check tolerance (relative to
    max |want|) of want, NaN matching NaN; else a one-line reason."""
    import numpy as np
    from hwtune.engine.runner import CHECK_TOL
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    both_nan = np.isnan(got) & np.isnan(want)
    diff = np.where(both_nan, 0.0, np.nan_to_num(np.abs(got - want), nan=np.inf))
    scale = float(np.nan_to_num(np.abs(want)).max(initial=0)) or 1.0
    err = float(diff.max(initial=0))
    if err <= CHECK_TOL * scale:
        return None
    return f"max |engine - reference| = {err:.3g} > {CHECK_TOL:g} x {scale:.3g}"


def _wrong_output(outputs, ref, graph) -> Optional[str]:
    for name in graph.outputs:
        bad = output_mismatch(outputs[name], ref[name])
        if bad:
            return f"output {name!r}: {bad}"
    return None


def _open(graph, cfg: EngineConfig, op_cost: Optional[Dict[str, float]]):
    """runner.open_engine, plus corun's per-op candidates when cfg has them."""
    from hwtune.engine.runner import open_engine
    cands = getattr(cfg, "op_candidates", None)
    return open_engine(graph, cfg, op_cost, **({"op_candidates": cands} if cands else {}))


def _measure_interleaved(graph, configs: List[EngineConfig], reps: int, deadline,
                         op_cost: Callable[[EngineConfig], Optional[Dict[str, float]]],
                         check: str, progress) -> Dict[int, Outcome]:
    """Outcome per index of configs: engines prepared side by side, checked
    once against the reference, then `reps` round-robin samples (fewer when
    the deadline passes, at least one)."""
    from hwtune.scan.runner import settle
    from hwtune.scan.stats import median

    out: Dict[int, Outcome] = {}
    engines: Dict[int, Any] = {}
    ref = _reference_outputs(graph, check) if check != "none" else None
    try:
        for i, cfg in enumerate(configs):
            try:
                e = _open(graph, cfg, op_cost(cfg))
                for _ in range(WARMUP):
                    e.run()
            except HwtuneError as exc:
                out[i] = Outcome(ERROR, note=str(exc))
                continue
            wrong = _wrong_output(e.outputs(), ref, graph) if ref is not None else None
            if wrong:
                out[i] = Outcome(WRONG_ANSWER, note=wrong)
                e.close()
                continue
            engines[i] = e
        samples: Dict[int, List[float]] = {i: [] for i in engines}
        settle()
        for r in range(reps):
            if r > 0 and deadline is not None and time.monotonic() >= deadline:
                break
            if progress:
                progress(f"sweep: interleaved sample {r + 1}/{reps} of {len(engines)} configs")
            for i, e in engines.items():
                if i not in samples:
                    continue
                t0 = time.perf_counter()
                try:
                    e.run()
                except HwtuneError as exc:
                    out[i] = Outcome(ERROR, note=str(exc))
                    del samples[i]
                    continue
                samples[i].append(time.perf_counter() - t0)
        for i, xs in samples.items():
            out[i] = Outcome(OK, seconds=median(xs), samples=xs,
                             note=None if len(xs) == reps else
                             f"{len(xs)} of {reps} samples (deadline)")
    finally:
        for e in engines.values():
            e.close()
    return out


def sweep(db, run_id, host_key: str, graph, graph_hash: str, *, cpus: Sequence[int],
          reps: int = 5, deadline: Optional[float] = None,
          progress: Optional[Callable[[str], None]] = None, isa: Optional[str] = None,
          extra: Optional[List[EngineConfig]] = None, prune: bool = True,
          check: str = "peer") -> SweepResult:
    """Measure every candidate's makespan on graph (validated), interleaved,
    and pick the fastest. prune caps executors at graph width + 1; extra
    configs are measured beside the candidates; check ('peer', 'numpy' or
    'none', see _reference_outputs) compares each candidate's outputs once
    (a mismatch is stored as 'wrong_answer'). A deadline (time.monotonic())
    cuts the samples and the remaining candidates; stored trials are
    reused, not re-measured. progress(message) reports each round."""
    from hwtune.engine.config import usable_cpu_count
    from hwtune.engine.runner import profiled_costs
    from hwtune.native.isa import selected_isa
    from hwtune.tuners.loop import TrialStore, run_search

    _pos("reps", reps)
    if check not in CHECKS:
        raise UsageError(f"invalid check {check!r}: choose one of {', '.join(CHECKS)}")
    usable = min(usable_cpu_count(list(cpus)), len(cpus))
    width = graph_width(graph) if prune else None
    configs = candidate_configs(usable, width=width)
    for cfg in extra or []:
        cfg.validate(cpus, [op.name for op in graph.ops])
        if cfg not in configs:
            configs.append(cfg)
    params = [config_params(c) for c in configs]
    keys = [repr(sorted(p.items())) for p in params]
    if len(set(keys)) != len(keys):
        raise UsageError("two sweep configs have the same executors/threads/scheduler but "
                         "differ otherwise: give extra configs distinct settings")
    by_key = dict(zip(keys, range(len(configs))))
    isa_name = isa or selected_isa()
    store = TrialStore(db, run_id, host_key, tuner=TUNER, subject=graph_hash, isa=isa_name,
                       threads=usable)

    pending = [i for i, p in enumerate(params) if store.lookup(p) is None]
    batch: Dict[int, Outcome] = {}

    def costs(cfg: EngineConfig):
        if getattr(cfg, "op_cost", None):
            return dict(cfg.op_cost)
        return profiled_costs(db, host_key, graph, cfg) if cfg.scheduler != "sequential" \
            else None

    def measure(p: Dict[str, Any]) -> Outcome:
        i = by_key[repr(sorted(p.items()))]
        if i not in batch:
            # The first new candidate measures all pending ones together so
            # their samples interleave; the loop then stores them one by one.
            todo = [j for j in pending if j not in batch]
            got = _measure_interleaved(graph, [configs[j] for j in todo], reps, deadline,
                                       costs, check, progress)
            for slot, j in enumerate(todo):
                batch[j] = got.get(slot, Outcome(TIMEOUT, note="not measured before the "
                                                               "deadline"))
        return batch[i]

    result = run_search(ListSearch(params), measure, store, deadline=deadline)
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
    stopped = getattr(result, "stopped", "done")
    if not ok and all(st == "skipped" for _, _, st in rows):
        # The budget ran out before anything was measured: the default
        # (1 executor x all CPUs) stands, unmeasured.
        return SweepResult(best=configs[0], best_s=None, rows=rows, measured=0,
                           reused=0, stopped=stopped, width=width)
    if not ok:
        raise HwtuneError(f"executor sweep of {graph.name}: no configuration ran "
                          f"({'; '.join(f'{c.executors}x{c.threads}: {st}' for c, _, st in rows)})")
    best_s, best_i = min(ok)
    return SweepResult(best=configs[best_i], best_s=best_s, rows=rows,
                       measured=getattr(result, "measured", len(pending)),
                       reused=getattr(result, "reused", len(params) - len(pending)),
                       stopped=stopped, width=width,
                       samples=samples)


def profile_op_costs(graph, cfg: EngineConfig, *, runs: int = PROFILE_RUNS,
                     warmup: int = WARMUP, db=None, host_key: Optional[str] = None,
                     config_id: Optional[int] = None) -> Dict[str, float]:
    """Per-op median seconds over `runs` profiled runs under cfg (Graphi's
    profiler after the sweep): the op costs the critical-path levels use.
    With db and host_key the per-workload medians are also stored as
    op_profiles rows (what hwtune run's critical-path levels look up)."""
    from hwtune.engine.runner import store_op_profiles
    from hwtune.engine.trace import OpEvent
    from hwtune.scan.stats import median

    _pos("runs", runs)
    e = _open(graph, cfg, dict(getattr(cfg, "op_cost", None) or {}) or None)
    history: List[List[OpEvent]] = []
    try:
        for _ in range(warmup):
            e.run()
        for _ in range(runs):
            e.run(profile=True)
            history.append([OpEvent(graph.ops[ev.op].name, graph.ops[ev.op].op, ev.executor,
                                    ev.threads, ev.start_s, ev.end_s) for ev in e.events()])
    finally:
        e.close()
    if db is not None and host_key is not None:
        store_op_profiles(db, host_key, graph, cfg, history, config_id)
    durations: Dict[str, List[float]] = {}
    for events in history:
        for ev in events:
            durations.setdefault(ev.op_name, []).append(ev.end_s - ev.start_s)
    return {name: median(xs) for name, xs in durations.items()}
