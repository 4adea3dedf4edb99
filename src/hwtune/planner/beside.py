"""The machine's own scaling figures, measured again beside a validation's
samples: every GEMM and element-wise scaling row of the stored scan (the
serial-fraction fits' points), the scan's in-L2, in-L3 and out-of-cache triads,
the pool's empty fork-join, the fork-join of a chain of small matmuls
inside a run (calibrate.forkjoin's figures) and the core-to-core transfer
(calibrate.transfer's), probed before the validation's chunks of samples
(at most one probe every MIN_GAP_S), and, given the graph, the model's
own 1-thread profile. Their medians over the validation are the machine
the validation predicts for: the same kernels at the same thread counts
as the scan, and the model only ever on one thread, so the predictions
still come from the model's 1-thread profiles only.

Why: on this shared 2-vCPU VM the 2-thread speed of the same kernel
switches between states that last seconds to minutes. A GEMM
[64,256]x[512] took 226-236 us on 2 threads in one stretch and 352-385 us
in another against 450-500 us on one (25 probes over ~8 minutes, AMD EPYC
Zen 1, AVX2, nothing else running), and lstm_small's
1x2 runs followed it (24-25 ms vs 31-36 ms, 1x1 44 ms). The scan's figures
are its fastest samples of one moment (machine._least_disturbed), so the
predictions matched the fast state while the validation's medians mixed
both: every 2-thread row of lstm_small, pathnet_small and
phased_lstm_small measured 19-41% slower than predicted in one validation
(issue #13's closing note of 2026-11-28).

Every configuration is predicted from all the probes: its samples come in
chunks interleaved with every other configuration's over the whole
validation, so the probes before its own chunks were a sample of the same
moments, and predicting each from its own (one per chunk, at least the
nearest twelve) only added their noise. deepcpu_lstm_i1024_h1024's four
1x2 rows, one team's work each, were predicted at 31.0, 44.6, 36.6 and
34.7 ms and measured 22.9-27.6 ms; from all probes, two validations in
alternation with it gave worst rows of 39.1% and 28.1% over five models
against 63.5% and 35.1% (AMD EPYC Zen 4, avx512)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

from hwtune.planner.calibrate import (GEMV_OPS, XFER_BYTES, XFER_REPS,
                                      Calibration, _gemv_chain, fit_transfer, fork_per_op,
                                      forked_chain, fresh_engine_profile, profile_times)
from hwtune.measure.stats import median
from hwtune.planner.machine import HostFigures

# Timed calls per probe of a scaling row (a probe's figure is their
# median; a row's, the median over the probes: one before a chunk, at most
# one every MIN_GAP_S), after untimed calls for at least PROBE_WARM_S (by
# the stored row's time; never fewer than PROBE_WARMUP), and the rows of
# more than one thread after PROBE_RAMP_S of work on that many threads:
# each probe's call makes its operands afresh on the calling thread, and a
# core idle before it runs its first milliseconds slow. On a 2-vCPU AMD
# EPYC Zen 3 (avx2) 2-thread calls of [64,512]x[512,512] after 0.2 s of
# work on one core took 665, 620, 402, 385, 347 ... 240 us, steady from the
# 9th; one untimed call and one timed gave
# [64,512]x[512,2048] 1.24-1.60x on two threads where its steady calls ran
# 1.70-2.04x, and every 1x2 row of seven models was
# predicted 12-28% slow, where the stored scan's steady figures predicted
# them within 10% (validation of 2026-12-05). With a 5 ms
# ramp and 2 ms of warm-up the probes gave 1.65x and 1.81x against 1.91x and
# 1.85x steady. A whole probe of a quick scan (its
# triads, fork-joins and transfers too) then takes ~0.54 s here, against
# ~0.38 s with one untimed call and one timed.
PROBE_CALLS = 3
PROBE_WARMUP = 3
PROBE_WARM_S = 0.002
PROBE_RAMP_S = 0.005
# Back-to-back runs of the matmul chain per probe (GEMV_OPS ops of ~0.6 us
# on one thread: ~0.1 ms a run).
CHAIN_RUNS = 5
FORKJOIN_ITERS = 200
# Seconds per probe of a triad row (its best slice, as the scan takes it):
# the scan's out-of-cache row moves ~48 MiB a pass here (~2.4 ms).
TRIAD_S = 0.02
# A probe is skipped when the last one ended less than this ago: a
# sub-millisecond model's validation takes thousands of short chunks
# (deepcpu_lstm_i64_h64: 3,191 probes, ~60 ms each, over half of its 190 s
# validation), and the states probes are for last seconds to minutes.
# Counted from the last probe's end: counted from its start, a probe that
# takes longer than the gap (0.54 s, PROBE_CALLS) came before every chunk,
# and deepcpu_lstm_i64_h64's validation ran 12 minutes without finishing
# (2026-12-05).
MIN_GAP_S = 0.5


def min_gap_s() -> float:
    """MIN_GAP_S, or HWTUNE_PLAN_PROBE_GAP_S when set (the test suite: a
    sub-millisecond model's validation spent most of its time probing, 5 of
    the suite's 26 minutes in two tests)."""
    import os
    raw = os.environ.get("HWTUNE_PLAN_PROBE_GAP_S")
    try:
        return max(0.0, float(raw)) if raw else MIN_GAP_S
    except ValueError:
        return MIN_GAP_S


# The model's own 1-thread profile, taken again in each probe (after one
# plain run): profiled runs while they span less than PROFILE_S, at least
# one. The profile taken once before a validation spans ~0.3 s; in one
# validation its sum put deepcpu_lstm_i64_h256's 1x1 at 4.24 ms against
# 3.40-3.53 ms measured on every 1x1 row (+20-25%), where the one before
# had 3.58 ms against 3.40-3.45 (2-vCPU AMD EPYC Zen 1, avx2, load ~1).
PROFILE_S = 0.02
PROFILE_MAX_RUNS = 50
# Each probe profiles on an engine of its own, opened for it and warmed by
# plain runs for PROFILE_WARM_S (at least one run), as each chunk of the
# validation's samples runs on an engine opened for it. One engine kept
# open for the whole validation profiled deepcpu_lstm_i64_h1024 at
# 38.6-42.1 ms in all 22 of its probes while the 55 engines opened for the
# samples ran 26-29 ms in 52 of their chunks (and ~41 ms in 3): the speed
# of its 16 MiB recurrent-weight stream is drawn once per engine, and its
# every row was predicted 38-56% slow (AMD EPYC Zen 4, avx512, quiet; the
# validation of 2026-11-28, 19:04). 20 engines opened one after another ran
# 25.5-32 ms.
PROFILE_WARM_S = 0.02
# ... but once one probe's profile took PROFILE_LONG_S or more, a probe
# profiles only while the profiles so far took at most PROFILE_SHARE of the
# time since the first probe. A model whose run takes seconds pays a warm
# run and a profiled one per probe: inception_large (12-13 s a run on one
# thread) spent ~24 s in each of its 55 probes, more than its samples
# themselves, and its validation took 41 min (median 0.8%, worst 2.6%; AMD
# EPYC Zen 4, avx512, 2026-11-29). Every other bundled model profiles in
# every probe as validated: the longest, inception_medium, ~4.4 s a probe.
PROFILE_LONG_S = 8.0
PROFILE_SHARE = 0.25


@dataclass
class BesideProbes:
    """Probes of the stored scan's scaling rows, the fork-join and the
    transfer on `cores` threads; take() before each chunk, then figures()
    and calibration()."""
    figs: HostFigures
    cores: int
    gemm: Dict[tuple, List[float]] = field(default_factory=dict)
    eltwise: Dict[tuple, List[float]] = field(default_factory=dict)
    fj_pool: Dict[int, List[float]] = field(default_factory=dict)
    fj_chain: Dict[int, List[float]] = field(default_factory=dict)
    xfer: Dict[int, List[float]] = field(default_factory=dict)  # bytes -> remote - local s
    triad: Dict[tuple, List[float]] = field(default_factory=dict)  # (where, t, n) -> GB/s
    # The graph whose 1-thread profile is taken again (None: not taken);
    # profiled: per profiled run, its ops' events (engine.trace.profiled_runs).
    graph: object = None
    profiled: List[list] = field(default_factory=list)
    probes: int = 0

    def __post_init__(self):
        from hwtune.native.threads import Pool
        self._pool = Pool(executors=1, threads=self.cores, pin=True)
        self._chain = _gemv_chain(GEMV_OPS)
        self._last = None  # clock.Stopwatch since the last probe ended
        self._first = None  # ... since the first
        self._profile_s = 0.0  # seconds the probes' profiles took
        self._profile_max_s = 0.0  # ... the longest one

    def _add(self, name: str, key, values) -> None:
        getattr(self, name).setdefault(key, []).extend(values)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _profile(self) -> None:
        """Profiled 1-thread runs of graph (sequential, one pinned thread)
        spanning PROFILE_S, on an engine opened for this probe and warmed
        for PROFILE_WARM_S."""
        runs = fresh_engine_profile(self.graph, warm_s=PROFILE_WARM_S, warm_runs=1, runs=1,
                                    span_s=PROFILE_S, max_runs=PROFILE_MAX_RUNS)
        self.profiled.extend(runs)

    def one_thread(self) -> Dict[str, float]:
        """workload -> 1-thread seconds over the probes' profiled runs
        (calibrate.profile_times); empty without a graph."""
        if not self.profiled:
            return {}
        from hwtune.engine.runner import workload_keys
        keys = dict(zip((op.name for op in self.graph.ops), workload_keys(self.graph)))
        return profile_times(self.profiled, keys)

    def _chain_per_run(self, t: int) -> float:
        from hwtune.measure import clock
        e = forked_chain(self._chain, t)
        try:
            e.run()
            watch = clock.Stopwatch()
            for _ in range(CHAIN_RUNS):
                e.run()
            return watch.elapsed() / CHAIN_RUNS
        finally:
            e.close()

    def take(self) -> None:
        """One probe of every figure (the rows of one thread count after
        another), unless the last one ended less than MIN_GAP_S ago."""
        from hwtune.measure import clock
        from hwtune.native import bench
        if self._last is not None and self._last.elapsed() < min_gap_s():
            return
        p = self._pool
        counts = sorted({int(r["threads"]) for rows in (self.figs.gemm, self.figs.eltwise,
                                                          self.figs.triads) for r in rows})
        for t in (t for t in counts if t <= self.cores):
            if t > 1:
                self._ramp(t)
            for r in (r for r in self.figs.gemm if int(r["threads"]) == t):
                inner = int(r.get("inner") or 1)
                x = bench.gemm_samples(p, t, r["M"], r["K"], r["N"],
                                       warmup=_warm_calls(r, inner), reps=PROBE_CALLS,
                                       inner=inner)
                self._add("gemm", (r["M"], r["K"], r["N"], t), [median(map(float, x))])
            for r in (r for r in self.figs.eltwise if int(r["threads"]) == t):
                inner = int(r.get("inner") or 1)
                x = bench.eltwise_samples(p, t, r["op"], r["n"], warmup=_warm_calls(r, inner),
                                          reps=PROBE_CALLS, inner=inner)
                self._add("eltwise", (r["op"], r["n"], t), [median(map(float, x))])
            for r in (r for r in self.figs.triads if int(r["threads"]) == t):
                self._add("triad", (r["where"], t, int(r["n"])),
                          [bench.triad(p, t, int(r["n"]), seconds=TRIAD_S)])
        one = self._chain_per_run(1) if self.cores > 1 else 0.0
        for t in range(2, self.cores + 1):
            self._add("fj_pool", t, [bench.forkjoin_pool(p, t, FORKJOIN_ITERS)])
            self._add("fj_chain", t, [fork_per_op(self._chain, one, self._chain_per_run(t), t)])
        if self.cores > 1:
            for nbytes in XFER_BYTES:
                remote, local = bench.xfer(p, nbytes, XFER_REPS)
                d = remote - local
                if not np.all(np.isnan(d)):  # NaN: both threads ran on one CPU
                    self._add("xfer", nbytes, [float(np.nanmedian(d))])
        if self.graph is not None and self._profile_due():
            watch = clock.Stopwatch()
            self._profile()
            took = watch.elapsed()
            self._profile_s += took
            self._profile_max_s = max(self._profile_max_s, took)
        self.probes += 1
        self._last = clock.Stopwatch()

    def _ramp(self, t: int) -> None:
        """PROBE_RAMP_S of the first GEMM row's calls on t threads (none
        without a GEMM row)."""
        from hwtune.measure import clock
        from hwtune.native import bench
        if not self.figs.gemm or PROBE_RAMP_S <= 0:
            return
        r = self.figs.gemm[0]
        watch = clock.Stopwatch()
        while watch.elapsed() < PROBE_RAMP_S:
            bench.gemm_samples(self._pool, t, r["M"], r["K"], r["N"], warmup=0, reps=1)

    def _profile_due(self) -> bool:
        """Every probe profiles until one profile took PROFILE_LONG_S; from
        then on, one does while the profiles so far took at most
        PROFILE_SHARE of the time since the first probe."""
        from hwtune.measure import clock
        if self._first is None:
            self._first = clock.Stopwatch()
        if self._profile_max_s < PROFILE_LONG_S:
            return True
        return self._profile_s <= PROFILE_SHARE * self._first.elapsed()

    def figures(self) -> HostFigures:
        """The stored scan with every probed scaling row's time replaced by
        its median over the probes."""
        def med(name, key, row):
            xs = getattr(self, name).get(key)
            return dict(row, time_s=median(xs)) if xs else row
        gemm = [med("gemm", (r["M"], r["K"], r["N"], int(r["threads"])), r)
                for r in self.figs.gemm]
        elt = [med("eltwise", (r["op"], r["n"], int(r["threads"])), r)
               for r in self.figs.eltwise]
        levels = {w: dict(getattr(self.figs, w)) for w in ("l2", "l3", "dram")}
        for key in self.triad:
            where, t, _ = key
            levels[where][t] = median(self.triad[key])
        return replace(self.figs, gemm=gemm, eltwise=elt, **levels)

    def calibration(self, cal: Calibration) -> Calibration:
        """cal with its fork-join and transfer figures from the probes'
        medians: a run's region is the
        larger of the pool's empty one and the chain's, as calibrate.forkjoin
        takes it (without its chain of adds, whose figure was the smallest of
        the three in every calibration here); the transfer is fitted as
        calibrate.transfer fits it, over each size's median."""
        pool = {t: median(xs) for t, xs in self.fj_pool.items()}
        run = {t: max(pool[t], median(self.fj_chain[t])) for t in pool if self.fj_chain.get(t)}
        xfer_s, xfer_bps = cal.xfer_s, cal.xfer_bps
        if len(self.xfer) == len(XFER_BYTES):
            xfer_s, xfer_bps = fit_transfer(
                XFER_BYTES, [max(0.0, median(self.xfer[b]))
                             for b in XFER_BYTES])
        return replace(cal, forkjoin=run or dict(cal.forkjoin),
                       forkjoin_pool=pool or dict(cal.forkjoin_pool), xfer_s=xfer_s,
                       xfer_bps=xfer_bps)

    def summary(self) -> Dict[str, object]:
        """The probed figures by name, for the plan document."""
        out: Dict[str, object] = {"probes": self.probes}
        for (M, K, N, t), xs in self.gemm.items():
            out[f"gemm {M}x{K}x{N} {t}t"] = _quantiles(xs)
        for (op, n, t), xs in self.eltwise.items():
            out[f"{op} n={n} {t}t"] = _quantiles(xs)
        for t, xs in self.fj_pool.items():
            out[f"forkjoin pool {t}t"] = _quantiles(xs)
        for t, xs in self.fj_chain.items():
            out[f"forkjoin chain {t}t"] = _quantiles(xs)
        for b, xs in self.xfer.items():
            out[f"transfer {b // 1024} KiB"] = _quantiles(xs)
        for (where, t, n), xs in self.triad.items():
            out[f"triad {where} n={n} {t}t (GB/s)"] = _quantiles(xs)
        if self.profiled:
            out["model run, 1 thread (op total)"] = _quantiles(
                [sum(ev.end_s - ev.start_s for ev in events) for events in self.profiled])
        return out


def _warm_calls(row: dict, inner: int) -> int:
    """Untimed samples before a probe's timed ones (a sample: `inner`
    calls): PROBE_WARM_S by the stored row's seconds per call (time_s), at
    least PROBE_WARMUP."""
    per_sample = float(row.get("time_s") or 0.0) * max(1, inner)
    if per_sample <= 0:
        return PROBE_WARMUP
    return max(PROBE_WARMUP, int(np.ceil(PROBE_WARM_S / per_sample)))


def _quantiles(xs: List[float]) -> Tuple[float, float, float]:
    """(min, median, max) seconds."""
    return float(np.min(xs)), median(xs), float(np.max(xs))
