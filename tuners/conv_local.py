"""CONV template local search (NeoCPU Section 3.3.1), one workload at a time.

A workload is a conv2d's shapes, stride and padding (not its name or model):
results.db keeps one tuned result per workload, host, ISA and thread count,
so a workload tuned once is never measured again, in this model or another.
The search space is the template's own declaration (hwt_conv_knobs through
hwtune.native.conv.knobs); the searches are the registered ones (grid,
optuna, ...) driven by hwtune.tuners.loop.

Each trial plans the NCHW[x]c conv with its params, runs it once on all
threads and checks the output against the C reference (status
'wrong_answer' when it differs), then times it: warm-up, `reps` samples,
median. The layout transforms around the conv are not included: the global
layout search (layout_dp) prices them separately, which is why the result
also lists the best time of each (ic_bn, oc_bn) layout.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from hwtune.db.keys import workload_key
from hwtune.native import conv
from hwtune.native._lib import lib
from hwtune.native.isa import selected_isa
from hwtune.scan.stats import median
from hwtune.tuners.loop import SearchResult, TrialStore, TrialTimeout, measure_once, run_search
from hwtune.tuners.search import OK, WRONG_ANSWER, Outcome, Params, Space, key_of, make_search

TUNER = "conv"
DEFAULT_SEARCH = "default"  # tuning_trials.search of the untuned-params trial

# A sample is at least this long, so the two barrier waits around it (tens
# of us with 2 threads when the machine is idle) stay a few percent of it.
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
CONFIRM_SEARCH = "confirm"  # tuning_trials.search of the re-measured rows
# Budget of a sampling search when none is given. The goal is the
# exhaustive best within 3% using at most 30% of the grid's trials; replaying
# measured grid tables (benchmarks/bench_tuners.py), Optuna found the
# table's minimum with 10% and missed by 14-16% with 5%: 15% keeps a margin.
DEFAULT_BUDGET_FRACTION = 0.15


@dataclass(frozen=True)
class ConvWorkload:
    """A conv2d op's cost-defining shape, in NCHW/OIHW terms."""
    x_shape: Tuple[int, int, int, int]
    w_shape: Tuple[int, int, int, int]
    bias: bool
    stride: Tuple[int, int]
    pad: Tuple[int, int]

    @property
    def key(self) -> str:
        shapes = [self.x_shape, self.w_shape] + ([(self.w_shape[0],)] if self.bias else [])
        return workload_key("conv2d", shapes,
                            {"stride": list(self.stride), "padding": list(self.pad)})

    @property
    def flops(self) -> float:
        n, _, oh, ow = conv.out_shape(self.x_shape, self.w_shape, stride=self.stride,
                                      pad=self.pad)
        k, c, r, s = self.w_shape
        return 2.0 * n * k * oh * ow * c * r * s

    def knobs(self, isa: str) -> Dict[str, list]:
        return conv.knobs(self.x_shape, self.w_shape, stride=self.stride, pad=self.pad,
                          isa=isa)

    def default_params(self, isa: str) -> Params:
        return conv.default_params(self.x_shape, self.w_shape, stride=self.stride,
                                   pad=self.pad, isa=isa)


def conv_workload(graph, op) -> ConvWorkload:
    """The workload of a validated graph's conv2d op (NCHW or NCHWc)."""
    x, w = (tuple(graph.shapes[name]) for name in op.inputs[:2])
    attrs = op.resolved or {}
    if len(x) == 5:  # NCHW[x]c: the same workload as its NCHW original
        x = (x[0], x[1] * x[4], x[2], x[3])
        w = (w[0] * w[5], w[1] * w[4], w[2], w[3])
    stride = tuple(attrs.get("stride", (1, 1)))
    pad = tuple(attrs.get("padding", (0, 0)))
    return ConvWorkload(tuple(int(v) for v in x), tuple(int(v) for v in w),
                        len(op.inputs) == 3, stride, pad)


def tolerance(w_shape) -> float:
    """Max abs error allowed vs the double-accumulating reference: inputs and
    weights in [-1, 1], float32 accumulation of C*R*S products drifts by
    eps * sqrt(terms) typically and 2 * eps * terms at worst (tests/test_conv.py)."""
    _, c, r, s = w_shape
    return 1e-6 + 2 * float(np.finfo(np.float32).eps) * c * r * s


class _Team:
    """`n` threads that run one job at a time: the caller's thread is member
    0, the others are persistent (starting a thread costs ~4 ms under load
    here, more than a small conv trial's whole measurement). ctypes releases
    the GIL around each C call, so the members' C work runs in parallel."""

    def __init__(self, n: int):
        self.n = n
        self._start, self._end = threading.Barrier(n), threading.Barrier(n)
        self._job = None
        self._threads = [threading.Thread(target=self._loop, args=(t,), daemon=True)
                         for t in range(1, n)]
        for t in self._threads:
            t.start()

    def _loop(self, tid: int) -> None:
        try:
            while True:
                self._start.wait()
                fn, args, inner = self._job
                for _ in range(inner):
                    fn(*args[tid])
                self._end.wait()
        except threading.BrokenBarrierError:
            return  # closed, or the caller was interrupted mid-sample

    def sample(self, fn, args, inner: int) -> float:
        """Wall seconds per run of fn(*args[tid]) on every member, over
        `inner` back-to-back runs each."""
        self._job = (fn, args, inner)
        self._start.wait()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(*args[0])
        self._end.wait()
        return (time.perf_counter() - t0) / inner

    def close(self) -> None:
        self._start.abort()
        self._end.abort()
        for t in self._threads:
            t.join()
        self._threads = []


class _Shares:
    """A Conv2dPlan's thread shares with their own workspaces, as in the
    engine (the plan's own run() executes the shares one after another)."""

    def __init__(self, plan: conv.Conv2dPlan, x: np.ndarray, y: np.ndarray, team: _Team):
        p = plan._plan
        self.nth, self._team = plan.nth, team
        f = ctypes.POINTER(ctypes.c_float)
        self._keep = [plan, x, y]
        ws = []
        for _ in range(self.nth):
            raw = np.empty(p.ws_floats + 16, np.float32)
            off = (-raw.ctypes.data % 64) // 4
            self._keep.append(raw)
            ws.append(raw[off:].ctypes.data_as(f) if p.ws_floats else None)
        bias = plan._bias
        self._args = [(ctypes.byref(p), x.ctypes.data_as(f), plan._w.ctypes.data_as(f),
                       None if bias is None else bias.ctypes.data_as(f),
                       y.ctypes.data_as(f), ws[t], t, self.nth) for t in range(self.nth)]

    def seconds(self, inner: int, samples: int) -> List[float]:
        """`samples` wall times per run, each over `inner` runs per thread."""
        return [self._team.sample(lib.hwt_conv_run_part, self._args, inner)
                for _ in range(samples)]


class ConvMeasure:
    """measure(params) -> Outcome for one workload at `threads` threads.

    The data and the reference output are made once per workload. check_hook
    (tests only) may alter the output of the checked run before the check,
    standing in for a wrong kernel.
    """

    def __init__(self, wl: ConvWorkload, *, threads: int, isa: str, reps: int = 5,
                 seed: int = 0, check_hook: Optional[Callable[[np.ndarray], None]] = None,
                 min_sample_s: float = MIN_SAMPLE_S):
        self.wl, self.threads, self.isa, self.reps = wl, int(threads), isa, int(reps)
        self.min_sample_s = float(min_sample_s)
        rng = np.random.default_rng(seed)
        self.x = rng.uniform(-1, 1, wl.x_shape).astype(np.float32)
        self.w = rng.uniform(-1, 1, wl.w_shape).astype(np.float32)
        self.b = rng.uniform(-1, 1, wl.w_shape[0]).astype(np.float32) if wl.bias else None
        self.ref = conv.conv2d_ref(self.x, self.w, self.b, stride=wl.stride, pad=wl.pad)
        self.tol = tolerance(wl.w_shape)
        self.check_hook = check_hook
        self.limit_s: Optional[float] = None  # first-run cap, see SLOW_FACTOR
        self._blocked: Dict[int, np.ndarray] = {}
        self._team: Optional[_Team] = None

    def team(self) -> _Team:
        if self._team is None:
            self._team = _Team(self.threads)
        return self._team

    def close(self) -> None:
        """Ends the measuring threads (they are daemons: also ended at exit)."""
        if self._team is not None:
            self._team.close()
            self._team = None

    def __del__(self):
        team = getattr(self, "_team", None)
        if team is not None:
            team.close()

    def _input(self, ic_bn: int) -> np.ndarray:
        if ic_bn not in self._blocked:
            self._blocked[ic_bn] = conv.to_nchwc(self.x, ic_bn)
        return self._blocked[ic_bn]

    def __call__(self, params: Params) -> Outcome:
        wl = self.wl
        plan = conv.Conv2dPlan(wl.x_shape, self.w, self.b, stride=wl.stride, pad=wl.pad,
                               layout="NCHWc", params=params, isa=self.isa, nth=self.threads)
        y = np.empty(plan.out_shape, np.float32)
        y.fill(np.nan)  # a share the kernel skips cannot pass the check
        shares = _Shares(plan, self._input(plan.params["ic_bn"]), y, self.team())
        first = shares.seconds(1, 1)[0]
        if self.check_hook is not None:
            self.check_hook(y)
        err = float(np.max(np.abs(conv.from_nchwc(y) - self.ref)))
        if not err <= self.tol:  # also catches NaN
            return Outcome(WRONG_ANSWER, note=f"max abs error {err:.3g} vs reference "
                                              f"(tolerance {self.tol:.3g})")
        if self.limit_s is not None and first > self.limit_s:
            raise TrialTimeout(f"first run {first * 1e3:.3g} ms, over the "
                               f"{self.limit_s * 1e3:.3g} ms limit")
        inner = max(1, math.ceil(self.min_sample_s / first))
        # The first sample warms caches and the workspaces' pages: dropped.
        samples = shares.seconds(inner, 1 + self.reps)[1:]
        return Outcome(OK, median(samples), samples)


def confirm(m: ConvMeasure, points: List[Params], rounds: int = CONFIRM_ROUNDS,
            sample_s: Optional[float] = None) -> List[List[float]]:
    """Samples of each (already checked) point, taken round-robin so load
    bursts hit all alike. Every sample uses a fresh plan (fresh weights,
    output and workspace buffers): the same params measured 0.68-1.09 ms
    across ten fresh instances here, so one instance per point would let
    buffer placement decide the comparison."""
    sample_s = m.min_sample_s if sample_s is None else sample_s
    wl = m.wl

    def runner(p):
        plan = conv.Conv2dPlan(wl.x_shape, m.w, m.b, stride=wl.stride, pad=wl.pad,
                               layout="NCHWc", params=p, isa=m.isa, nth=m.threads)
        return _Shares(plan, m._input(plan.params["ic_bn"]),
                       np.empty(plan.out_shape, np.float32), m.team())

    inner: List[int] = []
    samples: List[List[float]] = [[] for _ in points]
    for _ in range(rounds):
        for i, p in enumerate(points):
            r = runner(p)
            warm = r.seconds(1, 1)[0]
            if len(inner) <= i:
                inner.append(max(1, math.ceil(sample_s / warm)))
            samples[i].extend(r.seconds(inner[i], 1))
    return samples


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


def layout_candidates(rows: List[dict], space: Space, top_k: int) -> List[Tuple[Params, float]]:
    """Best ok trial of each distinct (ic_bn, oc_bn), best first, top_k of
    them. When some rows are re-measurements (CONFIRM_SEARCH), only those
    count, so every candidate time comes from the same interleaved runs; a
    point counts with its latest figure."""
    if any(r["search"] == CONFIRM_SEARCH and r["status"] == OK for r in rows):
        rows = [r for r in rows if r["search"] == CONFIRM_SEARCH]
    latest: Dict[Tuple, dict] = {}
    for r in rows:  # oldest first
        latest[key_of(r["params"])] = r
    best: Dict[Tuple[int, int], Tuple[Params, float]] = {}
    for r in latest.values():
        p, s = r["params"], r["median_s"]
        if r["status"] != OK or s is None or not space.contains(p):
            continue
        lay = (p["ic_bn"], p["oc_bn"])
        if lay not in best or s < best[lay][1]:
            best[lay] = (p, s)
    return sorted(best.values(), key=lambda ps: ps[1])[:max(0, int(top_k))]


def _default_trial(store: TrialStore, measure: ConvMeasure, params: Params) -> Outcome:
    got = store.lookup(params)
    if got is None:
        got = measure_once(measure, params, None)
        store.add(params, got, DEFAULT_SEARCH)
    return got


def tune_workload(db, run_id, host_key, wl: ConvWorkload, *, threads: int, isa: str,
                  search: str = "grid", trials: Optional[int] = None,
                  deadline: Optional[float] = None, on_trial=None, top_k: int = 4,
                  seed: int = 0, reps: int = 5, measure: Optional[ConvMeasure] = None
                  ) -> Tuple[Optional[ConvChoice], Optional[SearchResult]]:
    """One workload: reuse the stored result, or search and store it.
    (None, None) when the deadline has passed before anything was measured."""
    space = Space(wl.knobs(isa))
    store = TrialStore(db, run_id, host_key, tuner=TUNER, subject=wl.key, isa=isa,
                       threads=threads)
    default = wl.default_params(isa)
    done = db.tuned(host_key, tuner=TUNER, subject=wl.key, isa=isa, threads=threads)
    if done is not None and space.contains(done["best_params"]) and done["best_s"]:
        d = store.lookup(default)
        return ConvChoice(wl.key, done["best_params"], done["best_s"],
                          d.seconds if d is not None and d.status == OK else math.nan,
                          layout_candidates(store.rows(), space, top_k), done["trials"],
                          True), None

    if deadline is not None and time.monotonic() >= deadline and store.lookup(default) is None:
        return None, None
    m = measure or ConvMeasure(wl, threads=threads, isa=isa, reps=reps, seed=seed)
    try:
        return _search_workload(db, run_id, host_key, wl, store, m, space, default,
                                threads=threads, isa=isa, search=search, trials=trials,
                                deadline=deadline, on_trial=on_trial, top_k=top_k, seed=seed)
    finally:
        if measure is None:
            m.close()


def _search_workload(db, run_id, host_key, wl, store, m, space, default, *, threads, isa,
                     search, trials, deadline, on_trial, top_k, seed):
    d = _default_trial(store, m, default)
    if d.status == OK:
        m.limit_s = max(MIN_TRIAL_LIMIT_S, SLOW_FACTOR * d.seconds)
    if trials is None and search != "grid":
        trials = max(1, math.ceil(DEFAULT_BUDGET_FRACTION * space.size()))
    s = make_search(search, space, seed=seed, max_trials=trials)
    res = run_search(s, m, store, deadline=deadline, on_trial=on_trial)
    confirmed = _confirm_best(store, m, space, default, d.status == OK, top_k)
    best_params, best_s = res.best_params, res.best_s
    if confirmed:
        best_params, best_s = min(confirmed, key=lambda ps: ps[1])
    if d.status == OK:
        d = next((Outcome(OK, t) for p, t in confirmed if key_of(p) == key_of(default)), d)
    if best_s is not None and res.stopped != "deadline":
        db.put_tuned(host_key, tuner=TUNER, subject=wl.key, isa=isa, threads=threads,
                     search=search, best_params=best_params, best_s=best_s,
                     trials=res.trials + 1, run_id=run_id)
    choice = ConvChoice(wl.key, best_params if best_params is not None else default,
                        best_s if best_s is not None else float("nan"),
                        d.seconds if d.status == OK else math.nan,
                        layout_candidates(store.rows(), space, top_k), res.trials + 1, False,
                        res.measured)
    return choice, res


def tune_conv_workloads(db, run_id, host_key, graph, *, threads: int, search: str = "grid",
                        trials: Optional[int] = None, deadline: Optional[float] = None,
                        progress=None, top_k: int = 4, isa: Optional[str] = None,
                        seed: int = 0, reps: int = 5) -> Dict[str, ConvChoice]:
    """Tune every conv2d workload of a validated graph at `threads` threads.

    Returns conv op name -> ConvChoice (ops with the same workload share
    one). A workload whose search stopped at the deadline keeps its best so
    far here but is not stored as tuned: the next run resumes it.
    progress(event: dict), if given, is called after each trial with keys
    workload, ops, trial, budget, params, status, seconds, reused, and once
    per workload with keys workload, ops, done=True, choice. Workloads not
    started before the deadline are left out of the result.
    """
    isa = isa or selected_isa()
    groups: Dict[str, Tuple[ConvWorkload, List[str]]] = {}
    for op in graph.ops:
        if op.op == "conv2d":
            wl = conv_workload(graph, op)
            groups.setdefault(wl.key, (wl, []))[1].append(op.name)
    out: Dict[str, ConvChoice] = {}
    for key, (wl, names) in groups.items():
        count = [0]

        def on_trial(params, outcome, reused, key=key, names=names, count=count):
            count[0] += 1
            if progress is not None:
                progress({"workload": key, "ops": list(names), "trial": count[0],
                          "budget": trials, "params": dict(params), "status": outcome.status,
                          "seconds": outcome.seconds, "reused": reused})

        choice, _ = tune_workload(db, run_id, host_key, wl, threads=threads, isa=isa,
                                  search=search, trials=trials, deadline=deadline,
                                  on_trial=on_trial, top_k=top_k, seed=seed, reps=reps)
        if choice is None:
            continue  # past the deadline: the caller keeps these ops' defaults
        for name in names:
            out[name] = choice
        if progress is not None:
            progress({"workload": key, "ops": list(names), "done": True, "choice": choice})
    return out
