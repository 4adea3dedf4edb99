"""Per-op thread counts by hill climbing (the runtime concurrency control
paper, Section III-C, Strategies 1 and 2).

Each distinct workload (op type + input shapes + attributes, so identical
LSTM cells are measured once and results are shared across models) is run
alone as a one-op graph on the C engine, 1 executor x t threads, pinned.
The climb starts at 1 thread and adds `step` (the paper's interval x) while
the time improves; it stops at the first slowdown or at the team size.
Counts it skipped are predicted by linear interpolation (interpolate.py).

Strategy 1 gives every op its own workload's best count; Strategy 2 gives
every op of one type the count that is best for the type's largest
instance (largest input data), avoiding the cache thrashing and team
re-forming the paper measured when counts change from op to op. Each op
also gets its best few (count, seconds) candidates for the engine's
Strategy-3 'corun' scheduler.

Where cores share an L2, every count is measured twice, threads packed into
shared-L2 groups and spread across them (the paper's "with and without cache
sharing"); the faster placement counts. The climb itself is the 'hillclimb'
search (climb.py) run by the one search driver (loop.run_search). Every
measurement is a tuning trial (tuner 'op-threads', subject the workload
key, params {"threads": t} plus "l2" when placements differ) and an
op_profiles row; each finished climb is a tuned_subjects row, reused
without measuring by later tunings.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from hwtune.errors import HwtuneError, UsageError
from hwtune.engine import runner
from hwtune.measure import FixedSampling, clock, interleave
from hwtune.measure import output_check as checks
from hwtune.measure.engine import OpEventSide, output_check
from hwtune.measure.stats import mad
from hwtune.planner.opdata import folded_ops  # folded at prepare: never measured
from hwtune.tuners.climb import HillClimb
from hwtune.tuners.context import TuneContext
from hwtune.tuners.interpolate import aggregate, predict_all, prediction_accuracy
from hwtune.tuners.loop import run_search
from hwtune.tuners.search import ERROR, OK, ListSearch, Outcome, Space

TUNER = "op-threads"
# Ops faster than this on 1 thread keep the team size. The engine runs ops
# estimated below 2 us inline because a dispatch costs 0.66 us against 0.10
# inline (HWT_EXEC_TINY_S, engine/exec/levels.c); a second thread saves such
# an op less than that: lstm_small's 1.3 us mul and add took 1.0-1.1 us on
# 2 threads, while its 5-7 us element-wise ops gained 2-3 us (medians of 7
# measure_op calls, spread of the medians <= 0.1 us, this 2-core box).
MIN_OP_S = 2e-6
# Strategy 3's candidate count: "three is an empirical number" (the paper).
CANDIDATES = 3
# Samples per measured count: at least MIN_REPS, then until MIN_SAMPLE_S of
# op time is collected or MAX_REPS. Measured under the shared box's usual
# load (load average ~11 on 2 cores; 7 engines x 41 samples per op): the
# median of the first 5 samples was off the median of 41 by a median 28% for
# a 12 ms lstm_medium matmul and 12% for a 4 us tanh, of the first 9 by 12%
# and 2%, of the first 15 by 3.2% and 0.2%.
MIN_REPS, MAX_REPS, MIN_SAMPLE_S = 15, 41, 0.05
# Untimed runs before the samples: the first forms the pool's team and
# faults in the buffers; what transient is left, the median of MIN_REPS or
# more samples absorbs (see above).
WARMUP = 2


# -- the climb ---------------------------------------------------------------

@dataclass
class ClimbResult:
    best_threads: int
    best_s: float
    measured: Dict[int, float]  # every count the climb ran, in order


def _thread_space(max_threads: int) -> Space:
    return Space({"threads": list(range(1, max_threads + 1))})


def climb(measure: Callable[[int], float], max_threads: int, step: int = 1) -> ClimbResult:
    """The climb on a plain function: measure(t) -> seconds (None, inf or
    NaN: failed). Starts at 1 thread, adds `step` while the time decreases,
    stops at the first increase or failure or at max_threads (the last step
    shortened to land on it). The 'hillclimb' search, driven by run_search."""
    if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
        raise UsageError(f"max_threads must be an integer >= 1, got {max_threads!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise UsageError(f"invalid step (interval) {step!r}: must be an integer >= 1")

    def as_outcome(p) -> Outcome:
        s = measure(p["threads"])
        if s is None or not math.isfinite(s) or not s > 0:
            return Outcome(ERROR, note=f"measurement failed ({s!r})")
        return Outcome(OK, float(s))

    search = HillClimb(_thread_space(max_threads), step=step)
    res = run_search(search, as_outcome)
    if res.best_params is None:
        raise HwtuneError("hill climbing: the 1-thread measurement failed")
    measured = {p["threads"]: o.seconds for p, o in search.history if o.status == OK}
    return ClimbResult(res.best_params["threads"], res.best_s, measured)


def exhaustive(measure: Callable[[int], float], max_threads: int) -> Dict[int, float]:
    """Every count 1..max_threads: the baseline the climb is judged against."""
    return {t: float(measure(t)) for t in range(1, max_threads + 1)}


# -- one op alone --------------------------------------------------------------

def one_op_graph(graph, op):
    """A validated graph holding only `op`: its param inputs stay params with
    the same init (same values: streams are keyed by name), every other input
    becomes a graph input."""
    from hwtune.graph.generators.builder import Builder

    params = {t.name: t for t in graph.params}
    inputs = {t.name: t for t in graph.inputs}
    b = Builder(f"{graph.name}:{op.name}", seed=graph.seed)
    for name in dict.fromkeys(op.inputs):
        shape = graph.shapes[name]
        if name in params:
            b.param(name, shape, **params[name].init)
        elif name in inputs:
            b.input(name, shape, **inputs[name].init)
        else:
            b.input(name, shape)
    b.op(op.name, op.op, op.inputs, None if op.outputs == [op.name] else op.outputs,
         **op.attrs)
    b.output(*op.outputs)
    return b.build()


class _Affinity:
    """Restrict this thread (and the pool threads it creates, which pin
    inside the allowed set) to `cpus`; restore on exit."""

    def __init__(self, cpus: Optional[Sequence[int]]):
        self.cpus, self.saved = cpus, None

    def __enter__(self):
        if self.cpus:
            self.saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(self.cpus))
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            os.sched_setaffinity(0, self.saved)


def measure_op(one_graph, threads: int, *, cpus: Optional[Sequence[int]] = None,
               reference=None) -> Outcome:
    """Median duration of the graph's only op at `threads` threads (engine
    profiling events: the op's own time, not the run's dispatch), pinned to
    `cpus` when given. reference: the op's expected outputs, checked after
    the warm-up ('wrong_answer' otherwise)."""
    from hwtune.engine.instance import NativeEngine

    with _Affinity(cpus):
        try:
            e = NativeEngine(one_graph, executors=1, threads=threads, scheduler="sequential",
                             pin=True)
        except HwtuneError as exc:
            return Outcome(ERROR, note=str(exc))
        try:
            m = interleave([OpEventSide(e)], _op_sampling(), warmup=WARMUP,
                           check=output_check(reference, one_graph.outputs))[0]
        finally:
            e.close()
    return Outcome.of(m)


def _op_sampling() -> FixedSampling:
    return FixedSampling(MIN_REPS, min_total_s=MIN_SAMPLE_S, max_reps=MAX_REPS)


def op_timer(graph, op_name: str, *, cpus: Optional[Sequence[int]] = None
             ) -> Callable[[int], Optional[float]]:
    """threads -> median seconds of one op of graph run alone (None when the
    measurement fails): the measure climb() and exhaustive() take, for
    benchmarks comparing the two on real ops."""
    from hwtune.graph import run_reference
    op = next((o for o in graph.ops if o.name == op_name), None)
    if op is None:
        raise UsageError(f"no op named {op_name!r} in {graph.name}")
    one = one_op_graph(graph, op)
    ref = run_reference(one)

    def timer(threads: int) -> Optional[float]:
        o = measure_op(one, threads, cpus=cpus, reference=ref)
        return o.seconds if o.status == OK else None
    return timer


def l2_placements(threads: int, cpus: Sequence[int], topo: Optional[dict] = None
                  ) -> Dict[str, Optional[List[int]]]:
    """CPU sets to measure `threads` threads on: {"shared": packed into
    shared-L2 groups, "private": one per L2 group first} where some L2 is
    shared by several of `cpus`, else {"any": None} (the engine's own
    placement)."""
    if topo is None:
        from hwtune.machine.topology import topology
        topo = topology()
    l2 = (topo.get("caches") or {}).get("L2") or {}
    groups = [[c for c in g["cpus"] if c in cpus] for g in (l2.get("groups") or [])]
    groups = [g for g in groups if g]
    if not any(len(g) > 1 for g in groups) or threads > len(cpus):
        return {"any": None}
    packed = [c for g in groups for c in g][:threads]
    spread: List[int] = []
    depth = 0
    while len(spread) < threads and depth < max(len(g) for g in groups):
        spread += [g[depth] for g in groups if depth < len(g)]
        depth += 1
    spread = spread[:threads]
    if threads == 1 or sorted(packed) == sorted(spread):
        return {"any": packed}
    return {"shared": packed, "private": spread}


def shares_l2(cpus: Sequence[int], topo: Optional[dict] = None) -> bool:
    """Whether two of `cpus` share an L2 cache."""
    return len(cpus) > 1 and "any" not in l2_placements(2, cpus, topo)


# -- over a graph ------------------------------------------------------------

@dataclass
class GroupResult:
    workload_key: str
    op_type: str
    ops: List[str]
    input_elements: int          # "input data size" for Strategy 2
    flops: int
    measured: Dict[int, float] = field(default_factory=dict)   # climb (and accuracy) points
    placement: Dict[int, str] = field(default_factory=dict)    # count -> fastest placement
    best_threads: Optional[int] = None
    best_s: Optional[float] = None
    reused: bool = False
    status: str = "pending"  # tuned|reused|small|folded|failed|partial|cut|pending
    note: Optional[str] = None
    accuracy: Optional[dict] = None


@dataclass
class HillClimbResult:
    op_threads: Dict[str, int]
    candidates: Dict[str, List[Tuple[int, float]]]
    groups: List[GroupResult]
    accuracy: Optional[dict]
    strategy: int = 1
    stopped: str = "done"
    notes: List[str] = field(default_factory=list)
    measured: int = 0            # counts measured in this call
    reused: int = 0              # groups answered from results.db


def group_ops(graph) -> List[GroupResult]:
    """Ops grouped by workload key, heaviest group (FLOPs x instances,
    then input size) first so a budget cut leaves the light ones."""
    from hwtune.engine.runner import workload_keys
    from hwtune.graph import ops as oplib
    from hwtune.graph.info import op_flops

    groups: Dict[str, GroupResult] = {}
    for op, wk in zip(graph.ops, workload_keys(graph)):
        g = groups.get(wk)
        if g is None:
            g = groups[wk] = GroupResult(
                wk, op.op, [], sum(oplib.numel(graph.shapes[n]) for n in op.inputs),
                op_flops(graph, op))
        g.ops.append(op.name)
    return sorted(groups.values(), key=lambda g: (-g.flops * len(g.ops),
                                                  -g.input_elements * len(g.ops),
                                                  g.workload_key))


def choose_op_threads(groups: Sequence[GroupResult], team_threads: int, strategy: int
                      ) -> Dict[str, int]:
    """op name -> threads: Strategy 1 per workload, Strategy 2 per op type
    from its largest instance (input elements, then FLOPs); ops without a
    result, or too small to matter, keep the team size."""
    if strategy not in (1, 2):
        raise UsageError(f"invalid strategy {strategy!r}: 1 (per op) or 2 (per op type)")
    out = {name: team_threads for g in groups for name in g.ops}
    if strategy == 1:
        for g in groups:
            if g.best_threads is not None and g.status in ("tuned", "reused"):
                out.update({name: g.best_threads for name in g.ops})
        return out
    by_type: Dict[str, List[GroupResult]] = {}
    for g in groups:
        by_type.setdefault(g.op_type, []).append(g)
    for members in by_type.values():
        largest = max(members, key=lambda g: (g.input_elements, g.flops))
        if largest.best_threads is None or largest.status not in ("tuned", "reused"):
            continue
        for g in members:
            out.update({name: largest.best_threads for name in g.ops})
    return out


def op_candidates(g: GroupResult, team_threads: int, k: int = CANDIDATES
                  ) -> List[Tuple[int, float]]:
    """The k fastest counts of a workload, measured or interpolated, best first."""
    if not g.measured:
        return []
    pts = predict_all(g.measured, range(1, team_threads + 1))
    return sorted(pts.items(), key=lambda kv: (kv[1], kv[0]))[:k]


def _trial_params(threads: int, placement: str) -> Dict[str, Any]:
    return {"threads": threads} if placement == "any" else {"threads": threads, "l2": placement}


def thread_space(team_threads: int, cpus: Sequence[int]) -> Space:
    """The climb's space: thread counts 1..team_threads, and where cores
    share an L2 the placements l2_placements() gives each count."""
    placements = {t: l2_placements(t, cpus) for t in range(1, team_threads + 1)}
    if all(list(pl) == ["any"] for pl in placements.values()):
        return _thread_space(team_threads)
    return Space({"threads": list(placements), "l2": ["any", "shared", "private"]},
                 valid=lambda p: p["l2"] in placements[p["threads"]])


def _stored(params: Dict[str, Any]) -> Dict[str, Any]:
    """The trial params results.db keeps ({"threads": t} when one placement)."""
    return _trial_params(params["threads"], params.get("l2", "any"))


class _OpMeasure:
    """measure(params) for the climb of one workload: its one-op graph at
    params' thread count and placement, checked against the reference
    (computed on the first measurement: a climb answered from results.db
    needs none)."""

    def __init__(self, one, cpus: Sequence[int], check: str):
        self.one, self.cpus, self.check = one, list(cpus), check
        self._ref: Optional[Dict[str, Any]] = None

    def __call__(self, params) -> Outcome:
        t = params["threads"]
        if self.check != "none" and self._ref is None:
            self._ref = runner.reference_outputs(self.one, self.check)
        pin = l2_placements(t, self.cpus)[params.get("l2", "any")]
        return measure_op(self.one, t, cpus=pin, reference=self._ref)


def _climb_group(ctx: TuneContext, g: GroupResult, one, team_threads: int, step: int,
                 min_op_s: float, check_accuracy: bool) -> Tuple[str, int]:
    """Climb one workload (search 'hillclimb' through run_search), filling
    g; returns (how the driver stopped, trials measured)."""
    space = thread_space(team_threads, ctx.cpus)
    store = ctx.store(tuner=TUNER, subject=g.workload_key, threads=None, encode=_stored)
    measure = _OpMeasure(one, ctx.cpus, ctx.check)

    def profile(params, o: Outcome, reused: bool) -> None:
        if o.status == OK and not reused:
            ctx.db.add_op_profile(ctx.host_key, g.workload_key, g.op_type,
                                  threads=params["threads"], executors=1, median_s=o.seconds,
                                  mad_s=mad(o.samples) if o.samples else None, n=len(o.samples))
        if o.status != OK and g.note is None:
            g.note = f"{params['threads']} thread(s): {o.status}: {o.note}"

    search = HillClimb(space, along="threads", step=step, floor_s=min_op_s)
    res = run_search(search, measure, store, deadline=ctx.deadline, on_trial=profile)
    fresh = res.measured
    for p, o in search.history:
        t = p["threads"]
        if o.status == OK and (t not in g.measured or o.seconds < g.measured[t]):
            g.measured[t], g.placement[t] = o.seconds, p.get("l2", "any")
    if res.stopped == "deadline":
        # Not stored as tuned: a rerun finishes this climb from the stored
        # trials. Until then the op keeps the team size.
        g.status, g.note = "partial", "budget ran out during this climb"
        return "deadline", fresh
    if search.ended == "failed" and not g.measured:
        g.status = "failed"
        return "done", fresh
    if search.ended == "floor":
        g.status = "small"
        g.note = (f"{g.measured[1] * 1e6:.1f} us on 1 thread, below min_op_s "
                  f"{min_op_s * 1e6:.0f} us: keeps the team size")
        return "done", fresh
    if check_accuracy:
        # Table V: also measure the counts the climb skipped (inside its
        # range), through the same driver and store; the interpolation
        # points stay the climb's own samples.
        sampled = sorted(g.measured)
        skipped = ListSearch([p for p in space.points()
                              if p["threads"] <= max(sampled) and p["threads"] not in sampled],
                             name="hillclimb")
        extra = run_search(skipped, measure, store, deadline=ctx.deadline, on_trial=profile)
        fresh += extra.measured
        exact = dict(g.measured)
        for p, o in skipped.history:
            t = p["threads"]
            if o.status == OK and (t not in exact or o.seconds < exact[t]):
                exact[t] = o.seconds
        g.accuracy = prediction_accuracy(exact, sampled)
        if extra.stopped == "deadline":
            g.status, g.note = "partial", "budget ran out during this climb"
            return "deadline", fresh
    g.best_threads, g.best_s, g.status = res.best_params["threads"], res.best_s, "tuned"
    return "done", fresh


def _reuse(ctx: TuneContext, g: GroupResult, tuned: dict, team_threads: int) -> None:
    """A workload climbed before on this host: its result and every stored
    count (for the corun candidates), nothing measured."""
    g.best_threads = int(tuned["best_params"]["threads"])
    g.best_s, g.reused, g.status = tuned["best_s"], True, "reused"
    for t in range(1, team_threads + 1):
        for pl in l2_placements(t, ctx.cpus):
            row = ctx.db.trial(ctx.host_key, tuner=TUNER, subject=g.workload_key,
                               isa=ctx.isa, threads=t, params=_trial_params(t, pl))
            if row and row["status"] == OK and (t not in g.measured
                                                or row["median_s"] < g.measured[t]):
                g.measured[t], g.placement[t] = row["median_s"], pl


def tune_op_threads(ctx: TuneContext, graph, *, team_threads: int, step: int = 1,
                    min_op_s: float = MIN_OP_S, check_accuracy: Optional[bool] = None,
                    limits=None) -> HillClimbResult:
    """Hill-climb every workload of graph (validated) up to team_threads,
    on ctx.cpus, choosing per op by ctx.strategy. check_accuracy (default:
    when step > 1) also measures the counts the climb skipped and reports
    Table V's prediction accuracy. ctx.check: what each measured count's
    outputs must match, 'peer' (a 1-thread engine run: catches thread-split
    bugs; kernels' own tests hold them to numpy), 'numpy' (the numpy
    reference: 0.1-3 s per inception_small CONV here, a third of that
    model's climbing time) or 'none'. limits(workload key) -> seconds or
    None: the tuning plan's share of one workload (0: left as 'cut'; its
    climb stops at its own deadline and is resumed by a later run)."""
    if isinstance(team_threads, bool) or not isinstance(team_threads, int) or team_threads < 1:
        raise UsageError(f"team_threads must be an integer >= 1, got {team_threads!r}")
    choose_op_threads([], team_threads, ctx.strategy)  # validates strategy early
    if ctx.check not in checks.CHECKS:
        raise UsageError(f"invalid check {ctx.check!r}: choose one of "
                         f"{', '.join(checks.CHECKS)}")
    if check_accuracy is None:
        check_accuracy = step > 1
    say = ctx.say("hillclimb")
    if team_threads > len(ctx.cpus):
        raise UsageError(f"team_threads {team_threads} exceeds the {len(ctx.cpus)} usable CPUs")
    notes = []
    if not shares_l2(ctx.cpus):
        notes.append("no L2 cache is shared between these CPUs: each count measured with "
                     "one placement (no with/without cache-sharing pair)")
    say(notes[-1] if notes else "cores share an L2: measuring each count packed and spread")
    groups = group_ops(graph)
    by_name = {op.name: op for op in graph.ops}
    folded = folded_ops(graph)
    stopped, measured_n, reused_n = "done", 0, 0

    for gi, g in enumerate(groups):
        if all(name in folded for name in g.ops):
            g.status, g.note = "folded", "computed once at prepare (constant inputs)"
            continue
        tuned = ctx.db.tuned(ctx.host_key, tuner=TUNER, subject=g.workload_key, isa=ctx.isa,
                             threads=team_threads)
        if tuned is not None:
            _reuse(ctx, g, tuned, team_threads)
            reused_n += 1
            continue
        if ctx.out_of_time():
            stopped = "deadline"
            break
        say(f"hillclimb {gi + 1}/{len(groups)}: {g.op_type} x{len(g.ops)} ({g.workload_key})")
        try:
            one = one_op_graph(graph, by_name[next(n for n in g.ops if n not in folded)])
        except HwtuneError as exc:
            g.status, g.note = "failed", f"cannot run this op alone: {exc}"
            continue
        seconds = limits(g.workload_key) if limits is not None else None
        if seconds is not None and seconds <= 0:
            g.status, g.note = "cut", "the tuning plan gave it no time"
            stopped = "plan"
            continue
        gctx = ctx if seconds is None else ctx.with_(
            deadline=min(ctx.deadline or math.inf, clock.deadline_after(seconds)))
        how, fresh = _climb_group(gctx, g, one, team_threads, step, min_op_s, check_accuracy)
        measured_n += fresh
        if how == "deadline":
            stopped = "deadline"
            if ctx.out_of_time():
                break
            continue  # only this workload's share ran out: the next one gets its own
        if g.status == "tuned":
            ctx.db.put_tuned(ctx.host_key, tuner=TUNER, subject=g.workload_key, isa=ctx.isa,
                             threads=team_threads, search=f"hillclimb-x{step}",
                             best_params={"threads": g.best_threads}, best_s=g.best_s,
                             trials=fresh, run_id=ctx.run_id)

    op_threads = choose_op_threads(groups, team_threads, ctx.strategy)
    candidates: Dict[str, List[Tuple[int, float]]] = {}
    for g in groups:
        cands = op_candidates(g, team_threads)
        if cands:
            candidates.update({name: cands for name in g.ops})
    scored = [g.accuracy for g in groups if g.accuracy is not None]
    accuracy = dict(aggregate(scored), interval=step) if scored else None
    return HillClimbResult(op_threads=op_threads, candidates=candidates, groups=groups,
                           accuracy=accuracy, strategy=ctx.strategy, stopped=stopped,
                           notes=notes, measured=measured_n, reused=reused_n)
