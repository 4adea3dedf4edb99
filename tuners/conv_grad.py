"""The CONV gradients' own knobs, searched per workload and thread count as
conv_local searches the forward CONV template's: conv2d_grad_weight's (im2col
GEMM or Winograd) and, where it is not a forward CONV (a stride other than
1), conv2d_grad_data's im2col ones. A stride-1 data gradient is a forward
CONV and is tuned by conv_local with the template's knobs.

The space is the C op's own declaration (hwtune/grad_conv.h through
hwtune.native.grad_conv: algorithm, channel blocks per thread, im2col tile
columns, Winograd chunk tiles); points that differ only in knobs their
algorithm does not read are one point (the C side's canonical form). Each
trial is the op with those knob attributes, prepared through the engine's op
table and run on a pool team as `hwtune run` runs it, checked once against
the numpy reference (status 'wrong_answer' when it differs), then timed.
Trials go to tuning_trials (tuner "conv-grad-weight" or "conv-grad-data",
subject = workload key) before the next proposal, so a rerun resumes; the
best, re-measured interleaved with the default, is stored in tuned_subjects
per host, ISA and thread count, and a run takes it through choose().
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

# The workloads and their keys are the library's: a run chooses its knobs
# from the rows stored under them (hwtune.engine.conv_knobs.choose_grad).
from hwtune.engine.workloads import (CONFIRM_SEARCH, GRAD_TUNERS, GradConvWorkload,
                                     has_own_knobs)
from hwtune.engine.workloads import grad_workload as workload
from hwtune.measure.stats import median
from hwtune.tuners.context import TuneContext
# As conv_local's (same harness, same reasons): the minimum sample length,
# the cap on a point's first run against the default's, the rounds of the
# final interleaved comparison of the best point with the default.
from hwtune.tuners.conv_local import (CONFIRM_ROUNDS, MIN_SAMPLE_S, MIN_TRIAL_LIMIT_S,
                                      SLOW_FACTOR, TeamPool)
from hwtune.tuners.loop import run_search
from hwtune.tuners.search import OK, ListSearch, Outcome, Params, key_of, make_search

TUNERS = GRAD_TUNERS
TUNER = TUNERS["conv2d_grad_weight"]
DEFAULT_SEARCH = "default"

def workload_groups(graph) -> Dict[str, Tuple[GradConvWorkload, List[str]]]:
    """workload key -> (workload, names of the ops sharing it), for every
    CONV gradient with knobs of its own (has_own_knobs)."""
    groups: Dict[str, Tuple[GradConvWorkload, List[str]]] = {}
    for op in graph.ops:
        if has_own_knobs(graph, op):
            wl = workload(graph, op)
            groups.setdefault(wl.key, (wl, []))[1].append(op.name)
    return groups


def tolerance(wl: GradConvWorkload) -> float:
    """Max abs error vs the float64 reference, inputs in [-1, 1]: an output
    element sums at most `terms` products (the weight gradient N*OH*OW, the
    data gradient OC*KH*KW), float32 accumulation drifting by at most 2 eps
    per term; Winograd's transforms (factors up to 4 on each side) four
    times that."""
    x, w, _, _ = wl.conv()
    if wl.op == "conv2d_grad_weight":
        n, _, oh, ow = wl.in_shapes[1]
        terms = n * oh * ow
    else:
        terms = w[0] * w[2] * w[3]
    return 1e-6 + 8 * float(np.finfo(np.float32).eps) * terms


class GradConvMeasure(TeamPool):
    """measure(params) -> Outcome for one workload at `threads` threads: the
    op with the knobs as attributes on a one-op graph (its inputs graph inputs),
    run on a pool team through hwt_bench_op (hwtune.measure.op), its first
    run checked against the reference. check_hook (tests only) may alter
    the checked output, standing in for a wrong kernel."""

    def __init__(self, wl: GradConvWorkload, *, threads: int, isa: str, reps: int = 5,
                 seed: int = 0, check_hook=None, min_sample_s: float = MIN_SAMPLE_S,
                 pin: bool = False):
        from hwtune.graph.reference import run_reference
        self.wl, self.threads, self.isa, self.reps = wl, int(threads), isa, int(reps)
        self.min_sample_s, self.pin, self.check_hook = float(min_sample_s), bool(pin), check_hook
        rng = np.random.default_rng(seed)
        self.inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in wl.in_shapes]
        g = self._graph({})
        self.ref = run_reference(g, inputs={f"in{i}": a for i, a in enumerate(self.inputs)},
                                 )[g.outputs[0]]
        self.tol = tolerance(wl)
        self.limit_s: Optional[float] = None
        self._pool = None

    def _graph(self, params: Params):
        from hwtune.graph.generators.builder import Builder
        wl = self.wl
        b = Builder("conv-grad-trial")
        ins = [b.input(f"in{i}", s) for i, s in enumerate(wl.in_shapes)]
        b.output(b.op("op", wl.op, ins, **{k: list(v) for k, v in wl.geometry},
                      **{k: int(v) for k, v in params.items()}))
        return b.build()

    def op(self, params: Params, fresh: bool = False):
        """The trial's op prepared on the pool: (OpBench, {"y": output})."""
        g = self._graph(params)
        y = np.empty(self.wl.out_shape, np.float32)
        y.fill(np.nan)  # a share the kernel skips cannot pass the check
        inputs = [a.copy() for a in self.inputs] if fresh else list(self.inputs)
        return self._bench(g, 0, inputs, y)

    def _check(self, side) -> Optional[str]:
        return self._error(side.outputs()["y"], self.ref)


@dataclass
class GradConvChoice:
    workload_key: str
    params: Params
    seconds: float
    default_seconds: float  # NaN if the default failed
    trials: int
    reused: bool
    measured: int = 0


def _confirm(m: GradConvMeasure, points: List[Params]) -> List[List[float]]:
    """Samples of each point, fresh instances, round-robin (conv_local.confirm)."""
    from hwtune.tuners.conv_local import confirm
    return confirm(m, points, rounds=CONFIRM_ROUNDS)


def tune_workload(ctx: TuneContext, wl: GradConvWorkload, *, threads: int, on_trial=None,
                  pin: bool = False, measure: Optional[GradConvMeasure] = None,
                  cut: Optional[int] = None) -> Optional[GradConvChoice]:
    """Reuse the stored result, or search the workload (ctx.search, ctx.trials
    per workload) and store it. None when the deadline passed before the
    default was measured. A search stopped by the deadline, or cut by the
    tuning plan to `cut` trials, keeps its best here but is not stored as
    tuned: the next run resumes it."""
    space = wl.space()
    store = ctx.store(tuner=wl.tuner, subject=wl.key, threads=threads)
    default = wl.default_params()
    done = ctx.db.tuned(ctx.host_key, tuner=wl.tuner, subject=wl.key, isa=ctx.isa,
                        threads=threads)
    if done is not None and space.contains(done["best_params"]) and done["best_s"]:
        d = store.lookup(default)
        return GradConvChoice(wl.key, done["best_params"], done["best_s"],
                                d.seconds if d is not None and d.status == OK else math.nan,
                                done["trials"], True)
    if ctx.out_of_time() and store.lookup(default) is None:
        return None
    m = measure or GradConvMeasure(wl, threads=threads, isa=ctx.isa, reps=ctx.reps,
                                     seed=ctx.seed, pin=pin)
    try:
        run_search(ListSearch([default], name=DEFAULT_SEARCH), m, store)
        d = store.lookup(default)
        if d.status == OK:
            m.limit_s = max(MIN_TRIAL_LIMIT_S, SLOW_FACTOR * d.seconds)
        trials = ctx.trials if ctx.trials is not None else space.size()
        if cut is not None:  # stored trials count toward it, as toward max_trials
            trials = max(1, min(trials, cut))
        s = make_search(ctx.search, space, seed=ctx.seed, max_trials=trials)
        res = run_search(s, m, store, deadline=ctx.deadline, on_trial=on_trial)
        best_params, best_s = res.best_params, res.best_s
        default_s = d.seconds if d.status == OK else math.nan
        points = [p for p in (best_params, default if d.status == OK else None) if p is not None]
        points = list({key_of(p): p for p in points}.values())
        if points and res.stopped != "deadline":
            timed = []
            for p, xs in zip(points, _confirm(m, points)):
                if xs:
                    o = Outcome(OK, median(xs), xs, note="re-measured interleaved with the "
                                                         "default")
                    store.add(p, o, CONFIRM_SEARCH)
                    timed.append((p, o.seconds))
            if timed:
                best_params, best_s = min(timed, key=lambda ps: ps[1])
                default_s = next((t for p, t in timed if key_of(p) == key_of(default)),
                                 default_s)
        if best_s is not None and res.stopped != "deadline" and cut is None:
            ctx.db.put_tuned(ctx.host_key, tuner=wl.tuner, subject=wl.key, isa=ctx.isa,
                             threads=threads, search=ctx.search, best_params=best_params,
                             best_s=best_s, trials=res.trials + 1, run_id=ctx.run_id)
        return GradConvChoice(wl.key, best_params if best_params is not None else default,
                                best_s if best_s is not None else math.nan, default_s,
                                res.trials + 1, False, res.measured)
    finally:
        if measure is None:
            m.close()


def tune_grad_workloads(ctx: TuneContext, graph, *, threads: int, pin: bool = False,
                        progress=None, limits=None) -> Dict[str, GradConvChoice]:
    """Tune every CONV gradient workload with knobs of its own of a validated graph at
    `threads` threads; op name -> its workload's choice. Workloads not
    started before the deadline are left out (their ops keep the default).
    limits(key) -> (trials, seconds, cut) or None: the tuning plan's share
    of one workload, as conv_local.tune_conv_workloads takes it."""
    from hwtune.tuners.conv_local import plan_share
    out: Dict[str, GradConvChoice] = {}
    for key, (wl, names) in workload_groups(graph).items():
        share = plan_share(ctx, limits, key)
        if share is None:
            continue  # the plan gave it nothing: these ops keep their defaults
        choice = tune_workload(share[0], wl, threads=threads, pin=pin, cut=share[1])
        if choice is None:
            continue
        for name in names:
            out[name] = choice
        if progress is not None:
            progress(f"{', '.join(names[:3])}{' ...' if len(names) > 3 else ''} @{threads}t: "
                     f"{choice.seconds * 1e3:.3f} ms tuned vs {choice.default_seconds * 1e3:.3f}"
                     f" ms default ({choice.trials} trials{', reused' if choice.reused else ''})")
    return out
