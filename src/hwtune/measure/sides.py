"""What the interleaving driver times: a Side is one candidate.

warm(n) runs it n times untimed-for-the-result and returns seconds per run
(the driver uses it for time limits and budgets; a side that times batches
of calls also sizes its batches from it); take(k) returns k samples;
outputs(), when the side computes something checkable, returns it by name.
Failures raise HwtuneError: the driver turns them into an 'error' status.
"""

from __future__ import annotations

from typing import Callable, List, Mapping, Optional, Sequence

from hwtune.measure import clock, stats

# Calls per sample are capped: a kernel below ~20 ns is not what hwtune
# times, and the cap keeps a mis-calibration from running for minutes.
MAX_CALLS = 100000


class Side:
    label: str = ""

    def warm(self, n: int) -> Optional[float]:
        """n runs; returns seconds per run (None when it did not run)."""
        return stats.median(self.take(n)) if n > 0 else None

    def take(self, k: int) -> List[float]:
        raise NotImplementedError

    def outputs(self) -> Optional[Mapping[str, object]]:
        return None

    def close(self) -> None:
        pass


class CallSide(Side):
    """A Python callable (numpy's BLAS, onnxruntime, an engine's run):
    each sample is `calls` back-to-back calls, timed together, as seconds
    per call. sample_s: size `calls` at warm-up so a sample lasts about that
    long (median of `calibrate` single calls), else one call per sample.
    around: a context manager factory entered around every batch of calls
    (threadpoolctl's limits for a BLAS side). prime: one untimed call before
    every batch, as a C loop warms up the operands it allocates. cpu_time:
    time this thread's CPU time instead of the wall clock (time spent
    descheduled by other processes does not count; one-thread code only)."""

    def __init__(self, fn: Callable[[], object], *, label: str = "",
                 sample_s: Optional[float] = None, calls: int = 1, calibrate: int = 3,
                 max_calls: int = MAX_CALLS, around: Optional[Callable[[], object]] = None,
                 prime: bool = False, cpu_time: bool = False):
        self.fn, self.label, self.sample_s = fn, label, sample_s
        self.calls, self.calibrate, self.max_calls = int(calls), int(calibrate), max_calls
        self._around, self.prime = around, prime
        self._per_call = clock.cpu_per_call if cpu_time else clock.per_call

    def _timed(self, calls: int) -> float:
        return self._per_call(self.fn, calls)

    def _with(self, body):
        if self._around is None:
            return body()
        with self._around():
            return body()

    def warm(self, n: int) -> float:
        def body():
            for _ in range(max(0, n)):
                self.fn()
            one = stats.median([self._timed(1) for _ in range(max(1, self.calibrate))])
            if self.sample_s is not None:
                self.calls = clock.calls_for(one, self.sample_s, self.max_calls)
            return one
        return self._with(body)

    def take(self, k: int) -> List[float]:
        def body():
            if self.prime:
                self.fn()
            return [self._timed(self.calls) for _ in range(k)]
        return self._with(body)


class LoopSide(Side):
    """A C measurement loop, loop(warmup, reps, inner) -> reps samples of
    seconds per call, each over `inner` calls (hwtune.native.bench's
    gemm_samples and eltwise_samples). warm(n): n warm-up calls and the
    median of `calibrate` single calls, which sizes `inner` so a sample
    lasts about sample_s. take(k): k samples after take_warmup untimed ones
    (every C call allocates fresh operands, so each call warms up again)."""

    def __init__(self, loop: Callable[[int, int, int], Sequence[float]], *, label: str = "",
                 sample_s: Optional[float] = None, inner: int = 1, calibrate: int = 3,
                 take_warmup: int = 1, max_calls: int = MAX_CALLS):
        self.loop, self.label, self.sample_s, self.inner = loop, label, sample_s, int(inner)
        self.calibrate, self.take_warmup, self.max_calls = calibrate, take_warmup, max_calls

    def warm(self, n: int) -> float:
        one = stats.median([float(x) for x in self.loop(n, self.calibrate, 1)])
        if self.sample_s is not None:
            self.inner = clock.calls_for(one, self.sample_s, self.max_calls)
        return one

    def take(self, k: int) -> List[float]:
        return [float(x) for x in self.loop(self.take_warmup, k, self.inner)]


class SampleSide(Side):
    """Samples timed elsewhere (a C measurement loop): take(k) returns
    fn(k), a sequence of k figures (seconds, or rates for a probe).
    warm_fn(n), when given, does the warm-up and returns seconds per run
    (None when unknown)."""

    def __init__(self, fn: Callable[[int], object], *, label: str = "",
                 warm_fn: Optional[Callable[[int], Optional[float]]] = None):
        self.fn, self.label, self._warm = fn, label, warm_fn

    def warm(self, n: int) -> Optional[float]:
        return self._warm(n) if self._warm is not None else None

    def take(self, k: int) -> List[float]:
        return [float(x) for x in self.fn(k)]
