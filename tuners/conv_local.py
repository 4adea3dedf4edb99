"""CONV template local search (NeoCPU Section 3.3.1), one workload at a time.

A workload is a conv2d's shapes, stride and padding (not its name or model):
results.db keeps one tuned result per workload, host, ISA and thread count,
so a workload tuned once is never measured again, in this model or another.
The search space is the template's own declaration (hwt_conv_knobs through
hwtune.native.conv.knobs); the searches are the registered ones (grid,
optuna, ...) driven by hwtune.tuners.loop.

Each trial is the conv op the layout pass emits for its params (NCHW[x]c,
knobs as attributes), prepared through the engine's op table and run on a
pool team as `hwtune run` runs it (ConvMeasure); it runs once, is checked
against the C reference (status 'wrong_answer' when it differs), then timed:
`reps` samples after a warm-up one, median. The layout transforms around the
conv are not included: the global layout search (layout_dp) prices them
separately, which is why the result also lists the best time of each
(ic_bn, oc_bn) layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

# The workloads, their keys and layout_candidates are the library's: a run
# chooses its knobs from the rows stored under them (hwtune.engine.conv_knobs).
from hwtune.engine.conv_knobs import layout_candidates
from hwtune.engine.workloads import (CONFIRM_SEARCH, CONV_TUNER, ConvWorkload,
                                     channels_last_point, conv_workload, tuned_op)
from hwtune.measure import FixedSampling, clock, interleave
from hwtune.measure.op import OpSide
from hwtune.measure.stats import median
from hwtune.native import conv
from hwtune.tuners.context import TuneContext
from hwtune.tuners.loop import SearchResult, TrialStore, run_search
from hwtune.tuners.seeded import SeededSearch, peer_seeds
from hwtune.tuners.search import (OK, ListSearch, Outcome, Params, Space, key_of,
                                  make_search)

TUNER = CONV_TUNER
DEFAULT_SEARCH = "default"  # tuning_trials.search of the untuned-params trial

# A sample is at least this long (runs of a short conv are timed together):
# chosen when each sample was bracketed by two barrier waits of tens of us;
# with the C timing loop that cost is gone, and the value stays so that
# trials measure what they measured (bench_tuners' grid tables).
MIN_SAMPLE_S = 0.002
# A point whose checked first run is this many times slower than the
# default params cannot win; it is stopped there and stored as 'timeout'.
# Measured on the ResNet-18 3x3 layers (64x56x56, 512x7x7; 1 and 2 threads):
# ic_bn = oc_bn = 1 ran 19-32x slower than the default, while the grid
# winners in benchmarks/bench_tuners.py ran 1-4x faster than it.
SLOW_FACTOR = 10.0
# ... but never below this, so a tiny conv's noisy first run is not cut.
MIN_TRIAL_LIMIT_S = 0.05
# After the search, the best point of each of the top_k layouts and the
# default are measured again, interleaved (CONFIRM_ROUNDS samples each,
# round-robin), and the choice is made on those figures: with ~1000 noisy
# medians the search's minimum is often a point that got lucky (on this
# shared machine the grid's top 8 on a 1x1 conv were within run-to-run noise
# of each other); the default vs tuned figures and the layout DP's candidate
# times then compare like with like.
CONFIRM_ROUNDS = 7
# Layouts whose best points are confirmed (and offered to the layout DP).
TOP_K = 4
# Budget of a sampling search when none is given. The goal is the
# exhaustive best within 3% using at most 30% of the grid's trials; replaying
# measured grid tables (benchmarks/bench_tuners.py), Optuna found the
# table's minimum with 10% and missed by 14-16% with 5%: 15% keeps a margin.
DEFAULT_BUDGET_FRACTION = 0.15


def tolerance(w_shape) -> float:
    """Max abs error allowed vs the double-accumulating reference: inputs and
    weights in [-1, 1], float32 accumulation of C*R*S products drifts by
    eps * sqrt(terms) typically and 2 * eps * terms at worst (tests/test_conv.py)."""
    _, c, r, s = w_shape
    return 1e-6 + 2 * float(np.finfo(np.float32).eps) * c * r * s


class TeamPool:
    """The one pool of `threads` threads a workload's trials run on, made
    at the first trial (ConvMeasure, conv_grad.GradConvMeasure: subclasses
    set threads, pin and _pool = None)."""

    threads: int
    pin: bool
    _pool = None

    def pool(self):
        if self._pool is None:
            from hwtune.native.threads import Pool, allowed_cpus
            # As the engine: more threads than CPUs run unpinned.
            pin = self.pin and self.threads <= len(allowed_cpus())
            self._pool = Pool(executors=1, threads=self.threads, pin=pin)
        return self._pool

    def close(self) -> None:
        """Ends the measuring pool's threads."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def _bench(self, g, op_index: int, inputs, y: np.ndarray):
        """Op op_index of the one-op graph g prepared on the pool over
        inputs, writing y: (OpBench, {"y": y}), as subclasses' op() returns."""
        from hwtune.engine.lower import lower_graph
        from hwtune.native.isa import resolve_isa
        from hwtune.native.op_bench import OpBench
        ng = lower_graph(g)
        try:
            bench = OpBench(self.pool(), self.threads, ng, op_index, inputs, [y],
                            isa=resolve_isa(self.isa))
        except BaseException:
            ng.close()
            raise
        return bench, {"y": y}

    def _error(self, y: np.ndarray, ref: np.ndarray,
                view: Callable[[np.ndarray], np.ndarray] = lambda y: y) -> Optional[str]:
        """Why the checked run's output y (after check_hook), as view shows
        it in ref's layout, misses the reference ref; None when it does not."""
        if self.check_hook is not None:
            self.check_hook(y)
        err = float(np.max(np.abs(view(y) - ref)))
        if not err <= self.tol:  # also catches NaN
            return f"max abs error {err:.3g} vs reference (tolerance {self.tol:.3g})"
        return None

    def __call__(self, params: Params) -> Outcome:
        """One trial: the op of `params` (subclasses' op()), checked by
        their _check on its first run, then timed."""
        side = OpSide(lambda: self.op(params), sample_s=self.min_sample_s)
        try:
            m = interleave([side], FixedSampling(self.reps, rounds=1), warmup=1,
                           check=self._check, limit_s=self.limit_s, raise_errors=True)[0]
        finally:
            side.close()
        return Outcome.of(m)


class ConvMeasure(TeamPool):
    """measure(params) -> Outcome for one workload at `threads` threads, on
    the engine's own pool and kernels: each trial's conv is the op the
    layout pass emits for those params (NCHW[x]c, knobs as attributes),
    prepared through the engine's op table and run as fork-joins of a team
    of `threads` (hwtune.measure.op: hwt_bench_op). The team is one pool
    kept for every trial of the workload, pinned when the config that will
    run it is (`pin`; the default config's sequential team is not: under
    load a pinned team waits for its busiest CPU, 24 vs 15 ms per trial of
    a ResNet 1x1 conv measured here at load ~6); the data and the
    reference output are made once.

    check_hook (tests only) may alter the output of the checked run before
    the check, standing in for a wrong kernel.
    """

    def __init__(self, wl: ConvWorkload, *, threads: int, isa: str, reps: int = 5,
                 seed: int = 0, check_hook: Optional[Callable[[np.ndarray], None]] = None,
                 min_sample_s: float = MIN_SAMPLE_S, pin: bool = False):
        self.wl, self.threads, self.isa, self.reps = wl, int(threads), isa, int(reps)
        self.min_sample_s, self.pin = float(min_sample_s), bool(pin)
        rng = np.random.default_rng(seed)
        self.x = rng.uniform(-1, 1, wl.x_shape).astype(np.float32)
        self.w = rng.uniform(-1, 1, wl.w_shape).astype(np.float32)
        self.b = rng.uniform(-1, 1, wl.w_shape[0]).astype(np.float32) if wl.bias else None
        self.ref = conv.conv2d_ref(self.x, self.w, self.b, **wl.geometry)
        self.tol = tolerance(wl.w_shape)
        self.check_hook = check_hook
        self.limit_s: Optional[float] = None  # first-run cap, see SLOW_FACTOR
        self._graph = _one_conv_graph(wl)
        self._blocked: Dict[int, np.ndarray] = {}
        self._weights: Dict[Tuple[int, int], np.ndarray] = {}
        self._pool = None

    def _input(self, ic_bn: int) -> np.ndarray:
        if ic_bn not in self._blocked:
            self._blocked[ic_bn] = conv.to_nchwc(self.x, ic_bn)
        return self._blocked[ic_bn]

    def _weights_for(self, ic_bn: int, oc_bn: int, fresh: bool) -> np.ndarray:
        if fresh:
            return conv.to_blocked_weights(self.w, ic_bn, oc_bn)
        key = (ic_bn, oc_bn)
        if key not in self._weights:
            # The last layout only: a 512x512 3x3 layer's weights are 9 MB.
            self._weights = {key: conv.to_blocked_weights(self.w, ic_bn, oc_bn)}
        return self._weights[key]

    def op(self, params: Params, fresh: bool = False):
        """The trial's conv prepared on the pool: (OpBench, {"y": output}).
        fresh: new weight, output and workspace buffers (see confirm())."""
        from hwtune.graph.passes.layout import apply_op_params

        if self.wl.per_run_weights:  # as the training step runs it (see ConvWorkload)
            params = dict(params, layout="NCHW")
        g = apply_op_params(self._graph, {"conv": dict(params)})
        i = next(k for k, o in enumerate(g.ops) if o.name == "conv")
        y = np.empty(tuple(g.shapes[g.ops[i].outputs[0]]), np.float32)
        y.fill(np.nan)  # a share the kernel skips cannot pass the check
        if params.get("layout") == "NCHW":  # NCHW tensors (conv_nchw's candidates)
            inputs = [self.x, self.w.copy() if fresh else self.w]
        else:
            ib, ob = int(params["ic_bn"]), int(params["oc_bn"])
            inputs = [self._input(ib), self._weights_for(ib, ob, fresh)]
        if self.b is not None:
            inputs.append(self.b)
        return self._bench(g, i, inputs, y)

    def _check(self, side) -> Optional[str]:
        return self._error(side.outputs()["y"], self.ref,
                           lambda y: conv.from_nchwc(y) if y.ndim == 5 else y)


def _one_conv_graph(wl: ConvWorkload):
    """The workload as a one-op NCHW model (x an input, weights and bias
    params), for the layout pass to rewrite per trial."""
    from hwtune.graph.generators.builder import Builder
    b = Builder("conv-trial")
    x = b.input("x", wl.x_shape)
    w = b.input("w", wl.w_shape) if wl.per_run_weights else b.param("w", wl.w_shape)
    ins = [x, w] + ([b.param("b", (wl.w_shape[0],))] if wl.bias else [])
    geo = {"stride": list(wl.stride), "padding": list(wl.pad)}
    if tuple(wl.dilation) != (1, 1):
        geo["dilation"] = list(wl.dilation)
    if wl.pad_end is not None:
        geo["padding_end"] = list(wl.pad_end)
    b.output(b.op("conv", "conv2d", ins, **geo))
    return b.build()


def confirm(m: ConvMeasure, points: List[Params], rounds: int = CONFIRM_ROUNDS,
            sample_s: Optional[float] = None) -> List[List[float]]:
    """Samples of each (already checked) point, taken round-robin so load
    bursts hit all alike. Every sample uses a fresh instance (fresh weights,
    output and workspace buffers): the same params measured 0.68-1.09 ms
    across ten fresh instances here, so one instance per point would let
    buffer placement decide the comparison. A point that fails has no
    samples."""
    sample_s = m.min_sample_s if sample_s is None else sample_s
    sides = [OpSide(lambda p=p: m.op(p, fresh=True), sample_s=sample_s, fresh=True)
             for p in points]
    try:
        got = interleave(sides, FixedSampling(rounds), warmup=1)
    finally:
        for s in sides:
            s.close()
    return [x.samples if x.status == OK else [] for x in got]


def _confirm_best(store: TrialStore, m: ConvMeasure, space: Space, default: Params,
                  default_ok: bool, top_k: int) -> List[Tuple[Params, float]]:
    """Re-measure the best point of each of the top_k layouts (the layout
    DP's candidates) and the default; store the samples (the latest row of
    a point is what later lookups and layout_candidates use)."""
    points = [p for p, _ in layout_candidates(store.rows(), space, max(1, top_k))]
    if default_ok and key_of(default) not in {key_of(q) for q in points}:
        points.append(default)
    out = []
    for p, xs in zip(points, confirm(m, points) if points else []):
        if not xs:
            continue
        o = Outcome(OK, median(xs), xs, note="re-measured interleaved with the best")
        store.add(p, o, CONFIRM_SEARCH)
        out.append((p, o.seconds))
    return out


@dataclass
class ConvChoice:
    workload_key: str
    params: Params
    seconds: float
    default_seconds: float  # NaN if the default params failed (or a reused result lacks them)
    candidates: List[Tuple[Params, float]]  # best per (ic_bn, oc_bn) layout, best first
    trials: int
    reused: bool
    measured: int = 0  # trials measured in this call (the rest came from results.db)


def _default_trial(store: TrialStore, measure: ConvMeasure, params: Params) -> Outcome:
    """The untuned params' trial (search 'default'), measured once per
    workload through the driver like any proposal."""
    run_search(ListSearch([params], name=DEFAULT_SEARCH), measure, store)
    return store.lookup(params)


def tune_workload(ctx: TuneContext, wl: ConvWorkload, *, threads: int, on_trial=None,
                  top_k: int = TOP_K, measure: Optional[ConvMeasure] = None, pin: bool = False,
                  cut: Optional[int] = None
                  ) -> Tuple[Optional[ConvChoice], Optional[SearchResult]]:
    """One workload: reuse the stored result, or search it (ctx.search,
    ctx.trials per workload, ctx.reps samples per trial) and store it.
    (None, None) when the deadline has passed before anything was measured.
    pin: whether the team that will run it is pinned (the measuring pool is
    made the same). cut: the tuning plan gave it only this many trials; its
    best so far is used but not stored as tuned (a rerun resumes it)."""
    space = wl.space(ctx.isa)
    store = ctx.store(tuner=TUNER, subject=wl.key, threads=threads)
    default = wl.default_params(ctx.isa)
    done = ctx.db.tuned(ctx.host_key, tuner=TUNER, subject=wl.key, isa=ctx.isa, threads=threads)
    if done is not None and space.contains(done["best_params"]) and done["best_s"]:
        d = store.lookup(default)
        return ConvChoice(wl.key, done["best_params"], done["best_s"],
                          d.seconds if d is not None and d.status == OK else math.nan,
                          layout_candidates(store.rows(), space, top_k), done["trials"],
                          True), None

    if ctx.out_of_time() and store.lookup(default) is None:
        return None, None
    m = measure or ConvMeasure(wl, threads=threads, isa=ctx.isa, reps=ctx.reps, seed=ctx.seed,
                               pin=pin)
    try:
        return _search_workload(ctx, wl, store, m, space, default, threads=threads,
                                on_trial=on_trial, top_k=top_k, cut=cut)
    finally:
        if measure is None:
            m.close()


def planned_trials(ctx: TuneContext, space: Space) -> int:
    """Search trials of one workload without a budget (the default trial
    and the confirmation rounds come on top)."""
    if ctx.trials is not None:
        return ctx.trials
    if ctx.search == "grid":
        return space.size()
    return max(1, math.ceil(DEFAULT_BUDGET_FRACTION * space.size()))


# tuning_trials.search of the channels-last point's trial.
CHANNELS_LAST_SEARCH = "channels-last"


def _search_workload(ctx: TuneContext, wl, store, m, space, default, *, threads, on_trial,
                     top_k, cut=None):
    d = _default_trial(store, m, default)
    if d.status == OK:
        m.limit_s = max(MIN_TRIAL_LIMIT_S, SLOW_FACTOR * d.seconds)
    trials = planned_trials(ctx, space)
    if cut is not None:
        # Trials already stored count toward the cut, as they count toward
        # the search's own max_trials when it resumes.
        trials = max(1, min(trials, cut))
    shared = {}
    if ctx.storage is not None:
        from hwtune.tuners.shared_study import study_name
        shared = dict(storage=ctx.storage,
                      study_name=study_name(TUNER, wl.key, ctx.isa, threads))
    s = make_search(ctx.search, space, seed=ctx.seed, max_trials=trials, **shared)
    seeds = peer_seeds(ctx.db, ctx.host_key, tuner=TUNER, subject=wl.key, isa=ctx.isa,
                       threads=threads, space=space)
    if seeds:
        ctx.progress("conv", f"{wl.key}: {len(seeds)} tuned point(s) of similar hosts "
                             "measured first")
        s = SeededSearch(s, seeds)
    last = channels_last_point(wl, default, space)
    if last is not None and key_of(last) != key_of(default):  # the default is measured
        s = SeededSearch(s, [last], seed_name=CHANNELS_LAST_SEARCH)
    res = run_search(s, m, store, deadline=ctx.deadline, on_trial=on_trial)
    confirmed = _confirm_best(store, m, space, default, d.status == OK, top_k)
    best_params, best_s = res.best_params, res.best_s
    if confirmed:
        best_params, best_s = min(confirmed, key=lambda ps: ps[1])
    if d.status == OK:
        d = next((Outcome(OK, t) for p, t in confirmed if key_of(p) == key_of(default)), d)
    if best_s is not None and res.stopped != "deadline" and cut is None:
        ctx.db.put_tuned(ctx.host_key, tuner=TUNER, subject=wl.key, isa=ctx.isa,
                         threads=threads, search=ctx.search, best_params=best_params,
                         best_s=best_s, trials=res.trials + 1, run_id=ctx.run_id)
    choice = ConvChoice(wl.key, best_params if best_params is not None else default,
                        best_s if best_s is not None else float("nan"),
                        d.seconds if d.status == OK else math.nan,
                        layout_candidates(store.rows(), space, top_k), res.trials + 1, False,
                        res.measured)
    return choice, res


def workload_groups(graph) -> Dict[str, Tuple[ConvWorkload, List[str]]]:
    """workload key -> (workload, names of the conv ops that share it)."""
    groups: Dict[str, Tuple[ConvWorkload, List[str]]] = {}
    for op in graph.ops:
        if tuned_op(graph, op):
            wl = conv_workload(graph, op)
            groups.setdefault(wl.key, (wl, []))[1].append(op.name)
    return groups


def plan_share(ctx: TuneContext, limits, key: str):
    """(the context a workload's search runs in, its trial cut or None) by
    the tuning plan's limits(key) -> (trials, seconds, cut) or None (no
    limit); None when the plan gave it no trial."""
    got = limits(key) if limits is not None else None
    if got is None:
        return ctx, None
    trials, seconds, is_cut = got
    if trials <= 0:
        return None
    return (ctx.with_(deadline=min(ctx.deadline or math.inf, clock.deadline_after(seconds))),
            trials if is_cut else None)


def tune_conv_workloads(ctx: TuneContext, graph, *, threads: int, top_k: int = TOP_K,
                        events=None, pin: bool = False, limits=None) -> Dict[str, ConvChoice]:
    """Tune every conv2d workload of a validated graph at `threads` threads.

    Returns conv op name -> ConvChoice (ops with the same workload share
    one). A workload whose search stopped at the deadline keeps its best so
    far here but is not stored as tuned: the next run resumes it.
    events(event: dict), if given, is called after each trial with keys
    workload, ops, trial, budget, params, status, seconds, reused, and once
    per workload with keys workload, ops, done=True, choice. Workloads not
    started before the deadline are left out of the result.
    limits(key) -> (trials, seconds, cut) or None: the tuning plan's share
    of one workload (0 trials: left out, as past the deadline; seconds: its
    search's own deadline, inside ctx's; cut: fewer trials than a full
    search).
    """
    groups = workload_groups(graph)
    out: Dict[str, ConvChoice] = {}
    outer = ctx
    for key, (wl, names) in groups.items():
        share = plan_share(outer, limits, key)
        if share is None:
            continue  # the plan gave it nothing: these ops keep their defaults
        ctx, cut = share
        count = [0]

        def on_trial(params, outcome, reused, key=key, names=names, count=count):
            count[0] += 1
            if events is not None:
                events({"workload": key, "ops": list(names), "trial": count[0],
                        "budget": ctx.trials, "params": dict(params), "status": outcome.status,
                        "seconds": outcome.seconds, "reused": reused})

        choice, _ = tune_workload(ctx, wl, threads=threads, on_trial=on_trial, top_k=top_k,
                                  pin=pin, cut=cut)
        if choice is None:
            continue  # past the deadline: the caller keeps these ops' defaults
        for name in names:
            out[name] = choice
        if events is not None:
            events({"workload": key, "ops": list(names), "done": True, "choice": choice})
    return out
