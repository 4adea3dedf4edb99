"""Measure a suite: each time figure in rounds interleaved with its
reference kernel, sampled until the sequential test decides (timed.py);
counted figures under valgrind or hardware counters (counted.py).

Pairing each figure chunk with a reference chunk measured right beside it
matters more than sample count on a shared machine: a neighbour's build
that starts halfway through slows both chunks of a round alike, and the
per-round ratio stays.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from hwtune.check.suite import Figure, Suite, reference_for
from hwtune.engine.prepare import prepare_run
from hwtune.errors import HwtuneError, NativeError, UsageError
from hwtune.measure import stats
from hwtune.measure.engine import EngineSide
from hwtune.measure.preempt import WindowedSide
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
    # Set while measuring, not stored: the sequential test's verdict (time
    # figures sampled against a baseline or another build).
    decision: Optional[Any] = field(default=None, compare=False)
    # Wall seconds spent measuring the figure (set-up, warm-up, its rounds
    # with the reference chunks beside them; a counted figure's run under
    # the counter): what a CI dashboard shows as the test case's time.
    wall_s: Optional[float] = field(default=None, compare=False)

    @property
    def metric(self) -> str:
        return str(self.params.get("metric", "time"))

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
                "ref": self.ref, "error": self.error, "wall_s": self.wall_s}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FigureResult":
        return cls(name=str(d["name"]), kind=str(d["kind"]), params=dict(d.get("params") or {}),
                   unit=str(d.get("unit", "s")), higher_is_better=bool(d["higher_is_better"]),
                   samples=[float(x) for x in d["samples"]],
                   ref=[float(x) for x in d.get("ref") or []], error=d.get("error"),
                   wall_s=None if d.get("wall_s") is None else float(d["wall_s"]))


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
        # regions > 1: the same n elements as that many fork-join regions
        # over consecutive slices (a sample is still seconds per n elements).
        regions = int(p.get("regions", 1))

        def loop(w, r, k):
            return bench.eltwise_samples(pool, p["threads"], p["op"], p["n"], isa=suite.isa,
                                         warmup=w, reps=r, inner=k, regions=regions)
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
    from dataclasses import replace

    from hwtune.engine.runner import native_engine
    from hwtune.graph import load_model
    native_engine()
    graph = load_model(fig.params["model"], fig.params.get("vars") or None)
    graph_hash = db.put_graph(graph.to_json()) if db is not None else ""
    stored = db if host_key else None
    run = prepare_run(stored, host_key or "", graph, graph_hash)
    side = EngineSide(run.open(stored, host_key),
                      runs=int(fig.params.get("iterations_per_sample", 1)))
    try:
        side.warm(max(1, suite.warmup))
    except BaseException:
        side.close()
        raise
    return _BestOf(side, suite, min, None), replace(run.resolved, config=run.config)


def runner_for(fig: Figure, pool, suite: Suite, inner: Optional[int], *, db=None,
               host_key: Optional[str] = None) -> Side:
    """The side that takes fig's samples (each the best of suite.best_of);
    inner: calls per sample to reuse (None: sized to suite.sample_seconds).
    Model figures record the engine config they ran in fig.params."""
    if fig.kind in ("gemm", "eltwise"):
        return _kernel(fig, pool, suite, inner)
    if fig.kind in ("blas_gemm", "numpy_eltwise"):
        return _numpy_ref(fig, suite, inner)
    if fig.kind == "model":
        r, res = _model(fig, suite, db, host_key)
        fig.params["config"] = res.config.to_json()
        fig.params["config_source"] = res.source
        return r
    return _probe(fig, pool, suite)


def _ref_samples(fig_samples: List[float], ref_samples: List[float],
                 ends: List[int]) -> List[float]:
    """Per figure sample, the median of its round's reference chunk."""
    out, start = [], 0
    for end in ends:
        chunk = ref_samples[start:end]
        med = stats.median(chunk) if chunk else 0.0
        out += [med] * (min(end, len(fig_samples)) - start)
        start = end
    return out


def measure_suite(suite: Suite, *, db=None, host_key: Optional[str] = None,
                  inner_hints: Optional[Dict[str, int]] = None,
                  progress: Optional[ProgressFn] = None, baseline=None,
                  record: bool = False, relative: bool = False,
                  levels: bool = False) -> Dict[str, FigureResult]:
    """Measure every time figure of the suite (counted ones: counted.py),
    each in rounds with its reference kernel (suite.reference_for), sampled
    until decided against `baseline` (a Baseline; its values per round are
    figure/reference ratios when `relative`, else the figure's own times
    against the reference's for pairing only), or with record=True until
    precise enough to record. Results by name, references included.
    inner_hints: calls per sample the baseline used, reused so both sides
    time the same loop. levels (recording) or a baseline figure with levels
    over several processes: kernel figures are sampled as one process's
    level (hwtune.check.levels.sampling), decided later by the level test. A figure the kernels refuse keeps its error and no
    samples; the others go on."""
    from hwtune.check import timed
    from hwtune.measure.clock import Stopwatch
    from hwtune.native.threads import Pool, allowed_cpus

    hints = inner_hints or {}
    figs = [f for f in suite.figures if suite.metric_of(f) == "time"]
    refs = {f.name: reference_for(suite, f) for f in figs}
    used_refs = [r for r in suite.references if r in refs.values()]
    kernel_figs = used_refs + [f for f in figs if f.kind != "model"]
    results: Dict[str, FigureResult] = {}
    if not figs:
        return results
    need = max(f.threads for f in kernel_figs)
    allowed = allowed_cpus()
    if need > len(allowed):
        worst = max(kernel_figs, key=lambda f: f.threads)
        raise UsageError(f"figure {worst.name} needs {need} threads but this process may use "
                         f"{len(allowed)} CPU{'s' if len(allowed) != 1 else ''}: lower its "
                         "threads in the suite or pass --figure to skip it")
    for f in used_refs + figs:
        results[f.name] = FigureResult(f.name, f.kind, dict(f.params), f.unit,
                                       f.higher_is_better)
    cpus = len(allowed)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(Pool(executors=1, threads=need, pin=True))
        ref_runners: Dict[str, Side] = {}
        for r in used_refs:
            side = runner_for(r, pool, suite, hints.get(r.name))
            stack.callback(side.close)
            ref_runners[r.name] = side
            if side.inner is not None:
                results[r.name].params["inner"] = side.inner
        for i, f in enumerate(figs):
            if progress:
                progress(i, len(figs), f.name)
            res = results[f.name]
            watch = Stopwatch()
            try:
                runner = runner_for(f, pool, suite, hints.get(f.name), db=db,
                                    host_key=host_key)
            except (NativeError, UsageError) as exc:
                res.error = str(exc)
                res.wall_s = watch.elapsed()
                continue
            res.params.update({k: f.params[k] for k in ("config", "config_source")
                               if k in f.params})
            stack.callback(runner.close)
            if runner.inner is not None:
                res.params["inner"] = runner.inner
            ref = refs[f.name]
            single = f.kind != "model" and f.threads == 1
            partner = WindowedSide(ref_runners[ref.name], single_thread=ref.threads == 1,
                                   cpus=cpus)
            figure = WindowedSide(runner, single_thread=single, cpus=cpus)
            base = None
            fsuite, frecord = suite, record
            from hwtune.check import levels as lv
            if f.kind != "model" and (
                    (record and levels) or (baseline is not None and not record
                                            and lv.has_levels(baseline.figures.get(f.name)))):
                fsuite, frecord = lv.sampling(suite), True
            elif baseline is not None and not record:
                old = baseline.figures.get(f.name)
                if old is None or not old.samples or old.metric != "time" or \
                        len(old.ref) != len(old.samples):
                    base = None
                else:
                    from hwtune.check.timed import baseline_values
                    base = baseline_values(old.costs(), old.ref, old.params,
                                           absolute=not relative)
            # The reference kernels time; a throughput probe samples a rate.
            got = timed.sample(fsuite, partner, figure, base=base,
                               record=frecord or base is None, absolute=not relative,
                               rates=(False, f.higher_is_better))
            if got.errors[0]:
                raise UsageError(f"reference kernel {ref.name} failed: {got.errors[0]}")
            res.samples = list(got.b)
            res.ref = _ref_samples(got.b, got.a, got.ends)
            res.params["reference"] = ref.name
            res.params.update(got.info())
            results[ref.name].samples.extend(got.a)
            res.decision = got.decision if base is not None else None
            res.wall_s = watch.elapsed()
            if got.errors[1]:
                res.error = got.errors[1]
    if progress:
        progress(len(figs), len(figs), "")
    return results
