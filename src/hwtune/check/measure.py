"""Measure a suite: every figure in interleaved rounds, each chunk of samples
right after a chunk of the reference kernel.

Interleaving matters more than sample count on a shared machine: a build
that starts on the neighbouring core halfway through the run must slow every
figure a little, not one figure a lot (which would read as a regression of
that figure). The reference chunk measured just before each figure chunk is
what relative mode divides by.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from hwtune.check.suite import Figure, Suite, reference_for
from hwtune.errors import HwtuneError, NativeError, UsageError
from hwtune.measure import OK, FixedSampling, interleave, settle, stats
from hwtune.measure.engine import EngineSide
from hwtune.measure.policy import split
from hwtune.measure.sides import CallSide, LoopSide, SampleSide, Side

# Calibration samples per kernel before the run: the median of 3 single calls
# is within ~20% of the steady call time here, close enough to size `inner`.
CALIBRATE = 3

ProgressFn = Callable[[int, int, str], None]


@dataclass
class FigureResult:
    """Raw samples of one figure in one run. samples are in `unit` (seconds
    per call, or a rate for throughput probes); ref[i] is the median of the
    reference chunk measured right before sample i's chunk (seconds)."""
    name: str
    kind: str
    params: Dict[str, Any]
    unit: str
    higher_is_better: bool
    samples: List[float] = field(default_factory=list)
    ref: List[float] = field(default_factory=list)
    error: Optional[str] = None

    def costs(self, relative: bool = False) -> List[float]:
        """Larger-is-worse values: seconds, or 1/rate; divided by the
        adjacent reference time in relative mode."""
        out = []
        for i, v in enumerate(self.samples):
            c = (1.0 / v if v > 0 else float("inf")) if self.higher_is_better else v
            if relative:
                r = self.ref[i] if i < len(self.ref) else 0.0
                c = c / r if r > 0 else float("inf")
            out.append(c)
        return out

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "params": self.params, "unit": self.unit,
                "higher_is_better": self.higher_is_better, "samples": self.samples,
                "ref": self.ref, "error": self.error}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FigureResult":
        return cls(name=str(d["name"]), kind=str(d["kind"]), params=dict(d.get("params") or {}),
                   unit=str(d.get("unit", "s")), higher_is_better=bool(d["higher_is_better"]),
                   samples=[float(x) for x in d["samples"]],
                   ref=[float(x) for x in d.get("ref") or []], error=d.get("error"))


def best_of(xs: List[float], m: int, pick) -> List[float]:
    """Each run of m consecutive values reduced to its best (min time, max
    rate). Other users' load only ever adds time, so the best of a few short
    runs is the kernel's own speed more often than one long run is: on the
    loaded 2-core box the median of 15 samples of one 10 ms run each moved
    from 0.31 to 0.80 ms between runs of the same GEMM, while its fastest
    ~1/3 of calls stayed within 0.30-0.31 ms."""
    return [pick(xs[i:i + m]) for i in range(0, len(xs) - m + 1, m)]


class _BestOf(Side):
    """A figure's runner: each sample is the best of suite.best_of samples
    of the side underneath (min time, or max rate)."""

    def __init__(self, side: Side, suite: Suite, pick, inner: Optional[int]):
        self.side, self.best_of, self.pick, self.inner = side, suite.best_of, pick, inner

    def take(self, k: int) -> List[float]:
        return best_of(self.side.take(k * self.best_of), self.best_of, self.pick)

    def close(self) -> None:
        self.side.close()


def _kernel(fig: Figure, pool, suite: Suite, inner: Optional[int]) -> _BestOf:
    """A gemm or element-wise figure on the shared pool (C-timed loop)."""
    from hwtune.native import bench
    p = fig.params
    if fig.kind == "gemm":
        def loop(w, r, k):
            return bench.gemm_samples(pool, p["threads"], p["M"], p["K"], p["N"], isa=suite.isa,
                                      warmup=w, reps=r, inner=k)
    else:
        def loop(w, r, k):
            return bench.eltwise_samples(pool, p["threads"], p["op"], p["n"], isa=suite.isa,
                                         warmup=w, reps=r, inner=k)
    side = LoopSide(loop, sample_s=None if inner else suite.sample_seconds / suite.best_of,
                    inner=inner or 1, take_warmup=suite.warmup, calibrate=CALIBRATE)
    if inner is None:
        side.warm(suite.warmup)
    return _BestOf(side, suite, min, side.inner)


def _numpy_ref(fig: Figure, suite: Suite, inner: Optional[int]) -> _BestOf:
    """numpy's BLAS GEMM (threads limited with threadpoolctl) or a numpy
    element-wise op: reference kernels outside hwtune's code."""
    import numpy as np
    from threadpoolctl import threadpool_limits
    p = fig.params
    rng = np.random.default_rng(0)
    if fig.kind == "blas_gemm":
        a = rng.standard_normal((p["M"], p["K"]), dtype=np.float32)
        b = rng.standard_normal((p["K"], p["N"]), dtype=np.float32)
        c = np.empty((p["M"], p["N"]), dtype=np.float32)
        call = lambda: np.matmul(a, b, out=c)  # noqa: E731
    else:
        a = rng.standard_normal(p["n"], dtype=np.float32)
        b = rng.standard_normal(p["n"], dtype=np.float32)
        c = np.empty(p["n"], dtype=np.float32)
        fn = np.multiply if p["op"] == "mul" else np.add
        call = lambda: fn(a, b, out=c)  # noqa: E731
    threads = p.get("threads", 1)
    side = CallSide(call, sample_s=None if inner else suite.sample_seconds / suite.best_of,
                    calls=inner or 1, calibrate=CALIBRATE, prime=True,
                    around=lambda: threadpool_limits(limits=threads, user_api="blas"))
    side.warm(max(1, suite.warmup))
    return _BestOf(side, suite, min, side.calls)


def _probe(fig: Figure, pool, suite: Suite) -> _BestOf:
    """Throughput probes (FMA peak, triad): each sample is one timed slice."""
    from hwtune.native import bench
    p = fig.params
    secs = suite.sample_seconds / suite.best_of
    if fig.kind == "fma_peak":
        def one():
            return bench.fma_peak(pool, p["threads"], isa=suite.isa, seconds=secs)
    else:
        def one():
            return bench.triad(pool, p["threads"], p["n"], isa=suite.isa, seconds=secs)
    one()  # clocks up, pages touched
    return _BestOf(SampleSide(lambda k: [one() for _ in range(k)]), suite, max, None)


def _model(fig: Figure, suite: Suite, db, host_key: Optional[str]):
    """A model on the engine, with the stored tuned config when this host has
    one (else the default), as `hwtune run` would run it. Returns the runner
    and the config with its source."""
    from hwtune.engine.config import resolve
    from hwtune.engine.runner import native_engine, op_costs, open_engine
    from hwtune.graph import load_model
    from hwtune.native.pool import allowed_cpus
    native_engine()
    graph = load_model(fig.params["model"], fig.params.get("vars") or None)
    cpus = allowed_cpus()
    names = [op.name for op in graph.ops]
    graph_hash = db.put_graph(graph.to_json()) if db is not None else ""
    res = resolve(db if host_key else None, host_key or "", graph_hash, {}, cpus=cpus,
                  op_names=names)
    costs = op_costs(db, host_key, graph, res.config)
    side = EngineSide(open_engine(graph, res.config, costs),
                      runs=int(fig.params.get("iterations_per_sample", 1)))
    try:
        side.warm(max(1, suite.warmup))
    except BaseException:
        side.close()
        raise
    return _BestOf(side, suite, min, None), res


class _RefFailed(Exception):
    """A reference kernel failed mid-run: the whole check fails with it."""

    def __init__(self, exc: Exception):
        super().__init__(str(exc))
        self.exc = exc


class _Turn(Side):
    """One figure's turn in a round: a chunk of its reference, then a chunk
    of the figure, each after the spinning workers of the previous chunk
    parked: OpenBLAS workers of a 2-thread BLAS reference busy-wait for
    ~0.1-0.2 s after a call, and a chunk taken then would share its cores
    with them (hwtune.measure.settling's measurement)."""

    def __init__(self, fig: Figure, runner: Side, ref: Side, results: Dict[str, FigureResult],
                 ref_name: str, tick: Callable[[str], None]):
        self.fig, self.runner, self.ref, self.results = fig, runner, ref, results
        self.ref_name, self.tick = ref_name, tick

    def take(self, k: int) -> List[float]:
        self.tick(self.fig.name)
        settle()
        try:
            rs = self.ref.take(k)
        except HwtuneError as exc:
            raise _RefFailed(exc) from None
        settle()
        self.results[self.ref_name].samples.extend(rs)
        xs = self.runner.take(k)
        res = self.results[self.fig.name]
        res.samples.extend(xs)
        res.ref.extend([stats.median(rs)] * len(xs))
        res.params["reference"] = self.ref_name
        return xs


def measure_suite(suite: Suite, *, db=None, host_key: Optional[str] = None,
                  inner_hints: Optional[Dict[str, int]] = None,
                  progress: Optional[ProgressFn] = None) -> Dict[str, FigureResult]:
    """Measure every figure, each chunk right after a chunk of its reference
    (suite.reference_for); returns results by name, references included.
    inner_hints: calls per sample the baseline used, reused so both sides
    time the same loop. A figure the kernels refuse keeps its error and no
    samples; the others go on."""
    from hwtune.native.pool import Pool, allowed_cpus

    hints = inner_hints or {}
    refs = {f.name: reference_for(suite, f) for f in suite.figures}
    used_refs = [r for r in suite.references if r in refs.values()]
    kernel_figs = used_refs + [f for f in suite.figures if f.kind != "model"]
    need = max(f.threads for f in kernel_figs)
    allowed = allowed_cpus()
    if need > len(allowed):
        worst = max(kernel_figs, key=lambda f: f.threads)
        raise UsageError(f"figure {worst.name} needs {need} threads but this process may use "
                         f"{len(allowed)} CPU{'s' if len(allowed) != 1 else ''}: lower its "
                         "threads in the suite or pass --figure to skip it")
    results: Dict[str, FigureResult] = {}
    for f in used_refs + suite.figures:
        results[f.name] = FigureResult(f.name, f.kind, dict(f.params), f.unit,
                                       f.higher_is_better)
    plan = split(suite.samples, suite.rounds)
    total = len(plan) * len(suite.figures)
    done = [0]

    def tick(name: str) -> None:
        if progress:
            progress(done[0], total, name)
        done[0] += 1

    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(Pool(executors=1, threads=need, pin=True))
        runners: Dict[str, Side] = {}
        for f in used_refs + suite.figures:
            try:
                if f.kind in ("gemm", "eltwise"):
                    r = _kernel(f, pool, suite, hints.get(f.name))
                elif f.kind in ("blas_gemm", "numpy_eltwise"):
                    r = _numpy_ref(f, suite, hints.get(f.name))
                elif f.kind == "model":
                    r, res = _model(f, suite, db, host_key)
                    results[f.name].params["config"] = res.config.to_json()
                    results[f.name].params["config_source"] = res.source
                else:
                    r = _probe(f, pool, suite)
            except (NativeError, UsageError) as exc:
                if f in used_refs:
                    raise
                results[f.name].error = str(exc)
                continue
            stack.callback(r.close)
            runners[f.name] = r
            if r.inner is not None:
                results[f.name].params["inner"] = r.inner
        # Every figure's turns, the order rotated each round (interleave())
        # so that no figure always runs right after the same neighbour
        # (cache and clock state carry over). A figure that failed to start
        # has no turns; its share of the progress is done.
        figs = [f for f in suite.figures if f.name in runners]
        done[0] += len(plan) * (len(suite.figures) - len(figs))
        turns = [_Turn(f, runners[f.name], runners[refs[f.name].name], results,
                       refs[f.name].name, tick) for f in figs]
        try:
            got = interleave(turns, FixedSampling(suite.samples, rounds=len(plan)))
        except _RefFailed as exc:
            raise exc.exc from None
        for f, m in zip(figs, got):
            if m.status != OK:
                results[f.name].error = m.note
    if progress:
        progress(total, total, "")
    return results

