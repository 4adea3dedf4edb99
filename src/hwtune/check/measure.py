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
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from hwtune.check.suite import Figure, Suite, reference_for
from hwtune.errors import HwtuneError, NativeError, UsageError
from hwtune.scan import stats
from hwtune.scan.runner import settle

# A kernel sample is `inner` back-to-back calls; above this a mis-calibration
# (a ~20 ns call) would run for minutes (as hwtune scan's MAX_INNER).
MAX_INNER = 100000
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


def chunks(total: int, rounds: int) -> List[int]:
    """total samples split into `rounds` near-equal positive chunks."""
    r = max(1, min(rounds, total))
    return [total // r + (1 if i < total % r else 0) for i in range(r)]


def best_of(xs: List[float], m: int, pick) -> List[float]:
    """Each run of m consecutive values reduced to its best (min time, max
    rate). Other users' load only ever adds time, so the best of a few short
    runs is the kernel's own speed more often than one long run is: on the
    loaded 2-core box the median of 15 samples of one 10 ms run each moved
    from 0.31 to 0.80 ms between runs of the same GEMM, while its fastest
    ~1/3 of calls stayed within 0.30-0.31 ms."""
    return [pick(xs[i:i + m]) for i in range(0, len(xs) - m + 1, m)]


def _inner(one_call_s: float, target_s: float) -> int:
    return int(max(1, min(MAX_INNER, round(target_s / max(one_call_s, 1e-9)))))


class _Kernel:
    """A gemm or element-wise figure on the shared pool."""

    def __init__(self, fig: Figure, pool, suite: Suite, inner: Optional[int]):
        from hwtune.native import bench
        self.fig, self.pool, self.isa, self.warmup = fig, pool, suite.isa, suite.warmup
        p = fig.params
        if fig.kind == "gemm":
            self._fn = lambda w, r, k: bench.gemm_samples(
                pool, p["threads"], p["M"], p["K"], p["N"], isa=self.isa, warmup=w, reps=r,
                inner=k)
        else:
            self._fn = lambda w, r, k: bench.eltwise_samples(
                pool, p["threads"], p["op"], p["n"], isa=self.isa, warmup=w, reps=r, inner=k)
        self.best_of = suite.best_of
        if inner is None:
            one = stats.median(list(self._fn(self.warmup, CALIBRATE, 1)))
            inner = _inner(one, suite.sample_seconds / self.best_of)
        self.inner = inner

    def take(self, k: int) -> List[float]:
        return best_of([float(x) for x in self._fn(self.warmup, k * self.best_of, self.inner)],
                       self.best_of, min)

    def close(self):
        pass


class _NumpyRef:
    """numpy's BLAS GEMM (threads limited with threadpoolctl) or a numpy
    element-wise op: reference kernels outside hwtune's code."""

    def __init__(self, fig: Figure, suite: Suite, inner: Optional[int]):
        import numpy as np
        from threadpoolctl import threadpool_limits
        p = fig.params
        rng = np.random.default_rng(0)
        self._limits = threadpool_limits
        self.threads = p.get("threads", 1)
        if fig.kind == "blas_gemm":
            a = rng.standard_normal((p["M"], p["K"]), dtype=np.float32)
            b = rng.standard_normal((p["K"], p["N"]), dtype=np.float32)
            c = np.empty((p["M"], p["N"]), dtype=np.float32)
            self._call = lambda: np.matmul(a, b, out=c)
        else:
            a = rng.standard_normal(p["n"], dtype=np.float32)
            b = rng.standard_normal(p["n"], dtype=np.float32)
            c = np.empty(p["n"], dtype=np.float32)
            fn = np.multiply if p["op"] == "mul" else np.add
            self._call = lambda: fn(a, b, out=c)
        with self._limits(limits=self.threads, user_api="blas"):
            for _ in range(max(1, suite.warmup)):
                self._call()
            if inner is None:
                inner = _inner(stats.median([self._time(1) for _ in range(CALIBRATE)]),
                               suite.sample_seconds / suite.best_of)
        self.inner = inner
        self.best_of = suite.best_of

    def _time(self, k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            self._call()
        return (time.perf_counter() - t0) / k

    def take(self, k: int) -> List[float]:
        with self._limits(limits=self.threads, user_api="blas"):
            self._call()  # warm, like the hwtune kernels' warm-up call
            return best_of([self._time(self.inner) for _ in range(k * self.best_of)],
                           self.best_of, min)

    def close(self):
        pass


class _Probe:
    """Throughput probes (FMA peak, triad): each sample is one timed slice."""

    def __init__(self, fig: Figure, pool, suite: Suite):
        from hwtune.native import bench
        p = fig.params
        secs = suite.sample_seconds / suite.best_of
        self.best_of = suite.best_of
        if fig.kind == "fma_peak":
            self._fn = lambda: bench.fma_peak(pool, p["threads"], isa=suite.isa, seconds=secs)
        else:
            self._fn = lambda: bench.triad(pool, p["threads"], p["n"], isa=suite.isa,
                                           seconds=secs)
        self._fn()  # clocks up, pages touched
        self.inner = None

    def take(self, k: int) -> List[float]:
        return best_of([float(self._fn()) for _ in range(k * self.best_of)], self.best_of, max)

    def close(self):
        pass


class _Model:
    """A model on the engine, with the stored tuned config when this host has
    one (else the default), as `hwtune run` would run it."""

    def __init__(self, fig: Figure, suite: Suite, db, host_key: Optional[str]):
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
        self.config, self.source = res.config, res.source
        costs = op_costs(db, host_key, graph, res.config)
        self.engine = open_engine(graph, res.config, costs)
        self.iters = int(fig.params.get("iterations_per_sample", 1))
        self.best_of = suite.best_of
        for _ in range(max(1, suite.warmup)):
            self.engine.run()
        self.inner = None

    def take(self, k: int) -> List[float]:
        out = []
        for _ in range(k * self.best_of):
            t0 = time.perf_counter()
            for _ in range(self.iters):
                self.engine.run()
            out.append((time.perf_counter() - t0) / self.iters)
        return best_of(out, self.best_of, min)

    def close(self):
        self.engine.close()


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
    plan = chunks(suite.samples, suite.rounds)
    total = len(plan) * len(suite.figures)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(Pool(executors=1, threads=need, pin=True))
        runners: Dict[str, Any] = {}
        for f in used_refs + suite.figures:
            try:
                if f.kind in ("gemm", "eltwise"):
                    r = _Kernel(f, pool, suite, hints.get(f.name))
                elif f.kind in ("blas_gemm", "numpy_eltwise"):
                    r = _NumpyRef(f, suite, hints.get(f.name))
                elif f.kind == "model":
                    r = _Model(f, suite, db, host_key)
                    results[f.name].params["config"] = r.config.to_json()
                    results[f.name].params["config_source"] = r.source
                else:
                    r = _Probe(f, pool, suite)
            except (NativeError, UsageError) as exc:
                if f in used_refs:
                    raise
                results[f.name].error = str(exc)
                continue
            stack.callback(r.close)
            runners[f.name] = r
            if r.inner is not None:
                results[f.name].params["inner"] = r.inner
        done = 0
        for rnd, k in enumerate(plan):
            # Rotate the order each round so no figure always runs right
            # after the same neighbour (cache and clock state carry over).
            n = len(suite.figures)
            for f in suite.figures[rnd % n:] + suite.figures[:rnd % n]:
                if progress:
                    progress(done, total, f.name)
                done += 1
                if f.name not in runners:
                    continue
                ref = refs[f.name]
                # OpenBLAS workers of a 2-thread BLAS reference busy-wait for
                # ~0.1-0.2 s after a call; a chunk taken then would share its
                # cores with them (hwtune.scan.runner.settle's measurement).
                settle()
                rs = runners[ref.name].take(k)
                settle()
                results[ref.name].samples.extend(rs)
                try:
                    xs = runners[f.name].take(k)
                except HwtuneError as exc:
                    results[f.name].error = str(exc)
                    runners.pop(f.name)
                    continue
                results[f.name].samples.extend(xs)
                results[f.name].ref.extend([stats.median(rs)] * len(xs))
                results[f.name].params["reference"] = ref.name
    if progress:
        progress(total, total, "")
    return results
