"""Execute a scan plan: measure each step, retry noisy ones, store each result.

Every measurement is written to results.db the moment it is taken, so a
Ctrl-C loses at most the step in flight; the run is then marked
'interrupted' and Interrupted says how many measurements were kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from hwtune.errors import HwtuneError, Interrupted, NativeError, UsageError
from hwtune.scan import stats
from hwtune.scan.steps import (ELTWISE_FLOPS, NOISY_RETRIES, REFERENCE_VARIANT, ScanOptions, Step,
                              make_plan)
from hwtune.scan.system import blas_info, cache_bytes

# Upper bound on calls per sample: a kernel below ~20 ns is not what scan is
# for, and this keeps a mis-calibration from running for minutes.
MAX_INNER = 100000

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


def _rounds(reps: int) -> list:
    """Split reps into near-equal positive chunks of about ROUND_SAMPLES."""
    r = max(1, min(GEMM_ROUNDS, -(-reps // ROUND_SAMPLES)))
    return [reps // r + (1 if i < reps % r else 0) for i in range(r)]


def settle(max_s: float = 0.3, poll_s: float = 0.01) -> None:
    """Wait until this process' idle threads stop burning CPU.

    OpenBLAS workers busy-wait after a call (measured here: ~24 ms of CPU
    over the following 100-200 ms, then nothing); a hwtune sample taken in
    that window shares its cores with them (186 us alone vs 283 us right
    after a 2-thread BLAS call, 64x512x512). Polling process CPU time ends
    the wait as soon as they park instead of sleeping a fixed worst case."""
    end = time.perf_counter() + max_s
    while time.perf_counter() < end:
        c0 = time.process_time()
        time.sleep(poll_s)
        if time.process_time() - c0 < 0.1 * poll_s:
            return


def _time_calls(fn, calls: int) -> float:
    """Seconds per call of fn over `calls` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


class _Measurer:
    """Runs one step on the right pool. Owns pools and reference buffers."""

    def __init__(self, threads_max: int, warn: Callable[[str], None]):
        from hwtune.native import pool as native_pool
        self._pool_mod = native_pool
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
        bench.fma_peak(pool, step.threads, isa=step.isa, seconds=step.seconds)  # warm-up: clocks up
        s = [bench.fma_peak(pool, step.threads, isa=step.isa, seconds=step.seconds)
             for _ in range(step.reps)]
        v = stats.median(s)
        return [_row(step, s, kind="rate", variant=step.isa, value=v, unit="GFLOPS",
                     pinned=pinned, noise=noise)]

    def triad(self, step: Step, noise: float):
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)
        n = step.params["n"]
        s = [bench.triad(pool, step.threads, n, isa=step.isa, seconds=step.seconds)
             for _ in range(step.reps)]
        return [_row(step, s, kind="rate", variant=step.isa, value=stats.median(s),
                     unit="GB/s", pinned=pinned, noise=noise)]

    # -- timed kernels -----------------------------------------------------
    @staticmethod
    def _inner(one_call_s: float, target_s: float) -> int:
        return int(max(1, min(MAX_INNER, round(target_s / max(one_call_s, 1e-9)))))

    def gemm(self, step: Step, noise: float):
        """hwtune GEMM and numpy BLAS, alternating in rounds of a few samples
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
        one = stats.median(bench.gemm_samples(pool, t, M, K, N, isa=step.isa, warmup=step.warmup,
                                              reps=3, inner=1))
        inner = self._inner(one, step.sample_s)
        hw, ref = [], []
        with threadpool_limits(limits=t, user_api="blas"):
            for _ in range(step.warmup):
                np.matmul(a, b, out=c)
            # Each side gets its own calls-per-sample: a reference 100x slower
            # than hwtune (GEMV on a loaded machine) must not run 100x longer.
            ref_inner = self._inner(stats.median([_time_calls(lambda: np.matmul(a, b, out=c), 1)
                                                  for _ in range(3)]), step.sample_s)
            for k in _rounds(step.reps):
                if t > 1:
                    settle()  # BLAS workers of the previous round must not share our cores
                hw.extend(float(x) for x in bench.gemm_samples(
                    pool, t, M, K, N, isa=step.isa, warmup=1, reps=k, inner=inner))
                np.matmul(a, b, out=c)  # warm, like the hwtune call's warm-up
                ref.extend(_time_calls(lambda: np.matmul(a, b, out=c), ref_inner)
                           for _ in range(k))
        flops = 2.0 * M * K * N
        return [
            _row(step, hw, kind="time", variant=step.isa, value=flops / stats.median(hw) / 1e9,
                 unit="GFLOPS", pinned=pinned, noise=noise,
                 params=dict(step.params, inner=inner)),
            _row(step, ref, kind="time", variant=REFERENCE_VARIANT,
                 value=flops / stats.median(ref) / 1e9, unit="GFLOPS", pinned=None,
                 noise=noise, params=dict(step.params, inner=ref_inner)),
        ]

    def eltwise(self, step: Step, noise: float):
        from hwtune.native import bench
        pool = self.main_pool()
        pinned = self._check_pinned(pool, True)
        n = step.params["n"]
        one = stats.median(bench.eltwise_samples(pool, step.threads, step.op, n, isa=step.isa,
                                                 warmup=step.warmup, reps=3, inner=1))
        inner = self._inner(one, step.sample_s)
        s = bench.eltwise_samples(pool, step.threads, step.op, n, isa=step.isa,
                                  warmup=step.warmup, reps=step.reps, inner=inner)
        med = stats.median(list(s))
        if step.op in ELTWISE_FLOPS:
            value, unit = ELTWISE_FLOPS[step.op] * n / med / 1e9, "GFLOPS"
        else:
            value, unit = n / med / 1e9, "Gelem/s"
        return [_row(step, s, kind="time", variant=step.isa, value=value, unit=unit,
                     pinned=pinned, noise=noise,
                     params=dict(step.params, inner=inner))]

    def corun(self, step: Step, noise: float):
        """Graphi's second microbenchmark: k executors loop the op at once."""
        from hwtune.native import bench
        p = step.params
        with self._pool_mod.Pool(executors=step.executors, threads=step.threads,
                                 pin=step.pin) as pool:
            pinned = self._check_pinned(pool, step.pin) if step.pin else False
            kw = dict(M=p.get("M", 1), K=p.get("K", 1), N=p.get("N", 1), n=p.get("n", 1))
            per_team, s = [], []
            for _ in range(step.reps):
                teams = bench.corun(pool, step.op, isa=step.isa, seconds=step.seconds, **kw)
                per_team.append([float(x) for x in teams])
                s.append(float(sum(teams)))
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
        best, best_spread = None, None
        for attempt in range(1, NOISY_RETRIES + 2):
            rows = fn(step, noise)
            spread = max(r["rel_spread"] for r in rows)
            if best is None or spread < best_spread:
                best, best_spread = rows, spread
            if spread <= noise:
                break
        for r in best:
            r["note"] = f"{attempt} attempt(s)" if attempt > 1 else None
        return best


def _facts(selected: str, allowed: list, opts: ScanOptions, threads: list, l2: int, l3: int):
    return {
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
    from hwtune.native import pool as native_pool

    allowed = list(native_pool.allowed_cpus())
    supported = native_isa.supported_isas()
    selected = native_isa.selected_isa()
    fp = machine.fingerprint()
    l2, l3 = cache_bytes(fp)
    steps = make_plan(opts, n_allowed=len(allowed), supported=supported, selected=selected,
                      l2_bytes=l2, l3_bytes=l3, n_default=fp.get("usable_cpus"))
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
