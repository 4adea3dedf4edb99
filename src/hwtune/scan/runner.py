"""Execute a scan plan: measure each step, retry noisy ones, store each result.

Every measurement is written to results.db the moment it is taken, so a
Ctrl-C loses at most the step in flight; the run is then marked
'interrupted' and Interrupted says how many measurements were kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from hwtune.errors import HwtuneError, Interrupted, NativeError, UsageError
from hwtune.measure import interleave, settle
from hwtune.measure.noise import least_noisy, worst_spread
from hwtune.measure.policy import FixedSampling, split
from hwtune.measure.sides import CallSide, LoopSide, SampleSide
from hwtune.scan import stats
from hwtune.scan.steps import (ELTWISE_FLOPS, NOISY_RETRIES, REFERENCE_VARIANT, ScanOptions, Step,
                              make_plan)
from hwtune.scan.system import blas_info, cache_bytes

ProgressFn = Callable[[int, int, Optional[Step]], None]


@dataclass
class ScanResult:
    run_id: int
    host_key: str
    stored: int
    warnings: list = field(default_factory=list)


@contextlib.contextmanager
def _sigint_deferred(swallow: bool = False):
    """Hold Ctrl-C while a row is written, then deliver it (or drop it when
    swallow: a second Ctrl-C while the run is being marked 'interrupted').

    A KeyboardInterrupt raised inside the database call could leave the
    write undone; deferring it by the few ms of an INSERT keeps 'every
    finished measurement stays stored' true."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit = []
    old = signal.signal(signal.SIGINT, lambda s, f: hit.append(s))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if hit and not swallow:
            raise KeyboardInterrupt


def _row(step: Step, samples, *, kind: str, variant: str, value: float, unit: str,
         pinned, noise: float, params: Optional[dict] = None) -> dict:
    """One add_measurement() payload. kind 'time': samples are seconds per
    call; 'rate': samples are throughput figures in `unit`."""
    samples = [float(s) for s in samples]
    spread = stats.rel_spread(samples)
    timed = kind == "time"
    return dict(
        bench=step.bench, op=step.op, params=dict(params or step.params),
        kernel_variant=variant, threads=step.threads, executors=step.executors,
        pinned=pinned, samples=samples,
        median_s=stats.median(samples) if timed else None,
        mad_s=stats.mad(samples) if timed else None,
        rel_spread=spread, value=value, unit=unit,
        status="noisy" if spread > noise else "ok", note=None)


def _error_row(step: Step, exc: Exception) -> dict:
    """The add_measurement() payload of a step that failed: no samples."""
    return dict(
        bench=step.bench, op=step.op, params=dict(step.params), kernel_variant=step.isa,
        threads=step.threads, executors=step.executors, pinned=None, samples=[],
        median_s=None, mad_s=None, rel_spread=None, value=None, unit=None,
        status="error", note=str(exc))


# Interleaving: rounds of >= 3 samples, at most 7 rounds per GEMM step. Each
# hwtune call allocates and fills fresh operands (13-44 ms measured for
# 64x512x512 and 1x512x2048 on the loaded 2-core Xeon) and, from 2 threads
# on, each round waits for the BLAS workers to park (settle(), up to 0.3 s);
# 7 rounds keep that near 1 s per step (3 for --quick's 9 samples) while a
# load burst of a second or more still lands on both sides.
GEMM_ROUNDS = 7
ROUND_SAMPLES = 3


def _gemm_policy(reps: int) -> FixedSampling:
    """reps samples per side in rounds of about ROUND_SAMPLES."""
    return FixedSampling(reps, rounds=max(1, min(GEMM_ROUNDS, -(-reps // ROUND_SAMPLES))))


def _rounds(reps: int) -> list:
    """The chunks the GEMM interleaving takes per round."""
    return split(reps, _gemm_policy(reps).rounds)


def _one_side(side, reps: int, warmup: int = 0) -> list:
    """reps samples of one side in one go (errors propagate: the step fails)."""
    return interleave([side], FixedSampling(reps, rounds=1), warmup=warmup,
                      raise_errors=True)[0].samples


class _Measurer:
    """Runs one step on the right pool. Owns pools and reference buffers."""

    def __init__(self, threads_max: int, warn: Callable[[str], None]):
        from hwtune.native import threads as native_threads
        self._pool_mod = native_threads
        self._stack = contextlib.ExitStack()
        self._threads_max = threads_max
        self._main = None
        self._warn = warn
        self._warned_pin = False

    def close(self):
        self._stack.close()

    def _check_pinned(self, pool, wanted: bool):
        if wanted and not pool.pinned and not self._warned_pin:
            self._warned_pin = True
            self._warn("the OS refused to pin threads: measurements ran unpinned, so pinned "
                       "and OS-placed co-runs are not comparable (run outside a restricted "
                       "cgroup/container to pin)")
        return bool(pool.pinned)

    def main_pool(self):
        """One pinned team of threads_max threads; steps use its first nth."""
        if self._main is None:
            self._main = self._stack.enter_context(
                self._pool_mod.Pool(executors=1, threads=self._threads_max, pin=True))
        return self._main

    # -- probes ------------------------------------------------------------
    def fma_peak(self, step: Step, noise: float):
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)

        def probe(k):
            return [bench.fma_peak(pool, step.threads, isa=step.isa, seconds=step.seconds)
                    for _ in range(k)]
        # One untimed probe first: it brings the clocks up.
        s = _one_side(SampleSide(probe, warm_fn=lambda n: probe(n) and None), step.reps, 1)
        v = stats.median(s)
        return [_row(step, s, kind="rate", variant=step.isa, value=v, unit="GFLOPS",
                     pinned=pinned, noise=noise)]

    def dot_peak(self, step: Step, noise: float):
        """int8 (GOPS) or bf16 (GFLOPS) GEMM peak, sampled as the FMA peak is."""
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)

        def probe(k):
            return [bench.dot_peak(pool, step.threads, step.op, isa=step.isa,
                                   seconds=step.seconds) for _ in range(k)]
        s = _one_side(SampleSide(probe, warm_fn=lambda n: probe(n) and None), step.reps, 1)
        return [_row(step, s, kind="rate", variant=step.isa, value=stats.median(s),
                     unit="GOPS" if step.op == "int8" else "GFLOPS", pinned=pinned,
                     noise=noise)]

    def triad(self, step: Step, noise: float):
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)
        n = step.params["n"]
        s = _one_side(SampleSide(lambda k: [
            bench.triad(pool, step.threads, n, isa=step.isa, seconds=step.seconds)
            for _ in range(k)]), step.reps)
        return [_row(step, s, kind="rate", variant=step.isa, value=stats.median(s),
                     unit="GB/s", pinned=pinned, noise=noise)]

    # -- timed kernels -----------------------------------------------------
    def gemm(self, step: Step, noise: float):
        """hwtune GEMM and numpy BLAS, interleaved in rounds of a few samples
        so both see the same machine load (on a shared machine a burst of
        other work then hits both, not just one)."""
        from threadpoolctl import threadpool_limits
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)
        M, K, N = (step.params[k] for k in ("M", "K", "N"))
        t = step.threads
        rng = np.random.default_rng(0)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        c = np.empty((M, N), dtype=np.float32)
        # Each side gets its own calls-per-sample: a reference 100x slower
        # than hwtune (GEMV on a loaded machine) must not run 100x longer.
        hw = LoopSide(lambda w, r, k: bench.gemm_samples(pool, t, M, K, N, isa=step.isa,
                                                         warmup=w, reps=r, inner=k),
                      sample_s=step.sample_s)
        ref = CallSide(lambda: np.matmul(a, b, out=c), sample_s=step.sample_s, prime=True)
        with threadpool_limits(limits=t, user_api="blas"):
            # BLAS workers of the previous chunk must not share our cores.
            got = interleave([hw, ref], _gemm_policy(step.reps), warmup=step.warmup,
                             settle=settle if t > 1 else None, settle_each=True,
                             raise_errors=True)
        hw_s, ref_s = (m.samples for m in got)
        flops = 2.0 * M * K * N
        return [
            _row(step, hw_s, kind="time", variant=step.isa,
                 value=flops / stats.median(hw_s) / 1e9, unit="GFLOPS", pinned=pinned,
                 noise=noise, params=dict(step.params, inner=hw.inner)),
            _row(step, ref_s, kind="time", variant=REFERENCE_VARIANT,
                 value=flops / stats.median(ref_s) / 1e9, unit="GFLOPS", pinned=None,
                 noise=noise, params=dict(step.params, inner=ref.calls)),
        ]

    def eltwise(self, step: Step, noise: float):
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)
        n = step.params["n"]
        side = LoopSide(lambda w, r, k: bench.eltwise_samples(pool, step.threads, step.op, n,
                                                              isa=step.isa, warmup=w, reps=r,
                                                              inner=k),
                        sample_s=step.sample_s, take_warmup=step.warmup)
        s = _one_side(side, step.reps, step.warmup)
        med = stats.median(s)
        if step.op in ELTWISE_FLOPS:
            value, unit = ELTWISE_FLOPS[step.op] * n / med / 1e9, "GFLOPS"
        else:
            value, unit = n / med / 1e9, "Gelem/s"
        return [_row(step, s, kind="time", variant=step.isa, value=value, unit=unit,
                     pinned=pinned, noise=noise,
                     params=dict(step.params, inner=side.inner))]

    def corun(self, step: Step, noise: float):
        """Graphi's second microbenchmark: k executors loop the op at once."""
        from hwtune.native import bench
        p = step.params
        with self._pool_mod.Pool(executors=step.executors, threads=step.threads,
                                 pin=step.pin) as pool:
            pinned = self._check_pinned(pool, step.pin) if step.pin else False
            kw = dict(M=p.get("M", 1), K=p.get("K", 1), N=p.get("N", 1), n=p.get("n", 1))
            per_team = []

            def probe(k):
                out = []
                for _ in range(k):
                    teams = bench.corun(pool, step.op, isa=step.isa, seconds=step.seconds, **kw)
                    per_team.append([float(x) for x in teams])
                    out.append(float(sum(teams)))
                return out
            s = _one_side(SampleSide(probe), step.reps)
        row = _row(step, s, kind="rate", variant=step.isa, value=stats.median(s),
                   unit="GFLOPS", pinned=pinned, noise=noise)
        # The slowest team tells whether one executor was starved (OS placed
        # two teams on one core); keep the per-team medians with the row.
        row["params"]["team_gflops"] = [round(stats.median(col), 3) for col in zip(*per_team)]
        return [row]

    def measure(self, step: Step, noise: float) -> list:
        """Measure, re-measuring up to NOISY_RETRIES times while noisy; keep
        the least noisy attempt."""
        fn = getattr(self, step.bench)
        best, attempt = least_noisy(lambda: fn(step, noise), worst_spread, noise,
                                    NOISY_RETRIES)
        for r in best:
            r["note"] = f"{attempt} attempt(s)" if attempt > 1 else None
        return best


def _facts(selected: str, allowed: list, opts: ScanOptions, threads: list, l2: int, l3: int):
    from hwtune.native.isa import amx_status
    return {
        # detected only: hwtune has no AMX kernel yet (issue #43)
        "amx": amx_status(request=True),
        "selected_isa": selected,
        "allowed_cpus": allowed,
        "threads": threads,
        "saturation": opts.saturation,
        "noise_threshold": opts.noise,
        "blas": blas_info(),
        "l2_bytes": l2,
        "l3_bytes": l3,
    }


def _derived_facts(db, run_id: int) -> dict:
    """Saturation points and best co-run layouts, for later commands (the
    tuner reads them instead of re-deriving from rows)."""
    from hwtune.scan.summary import summarize
    s = summarize(db.measurements(run_id), facts=db.facts(run_id))
    return {
        "gemm_saturation": {g["shape"]: g["saturation"] for g in s["gemm"]},
        "eltwise_saturation": {e["op"]: e["saturation"] for e in s["eltwise"]},
        "corun_best": {op: {k: c["best"][k] for k in ("executors", "threads", "placement",
                                                       "gflops")}
                       for op, c in s["corun"].items()},
    }


def run_scan(db, opts: ScanOptions, *, progress: Optional[ProgressFn] = None,
             warn: Optional[Callable[[str], None]] = None) -> ScanResult:
    """Validate, plan, measure and store a scan. Returns the stored run.

    Raises UsageError before measuring for bad options, Interrupted (after
    marking the run 'interrupted') on Ctrl-C."""
    from hwtune import machine
    from hwtune.native import isa as native_isa
    from hwtune.native import threads as native_threads

    allowed = list(native_threads.allowed_cpus())
    supported = native_isa.supported_isas()
    selected = native_isa.selected_isa()
    fp = machine.fingerprint()
    l2, l3 = cache_bytes(fp)
    from hwtune.native import bench as native_bench
    dot = {(k, i): native_bench.dot_variant(k, i) for k in native_bench.DOT_KINDS
           for i in supported}
    steps = make_plan(opts, n_allowed=len(allowed), supported=supported, selected=selected,
                      l2_bytes=l2, l3_bytes=l3, n_default=fp.get("usable_cpus"),
                      dot_variants={key: v for key, v in dot.items() if v})
    threads = sorted({s.threads for s in steps if s.bench in ("gemm", "eltwise")})

    with _sigint_deferred():  # a run row exists only together with its try/except
        host_key = db.upsert_host(fp)
        run_id = db.start_run(host_key, "scan", dict(opts.as_dict(), threads=threads))
    warnings = []

    def _warn(msg):
        warnings.append(msg)
        with _sigint_deferred():
            db.add_fact(run_id, "warnings", list(warnings))
        if warn:
            warn(msg)

    stored = 0
    measurer = None
    try:
        with _sigint_deferred():
            for k, v in _facts(selected, allowed, opts, threads, l2, l3).items():
                db.add_fact(run_id, k, v)
        measurer = _Measurer(max(threads), _warn)
        for i, step in enumerate(steps):
            if progress:
                progress(i, len(steps), step)
            try:
                rows = measurer.measure(step, opts.noise)
            except (NativeError, UsageError) as exc:
                # A step the kernels refused (bad size for this variant, a
                # failed allocation) is a result too: store it and go on.
                rows = [_error_row(step, exc)]
                _warn(f"{step.label} failed: {exc}")
            with _sigint_deferred():
                for r in rows:
                    db.add_measurement(run_id, **r)
                    stored += 1
        if progress:
            progress(len(steps), len(steps), None)
        measurer.close()
        measurer = None
        with _sigint_deferred():
            for k, v in _derived_facts(db, run_id).items():
                db.add_fact(run_id, k, v)
        db.finish_run(run_id, "complete")
    except KeyboardInterrupt:
        with _sigint_deferred(swallow=True):
            if measurer:
                measurer.close()
            db.finish_run(run_id, "interrupted")
        raise Interrupted(
            f"interrupted: kept {stored} measurement{'s' if stored != 1 else ''} of scan run "
            f"{run_id} (marked 'interrupted')") from None
    except BaseException:
        with _sigint_deferred(swallow=True):
            if measurer:
                measurer.close()
            try:
                db.finish_run(run_id, "failed")
            except HwtuneError:
                pass  # the database itself failed: report the original error
        raise
    return ScanResult(run_id, host_key, stored, warnings)
