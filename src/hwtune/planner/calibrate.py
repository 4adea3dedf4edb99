"""What the cost model and the simulator need measured on this host beyond
the scan, all timed through hwtune.measure:

  - every op's 1-thread time: profiled runs of the model on one executor of
    one thread (sequential, the engine's own events), median per workload;
  - the pool's fork-join per thread count (the C loop of hwtune scan's
    foundation benchmark);
  - the engine's overheads per scheduler, read off small graphs of
    microsecond adds: a run's own start on one executor (one op), an op an
    executor goes on with (a chain, sequential), a decision in the serial
    section (a chain whose ops are costed above the inline threshold, one
    executor), an op handed to a waiting executor and a run's own cost on
    two executors (chains of fork-join pairs of two lengths). Each is the
    value that makes the simulator, given the others, reproduce the
    measured latency (bisection: latency grows with every overhead).

  - what a read costs when another core wrote the data last: a buffer
    written on one core and read on the other against read back on the
    first (engine/bench/xfer.c), fitted as a per-transfer latency plus
    bytes over a rate (the simulator's transfer term).

  - how long an idle executor polls before it parks, and how long a parked
    one takes to run again once woken (engine/bench/wake.c: the
    simulator's wake term).

All are measured again until two attempts agree (calibrate()); the spread
over the attempts is kept with the figures.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from hwtune.native.simulate import Overheads, Transfer

# Profiled runs per 1-thread profile: per-workload medians pool every
# instance of a workload (an LSTM's 30 steps share one), so 5 runs hold
# 150+ samples of most workloads; lstm_small's op medians moved by < 2%
# between 5 and 21 runs here.
PROFILE_RUNS = 5
# ... after back-to-back plain runs for at least PROFILE_WARMUP_S, and more
# profiled runs while they span less than PROFILE_SPAN_S (at most
# PROFILE_MAX_RUNS). With 2 warm-up runs and 5 profiled ones (7 ms in all,
# right after the engine opened) deepcpu_lstm_i256_h64's profile summed to
# 0.965 ms a run against 0.640-0.656 ms measured in the same validation
# (+47-51% on every 1x1 row); after 0.2 s of plain runs, 30 profiled runs
# summed to 0.647-0.652 ms in three rounds, plain runs 0.649-0.656 ms (AMD
# EPYC Zen 1, AVX2, load ~1).
PROFILE_WARMUP_S = 0.2
PROFILE_SPAN_S = 0.1
PROFILE_MAX_RUNS = 100
# The runs are split over this many engines, each opened after the last
# closed and warmed as above (the later ones by at least one run): a
# model's speed can be drawn once per engine. Two profiles of
# deepcpu_lstm_i64_h1024, each on one engine, summed to 39.8 and 40.3 ms a
# run while the validation's 55 engines ran 26-29 ms in 52 of their 55
# chunks of samples, and 20 engines opened one after another ran 25.5-32 ms
# (AMD EPYC Zen 4, avx512, quiet): a 16 MiB weight
# stream from the shared L3, whose share an engine's pages get varies.
PROFILE_ENGINES = 3
# Calibration graphs: adds of 64 floats (~40 ns each here), long enough
# that a run lasts ~0.1-1 ms, so the 1-2 us of a Python call stays < 2%.
CHAIN_OPS = 400
# The fork-join chain of matmuls: 64 x 64 weights (16 KiB, in L1/L2 on every
# core) and 1 x 64 activations, ~0.6 us an op on one thread here, the shape
# of the DeepCPU LSTMs' smallest steps; 200 of them last ~0.1 ms a run.
GEMV_N = 64
GEMV_OPS = 200
PAIR_STAGES = 150
PAIR_STAGES_SHORT = 30
ADD_N = 64
# Costs given to every op of the costed chains: above the engine's 2 us
# inline threshold (levels.c), so every op goes through the scheduler.
HEAVY_COST = 1e-5
CALIBRATION_REPS = 21
# Back-to-back runs per sample: 50 runs of the 400-op chain last ~1-2 ms
# here, long enough that the Python call around them is < 1%.
RUNS_PER_SAMPLE = 50
FORKJOIN_ITERS = 2000
FORKJOIN_REPS = 9
# Core-to-core transfer sizes: 1 KiB (an LSTM's h: 256 B-1 KiB) to 256 KiB,
# half this host's 512 KiB L2, so the buffer stays in the writer's cache;
# 1 MiB measured ~17 GB/s against ~19.5 GB/s at 64-256 KiB here (2-core AMD
# EPYC Zen 1, load ~3-5): past L2 it times the L3 and memory instead.
XFER_BYTES = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10)
# Rounds per size: one round of 256 KiB lasts ~25 us, 41 rounds ~1 ms. Each
# size's figure is the median over rounds of remote - local (the same
# round's two reads), not the fastest rounds: on this VM the fastest remote
# reads are the ones the host ran while both vCPUs shared one core's caches
# (a calibration at load ~2.5, 2-core AMD EPYC Zen 1, fitted 44 ns + 170
# GB/s from fastest reads: no transfer at all; paired medians of three
# repeats at load ~1.7 gave 0.31-0.33 us at 1 KiB, 1.9-2.7 us at 16 KiB,
# 2.9-4.6 us at 64 KiB, 13.5-21.7 us at 256 KiB).
XFER_REPS = 41
# Passes over the sizes, XFER_GAP_S apart: the cost moves with where the
# host runs the two vCPUs. Two 41-round reads of 64 KiB a second apart in
# one process measured +3.55 us then +0.29 us (and a plain pthread ping-pong
# moved alike), while the 2-thread FMA peak stayed 2x the 1-thread one
# (1.99x both times): two separate cores whose distance changes (another
# core complex, then the same one, as a Zen 1 host may place them). The
# validation's medians span minutes of such moves, so the figure is the
# median over passes spread over ~2 s.
XFER_PASSES = 7
XFER_GAP_S = 0.3
# Wake-ups of a parked thread, each after it slept WAKE_GAP_S: a parked
# waiter ran again 13.7-15.5 us after the post for sleeps of 5-200 us
# (medians of 41; 9.5 us after 1 us, 35 us after 2 ms, the host's idle
# states deepening), against 0.1 us for one still polling (AMD EPYC Zen 4,
# 2 vCPUs under KVM). 100 us is the idle stretch of a
# second executor beside a sub-millisecond chain (deepcpu_lstm_i64_h64).
WAKE_GAP_S = 100e-6
WAKE_REPS = 41
# Schedulers whose idle masters park at once: the shared queue waits on a
# condition variable (sched_queue.c); the others poll their slot for the
# engine's spin first (slots.h, timed by bench.spin_s).
PARKS_AT_ONCE = ("shared-queue",)


def fastest(m) -> float:
    """A calibration case's figure: its fastest sample (each sample is many
    back-to-back runs), else its median. Other processes only add time, and
    a calibration's figures are differences of such times (a chain forked
    against the same chain on one thread, two executors against one):
    three calibrations at load ~9.7 here (2-core AMD EPYC Zen 1) spread
    5-7% on the serial-section cost from fastest samples, 24-177% from
    medians, and the 1-executor run costs 1-3% either way."""
    xs = [x for x in (getattr(m, "samples", None) or []) if x > 0]
    return float(min(xs)) if xs else float(m.median)


# Bumped when what a calibration measures changes; a stored one of another
# version is measured again (2: fork-join inside a run, 3: also of ops that
# read each other's lines, see forkjoin(), 4: also the pool's empty region
# alone, which the serial-fraction fits of the scan's loops take, 5: every
# figure from its cases' fastest samples, see fastest(), 6: also the
# core-to-core transfer, see transfer(), 7: also the spin before parking and
# a parked waiter's wake-up, see waking()).
CALIBRATION_VERSION = 7


@dataclass
class Calibration:
    """Per scheduler: overheads for one executor and for several, and a
    run's own cost with 1 and with 2 executors; fork-join per thread count."""
    forkjoin: Dict[int, float] = field(default_factory=dict)
    forkjoin_pool: Dict[int, float] = field(default_factory=dict)  # an empty region alone
    overheads: Dict[str, dict] = field(default_factory=dict)  # sched -> Overheads fields
    run_s: Dict[str, Dict[int, float]] = field(default_factory=dict)  # sched -> {executors: s}
    add_s: float = 0.0  # one calibration add, profiled
    # data another core wrote last: seconds per transfer and bytes/s (0: one core)
    xfer_s: float = 0.0
    xfer_bps: float = 0.0
    # an idle executor's polling before it parks, and a parked one's wake-up
    # (0: one core, nothing waits on another)
    spin_s: float = 0.0
    wake_s: float = 0.0
    version: int = CALIBRATION_VERSION
    # How far repeated calibrations were apart: per figure (figures()), the
    # range over every attempt relative to the figure kept; attempts taken,
    # and whether two of them agreed (AGREE_REL / AGREE_ABS_*).
    spread: Dict[str, float] = field(default_factory=dict)
    attempts: int = 1
    settled: bool = True

    def to_json(self) -> dict:
        return asdict(self)

    def figures(self) -> Dict[str, float]:
        """Every measured figure by a flat name (forkjoin/2,
        run_s/corun/2, dispatch_s/corun, ...)."""
        out = {f"forkjoin/{t}": v for t, v in self.forkjoin.items()}
        out.update({f"forkjoin_pool/{t}": v for t, v in self.forkjoin_pool.items()})
        for sched, runs in self.run_s.items():
            out.update({f"run_s/{sched}/{n}": v for n, v in runs.items()})
        for sched, o in self.overheads.items():
            out.update({f"{k}/{sched}": v for k, v in o.items()})
        out["xfer_s"] = self.xfer_s
        out["xfer_bps"] = self.xfer_bps
        out["spin_s"] = self.spin_s
        out["wake_s"] = self.wake_s
        return out

    def transfer(self):
        """The simulator's transfer term (hwtune.native.simulate.Transfer)."""
        return Transfer(latency_s=self.xfer_s, bytes_per_s=self.xfer_bps)

    @classmethod
    def from_json(cls, doc: dict) -> "Calibration":
        return cls(forkjoin={int(k): v for k, v in doc.get("forkjoin", {}).items()},
                   forkjoin_pool={int(k): v for k, v in doc.get("forkjoin_pool", {}).items()},
                   overheads=dict(doc.get("overheads", {})),
                   run_s={s: {int(k): v for k, v in d.items()}
                          for s, d in doc.get("run_s", {}).items()},
                   add_s=float(doc.get("add_s", 0.0)), xfer_s=float(doc.get("xfer_s", 0.0)),
                   xfer_bps=float(doc.get("xfer_bps", 0.0)),
                   spin_s=float(doc.get("spin_s", 0.0)), wake_s=float(doc.get("wake_s", 0.0)),
                   version=int(doc.get("version", 1)),
                   spread=dict(doc.get("spread", {})), attempts=int(doc.get("attempts", 1)),
                   settled=bool(doc.get("settled", True)))

    def overheads_for(self, scheduler: str, executors: int, scale: float = 1.0,
                      forkjoin_extra_s: float = 0.0) -> Overheads:
        """The simulator's overheads of a scheduler with `executors`
        executors (or workers) on a machine whose engine costs are this
        host's times scale: a run's own cost as measured here with one
        executor, or with two (both busy: calibrate's pairs graphs), times
        scale; beyond two, the machine's extra fork-join over the executors
        (forkjoin_extra_s)."""
        o = self.overheads.get(scheduler, {})
        runs = self.run_s.get(scheduler, {})
        r1 = runs.get(1, 0.0)
        r2 = runs.get(2, r1)
        run = (r1 if executors < 2 else max(r1, r2)) * scale + (
            forkjoin_extra_s if executors > 2 else 0.0)
        return Overheads(inline_s=o.get("inline_s", 0.0) * scale,
                         dispatch_s=o.get("dispatch_s", 0.0) * scale,
                         section_s=o.get("section_s", 0.0) * scale, run_s=run,
                         **self.wake_terms(scheduler, scale))

    def wake_terms(self, scheduler: str, scale: float = 1.0) -> dict:
        """The simulator's park_s and wake_s for a scheduler's waiters: the
        wake-up times scale, as the other engine costs (the spin is a count
        of polls, timed here)."""
        return {"park_s": 0.0 if scheduler in PARKS_AT_ONCE else self.spin_s,
                "wake_s": self.wake_s * scale}


# -- 1-thread profiles ---------------------------------------------------------

def profile_1t(graph, runs: int = PROFILE_RUNS, progress=None,
               plain: Optional[List[float]] = None) -> Dict[str, float]:
    """workload -> median 1-thread seconds of every op of graph (profiled
    sequential runs on one pinned thread, on PROFILE_ENGINES engines one
    after another). plain, when given, gets the seconds of the warm-up's
    plain (unprofiled) runs past the first half of each engine's warm-up
    (whole_run_s)."""
    from hwtune.engine.runner import workload_keys
    from hwtune.native.engine import shared_lowering
    keys = dict(zip((op.name for op in graph.ops), workload_keys(graph)))
    if progress:
        progress(f"profiling {graph.name}: {runs} or more runs on 1 thread, on "
                 f"{PROFILE_ENGINES} engines each warmed for {PROFILE_WARMUP_S:g} s")
    history: list = []
    per_engine = -(-runs // PROFILE_ENGINES)
    with shared_lowering():  # one lowered graph; each engine binds its own params
        for i in range(PROFILE_ENGINES):
            history += fresh_engine_profile(
                graph, warm_s=PROFILE_WARMUP_S, warm_runs=2 if i == 0 else 1,
                runs=per_engine, span_s=PROFILE_SPAN_S / PROFILE_ENGINES,
                max_runs=PROFILE_MAX_RUNS // PROFILE_ENGINES, plain=plain)
    return profile_times(history, keys)


def whole_run_s(plain: List[float]) -> Optional[float]:
    """A model's whole 1-thread run, plain (no profiling events): the median
    of the warm-up runs profile_1t kept; None without any."""
    xs = [x for x in plain if x > 0]
    return float(np.median(xs)) if xs else None


# The order a scheduler runs the ops in changes their 1-thread times: on one
# pinned thread pathnet_small's ops summed to 17.6 ms in the sequential
# order (each module's conv, relu and pool one after another) and to
# 20.8-21.4 ms in the shared queue's, critical-path's and corun's (each
# level's convs, then their relus: a relu's input has left the L2 by then),
# its relus 1.57 ms against 2.80-3.74 (AMD EPYC Zen 4, avx512),
# and every such row was predicted 16-27% fast from the
# sequential profile. So each scheduler that does not run the plan's order
# is profiled on one thread too, interleaved with the sequential order on
# fresh engines, and its ops' times are that order's over the sequential
# one's (order_scales), times the 1-thread profile the prediction uses.


# The orders are compared round by round: each round opens one fresh engine
# per order (the sequential one included), the engines' order rotated from
# round to round, and an order's factor is the median over the rounds of its
# fastest run over the sequential engine's fastest of the same round (a
# disturbance only adds time). This VM's speed
# flips for stretches of seconds: phased_lstm_small's four orders all ran
# 42-46 ms a run for five rounds, then 28-31 ms for four (2-vCPU AMD EPYC
# Zen 3, avx2). The rule before this one, each
# order's least per-engine medians over three engines taken apart, set one
# order's fast stretch against another's slow one: it gave resnet18's three
# other orders 0.87-0.90x and phased_lstm_small's critical-path 0.81x, and
# their 1x1 rows were predicted 12-26% fast (the validation of 2026-12-04
# 21:30), while in rounds of rotated engines every order of resnet18 ran
# within 1% of the sequential one (least and median of 12 engines each) and
# phased_lstm_small's others 5-7% above it.
ORDER_ROUNDS = 5
# An order's factor stands when at least this many of the rounds put its
# run on the same side of the sequential one's, else it is 1 (the order
# does not show): a round's ratio moved by up to ~10% in the data above.
ORDER_AGREE = 4
# ... and when it stands out of the rounds' own spread: |log factor| above
# ORDER_Z standard errors of a median of the rounds' log ratios (1.2533 x
# 1.4826 x their median absolute deviation / sqrt(rounds)). Where a model's
# speed is drawn per engine, the side test alone let chance through: in 9
# rotated rounds (2-vCPU AMD EPYC Zen 3, avx2)
# deepcpu_lstm_i64_h1024's shared-queue ratios ran 0.82-1.10, median 0.945,
# and an earlier validation's profile gave it 1.10 where every 1x1 row
# measured within 3% of the sequential one (its shared-queue 1x1 was then
# predicted 12.6% slow); pathnet_small's orders ran 1.18-1.23 (one round
# 1.73), phased_lstm_small's 1.03-1.12 and lstm_medium's 0.99-1.03 (median
# 1.01; its shared-queue 1x1 measured 1.2% above the sequential one): those
# stand. deepcpu_lstm_i1024_h1024's corun (0.90-1.21, median 1.015) and
# pathnet_medium's (0.72-1.05) do not.
ORDER_Z = 2.0
# Each engine profiles for this long after its warm-up (at least two runs).
# With a tenth of it, two or three runs of pathnet_small an engine, and
# each engine's median run, one of two profiles gave its three orders no
# factor (rounds that disagreed) where the runs show +10-15%; with 0.1 s and
# the fastest run, three profiles of three gave shared-queue 1.15-1.42 and
# critical-path 1.11-1.12 (corun 1.00-1.18, same host).
ORDER_SPAN_S = 0.1


def order_scales(graph, ops, rows, op_cost: Callable[[object], Optional[np.ndarray]],
                 progress=None, rounds: int = ORDER_ROUNDS) -> Dict[str, np.ndarray]:
    """Per scheduler row that does not run the plan's order (not in_order):
    per op of ops (OpData, graph.ops order), its 1-thread time in that
    scheduler's order over its time in the sequential order (1 for an op
    either profile lacks). Profiled runs of one pinned thread, in `rounds`
    rounds of one fresh engine per order, rotated (order_factors); op_cost(row):
    the per-op costs of a row that orders by levels."""
    from hwtune.native.engine import shared_lowering
    others = [r for r in rows if not r.in_order]
    if not others:
        return {}
    if progress:
        progress(f"profiling {graph.name} on 1 thread in the order of "
                 f"{', '.join(r.name for r in others)} against the sequential order, "
                 f"{rounds} rounds")
    names: List[Optional[str]] = [None] + [r.name for r in others]
    by_name = {r.name: r for r in others}
    # per order, per round: that round's engine's profiled runs
    history: Dict[Optional[str], list] = {n: [] for n in names}
    per_engine = -(-PROFILE_RUNS // PROFILE_ENGINES)
    with shared_lowering():
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                row = by_name.get(name)
                history[name].append(fresh_engine_profile(
                    graph, warm_s=PROFILE_WARMUP_S / 2, warm_runs=1, runs=per_engine,
                    span_s=ORDER_SPAN_S,
                    max_runs=PROFILE_MAX_RUNS // PROFILE_ENGINES,
                    scheduler=name or "sequential",
                    op_cost=op_cost(row) if row is not None and row.needs_costs else None))
    return {n: order_factors(history[None], history[n], [d.name for d in ops])
            for n in names[1:]}


def order_factors(seq: List[list], other: List[list], op_names: List[str],
                  agree: int = ORDER_AGREE) -> np.ndarray:
    """Per op of op_names, its time in one order over the sequential order's,
    from paired rounds (seq[i], other[i]: round i's engines' profiled runs):
    the run factor is the median over the rounds of the order's fastest run
    (its span: _run_total) over the sequential one's; each op's own factor,
    the median of its per-round ratios, is scaled so that the ops' summed
    sequential times grow by the run factor. All ones when fewer than
    `agree` rounds put the order on the same side or the run factor is
    within the rounds' spread (ORDER_Z: the order does not show), and for
    an op a round lacks in either order."""
    from hwtune.engine.trace import op_medians
    ones = np.ones(len(op_names))
    pairs = [(s, o) for s, o in zip(seq, other) if s and o]
    totals = [(_run_total(s), _run_total(o)) for s, o in pairs]
    run_ratio = [to / ts for ts, to in totals if ts > 0 and to > 0]
    above = sum(r > 1 for r in run_ratio)
    if not run_ratio or max(above, len(run_ratio) - above) < min(agree, len(pairs)):
        return ones
    logs = np.log(run_ratio)
    centre = float(np.median(logs))
    spread = 1.4826 * float(np.median(np.abs(logs - centre)))
    if abs(centre) <= ORDER_Z * 1.2533 * spread / np.sqrt(len(logs)):
        return ones
    factor = float(np.median(run_ratio))
    meds = [(op_medians(s), op_medians(o)) for s, o in pairs]
    per_op, base = ones.copy(), np.zeros(len(op_names))
    for j, name in enumerate(op_names):
        ratios = [mo[name] / ms[name] for ms, mo in meds
                  if ms.get(name, 0) > 0 and mo.get(name, 0) > 0]
        if ratios:
            per_op[j] = float(np.median(ratios))
            base[j] = float(np.median([ms[name] for ms, _ in meds if ms.get(name, 0) > 0]))
    if base.sum() > 0 and (base * per_op).sum() > 0:
        per_op *= factor * base.sum() / (base * per_op).sum()
    return per_op


def _run_total(runs: list) -> float:
    """The least over profiled runs of a run's span: its first op's start to
    its last op's end, on one thread its ops' times and the scheduler's own
    work between them. The simulator charges that work a decision of the
    serial section (section_s), calibrated on a chain of tiny adds at 4-12
    ns an op here, where deepcpu_lstm_i64_h64's critical-path and corun
    runs on one thread took 0.156-0.157 ms at their fastest against the
    sequential engine's 0.145 (~60 ns more per op; its ops' summed times
    the same in every order), and their 1x1 rows were predicted 7% fast
    against the sequential 1x1 measured in the same rounds (2-vCPU AMD EPYC
    Zen 3, avx2; validation of 2026-12-05 10:22). With summed op times
    their factors were 1.00."""
    totals = [max(ev.end_s for ev in events) - min(ev.start_s for ev in events)
              for events in runs if events]
    return float(min(totals)) if totals else 0.0


def fresh_engine_profile(graph, *, warm_s: float, warm_runs: int, runs: int, span_s: float,
                         max_runs: int, scheduler: str = "sequential",
                         op_cost: Optional[np.ndarray] = None,
                         plain: Optional[List[float]] = None) -> list:
    """Profiled runs of graph on an engine opened for them (one pinned
    thread, the sequential scheduler unless told) and closed after: plain
    runs for warm_s (at least warm_runs), then `runs` profiled runs and
    more while they span less than span_s (at most max_runs). plain, when
    given, gets the seconds of each plain run that started past half of
    warm_s (an engine's first milliseconds run slow: validate.REWARM_S)."""
    from hwtune.measure import clock
    from hwtune.engine.trace import profiled_runs
    from hwtune.engine.instance import NativeEngine
    engine = NativeEngine(graph, executors=1, threads=1, scheduler=scheduler, pin=True,
                          op_cost=op_cost)
    try:
        warm, n = clock.Stopwatch(), 0
        while n < warm_runs or warm.elapsed() < warm_s:
            started = warm.elapsed()
            engine.run()
            if plain is not None and started >= warm_s / 2:
                plain.append(warm.elapsed() - started)
            n += 1
        span, out = clock.Stopwatch(), profiled_runs(engine, graph, runs)
        while span.elapsed() < span_s and len(out) < max_runs:
            out += profiled_runs(engine, graph, 1)
        return out
    finally:
        engine.close()


def profile_times(history: list, keys: Dict[str, str]) -> Dict[str, float]:
    """workload -> 1-thread seconds from profiled runs (per run, its ops'
    events; keys: op name -> workload key)."""
    from hwtune.measure.stats import median
    samples: Dict[str, List[float]] = {}
    for events in history:
        for ev in events:
            samples.setdefault(keys[ev.op_name], []).append(ev.end_s - ev.start_s)
    out = {wk: median(xs) for wk, xs in samples.items()}
    # A run lasts the sum of its ops, and the median of a right-skewed op
    # time under-counts its share of that sum: per-workload medians set the
    # ops' relative times, the median run's op total sets their sum. Summed
    # medians were 1-6% below the median run's op total on the bundled
    # LSTMs and PathNet here (9 profiled runs, 2-core AMD EPYC).
    count: Dict[str, int] = {}
    for ev in history[0] if history else []:  # the ops that run (folded ones do not)
        count[keys[ev.op_name]] = count.get(keys[ev.op_name], 0) + 1
    per_run = median([sum(ev.end_s - ev.start_s for ev in events) for events in history
                      if events])
    summed = sum(out[wk] * count.get(wk, 0) for wk in out)
    if per_run > 0 and summed > 0:
        out = {wk: t * per_run / summed for wk, t in out.items()}
    return out


# -- fork-join ---------------------------------------------------------------------

def forkjoin(cores: int, progress=None) -> Tuple[Dict[int, float], Dict[int, float]]:
    """(in a run, alone): threads -> seconds a fork-join region costs an op
    inside a run, 2..cores threads, and an empty region of the pool alone
    (what the scan's loops pay per call). In a run: the largest of an empty region of the pool (the C loop) and
    what forking every op of a chain costs per op over the same chain on
    one thread, its work split evenly (all sampled interleaved, back to
    back), for two chains: tiny adds (each thread reads the part of its
    input it wrote itself) and tiny matmuls 1 x GEMV_N by GEMV_N x GEMV_N
    (each thread reads the whole input, half of it written by the other
    core: an LSTM step, an MLP layer). An empty region measured 0.2 us here,
    the adds ~0.3 us per op, the matmuls 1.1-1.5 us (the input's lines cross
    between cores both ways, 2-core AMD EPYC, load ~3): with the adds' figure
    the 1x2 runs of the DeepCPU LSTMs (1-2 us matmuls and cells) were
    predicted 30-70% faster than they ran, their ops measured slower on two
    threads than on one."""
    from hwtune.measure import FixedSampling, interleave
    from hwtune.measure.engine import EngineSide
    from hwtune.measure.sides import SampleSide
    from hwtune.native import bench
    from hwtune.native.threads import Pool
    counts = list(range(2, cores + 1))
    if not counts:
        return {}, {}
    if progress:
        progress(f"fork-join of the pool and inside a run, {counts[0]}..{counts[-1]} threads")
    chains = (_chain(CHAIN_OPS), _gemv_chain(GEMV_OPS))
    pool = Pool(executors=1, threads=cores, pin=True)
    engines = []
    try:
        sides = [SampleSide(lambda k, t=t: [bench.forkjoin_pool(pool, t, FORKJOIN_ITERS)
                                            for _ in range(k)], label=f"{t} threads")
                 for t in counts]
        for chain in chains:
            for t in [1] + counts:
                e = forked_chain(chain, t)
                engines.append(e)
                sides.append(EngineSide(e, label=f"{chain.name} forked on {t}",
                                        runs=RUNS_PER_SAMPLE))
        got = interleave(sides, FixedSampling(FORKJOIN_REPS), raise_errors=True)
    finally:
        for e in engines:
            e.close()
        pool.close()
    out = {t: fastest(m) for t, m in zip(counts, got)}
    pool_alone = dict(out)
    per_chain = len(counts) + 1
    for j, chain in enumerate(chains):
        runs = [fastest(m) for m in got[len(counts) + j * per_chain:][:per_chain]]
        for i, t in enumerate(counts):
            out[t] = max(out[t], fork_per_op(chain, runs[0], runs[i + 1], t))
    return out, pool_alone


def forked_chain(chain, t: int):
    """A sequential engine that forks every op of chain over t threads."""
    from hwtune.engine.instance import NativeEngine
    return NativeEngine(chain, executors=1, threads=t, scheduler="sequential", pin=True,
                        op_threads={op.name: t for op in chain.ops})


def fork_per_op(chain, one_s: float, forked_s: float, t: int) -> float:
    """A fork-join region's cost per op: a run of chain forked on t threads
    (forked_s) over the chain's own work split evenly (one_s / t)."""
    return (forked_s - one_s / t) / len(chain.ops)


# -- core-to-core transfer ----------------------------------------------------------

def transfer(cores: int, progress=None) -> Tuple[float, float]:
    """(seconds per transfer, bytes/s): what reading a buffer another core
    just wrote costs over reading it back on the writing core, per size of
    XFER_BYTES (median over rounds, see XFER_REPS), fitted as latency +
    bytes / rate (fit_transfer). (0, 0) with one core: nothing crosses."""
    from hwtune.native import bench
    from hwtune.native.threads import Pool
    if cores < 2:
        return 0.0, 0.0
    if progress:
        progress(f"core-to-core transfer: {len(XFER_BYTES)} sizes, {XFER_REPS} rounds each")
    pool = Pool(executors=1, threads=2, pin=True)
    diffs: List[List[np.ndarray]] = [[] for _ in XFER_BYTES]
    try:
        for i in range(XFER_PASSES):
            if i:
                time.sleep(XFER_GAP_S)
            for j, nbytes in enumerate(XFER_BYTES):
                remote, local = bench.xfer(pool, nbytes, XFER_REPS)
                diffs[j].append(remote - local)
    finally:
        pool.close()
    if all(np.all(np.isnan(d)) for ds in diffs for d in ds):
        return 0.0, 0.0  # both threads on one CPU: pinning did not hold
    extra = [max(0.0, float(np.nanmedian(np.concatenate(ds)))) for ds in diffs]
    return fit_transfer(XFER_BYTES, extra)


def fit_transfer(sizes, extra) -> Tuple[float, float]:
    """(seconds per transfer, bytes/s): least squares of extra seconds =
    latency + bytes / rate over the sizes, each residual relative to its
    size's extra (the tensors models hand between cores are 256 B-64 KiB:
    unweighted, the 256 KiB point alone set the line, and 16 KiB measured
    twice what it predicted); a negative latency is 0, and extras that do
    not grow with the size (bytes adding < 1% at the largest) are all
    latency (rate 0: no byte term)."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(extra, dtype=float)
    w = 1.0 / np.maximum(y, max(float(y.max()), 1e-12) * 1e-3)
    slope, latency = np.polyfit(x, y, 1, w=w)
    if slope * x.max() <= 0.01 * abs(y.mean()):  # the largest size's bytes add < 1%
        return max(0.0, float(np.mean(y))), 0.0
    if latency < 0:  # through the origin instead
        return 0.0, float(np.dot(x, x) / np.dot(x, y))
    return float(latency), float(1.0 / slope)


# -- parking and waking ----------------------------------------------------------

def waking(cores: int, progress=None) -> Tuple[float, float]:
    """(spin seconds, wake seconds): how long an idle executor polls its
    slot before it parks (bench.spin_s), and the median over WAKE_REPS
    rounds of how long a thread parked for WAKE_GAP_S takes to run again
    after another core wakes it. (0, 0) with one core."""
    from hwtune.native import bench
    from hwtune.native.threads import Pool
    if cores < 2:
        return 0.0, 0.0
    if progress:
        progress(f"parking: the engine's spin, and {WAKE_REPS} wake-ups of a parked thread")
    pool = Pool(executors=1, threads=2, pin=True)
    try:
        wake = float(np.median(bench.wake(pool, WAKE_GAP_S, WAKE_REPS)))
    finally:
        pool.close()
    return bench.spin_s(), wake


# -- engine overheads ------------------------------------------------------------

def _chain(n: int):
    from hwtune.graph.generators.builder import Builder
    b = Builder("plan-calibration-chain")
    b.input("x0", (ADD_N,), init="normal")
    b.input("b", (ADD_N,), init="normal")
    for i in range(n):
        b.op(f"x{i + 1}", "add", [f"x{i}", "b"])
    b.output(f"x{n}")
    return b.build()


def _gemv_chain(n: int):
    """x -> x W, n times: 1 x GEMV_N by GEMV_N x GEMV_N matmuls."""
    from hwtune.graph.generators.builder import Builder
    b = Builder("plan-calibration-gemv")
    b.input("x0", (1, GEMV_N), init="normal")
    b.input("w", (GEMV_N, GEMV_N), init="normal")
    for i in range(n):
        b.op(f"x{i + 1}", "matmul", [f"x{i}", "w"])
    b.output(f"x{n}")
    return b.build()


def _pairs(stages: int):
    """x -> (x + b, x + c) -> their sum, repeated: every stage hands one op
    to the second executor."""
    from hwtune.graph.generators.builder import Builder
    b = Builder("plan-calibration-pairs")
    b.input("x0", (ADD_N,), init="normal")
    b.input("b", (ADD_N,), init="normal")
    b.input("c", (ADD_N,), init="normal")
    for i in range(stages):
        b.op(f"l{i}", "add", [f"x{i}", "b"])
        b.op(f"r{i}", "add", [f"x{i}", "c"])
        b.op(f"x{i + 1}", "add", [f"l{i}", f"r{i}"])
    b.output(f"x{stages}")
    return b.build()


def _single():
    return _chain(1)


def _solve(f: Callable[[float], float], target: float, hi: float = 1e-3) -> float:
    """x >= 0 with f(x) = target for an increasing f (0 when f(0) >= target)."""
    if f(0.0) >= target:
        return 0.0
    while f(hi) < target and hi < 1.0:
        hi *= 4
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class _Case:
    key: str
    graph: object
    scheduler: str
    executors: int
    costed: bool


def engine_overheads(schedulers, progress=None, reps: int = CALIBRATION_REPS,
                     transfer=None, spin_s: float = 0.0,
                     wake_s: float = 0.0) -> Tuple[Dict[str, dict], Dict[str, Dict[int, float]], float]:
    """(scheduler -> overheads, scheduler -> {executors: run start}, one
    add's seconds) from latencies measured interleaved on this host (two
    executors are only measured when the host has two cores). transfer: the
    simulator's transfer term the fits run with (the pairs graphs hand
    every stage's input to the other core: without it, a dispatch's figure
    would hold the transfers the predictions charge again). spin_s, wake_s:
    the wake term the fits run with (a pairs graph's run ends with one
    master parked on the shared queue's condition: without it, a run's
    own cost would hold the wake-up the predictions charge again)."""
    from hwtune.measure import FixedSampling, interleave
    from hwtune.engine.trace import op_medians, profiled_runs
    from hwtune.measure.engine import EngineSide
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.threads import allowed_cpus
    two = len(allowed_cpus()) >= 2
    chain, single = _chain(CHAIN_OPS), _single()
    pairs, short = _pairs(PAIR_STAGES), _pairs(PAIR_STAGES_SHORT)
    cases: List[_Case] = []
    for s in schedulers:
        cases.append(_Case(f"{s.name}/run1", single, s.name, 1, False))
        cases.append(_Case(f"{s.name}/chain", chain, s.name, 1, not s.single_team))
        if two and not s.single_team:
            cases.append(_Case(f"{s.name}/pairs", pairs, s.name, 2, True))
            cases.append(_Case(f"{s.name}/pairs-short", short, s.name, 2, True))

    def costs(g, on: bool):
        return {op.name: HEAVY_COST for op in g.ops} if on else None

    if progress:
        progress(f"engine overheads: {len(cases)} small graphs, {reps} samples each, interleaved")
    # A sample is many back-to-back runs, as an inference loop runs: between
    # them the pool's threads spin instead of parking, which single runs
    # interleaved with 13 other engines would measure instead.
    engines = []
    try:
        for c in cases:
            engines.append(NativeEngine(c.graph, executors=c.executors, threads=1,
                                        scheduler=c.scheduler, pin=True,
                                        op_cost=costs(c.graph, c.costed)))
        sides = [EngineSide(e, label=c.key, runs=RUNS_PER_SAMPLE) for c, e in zip(cases, engines)]
        got = interleave(sides, FixedSampling(reps), warmup=3, raise_errors=True)
    finally:
        for e in engines:
            e.close()
    measured = {c.key: fastest(m) for c, m in zip(cases, got)}
    # one add's own time, from the engine's events
    e = NativeEngine(chain, executors=1, threads=1, scheduler="sequential", pin=True)
    try:
        add_s = float(np.median(list(op_medians(profiled_runs(e, chain, 3, warmup=1)).values())))
    finally:
        e.close()
    return _fit_overheads(schedulers, cases, measured, add_s, transfer,
                          Calibration(spin_s=spin_s, wake_s=wake_s)) + (add_s,)


def _fit_overheads(schedulers, cases, measured, add_s, transfer=None, wakes=None):
    from hwtune.engine.simulator import Simulator
    from hwtune.native.simulate import Transfer
    transfer = transfer or Transfer()
    wakes = wakes or Calibration()
    sims = {}
    sec = {}
    for c in cases:
        if id(c.graph) not in sims:
            sims[id(c.graph)] = Simulator(c.graph)
            sec[id(c.graph)] = np.full((len(c.graph.ops), 2), add_s)
    overheads: Dict[str, dict] = {}
    run_s: Dict[str, Dict[int, float]] = {}
    by_key = {c.key: c for c in cases}
    try:
        def latency(c: _Case, o: Overheads) -> float:
            o = replace(o, **wakes.wake_terms(c.scheduler))
            ms, _ = sims[id(c.graph)].run(
                executors=c.executors, threads=1, scheduler=c.scheduler,
                seconds=sec[id(c.graph)], overheads=o, transfer=transfer,
                op_cost={op.name: HEAVY_COST for op in c.graph.ops} if c.costed else None)
            return ms
        # the sequential chain gives the inline cost every scheduler shares
        seq = next(s for s in schedulers if s.in_order)
        run_s[seq.name] = {1: max(0.0, measured[f"{seq.name}/run1"] - add_s)}
        c = by_key[f"{seq.name}/chain"]
        inline = _solve(lambda x: latency(c, Overheads(inline_s=x, run_s=run_s[seq.name][1])),
                        measured[c.key])
        overheads[seq.name] = {"inline_s": inline, "dispatch_s": 0.0, "section_s": 0.0}
        for s in schedulers:
            if s.name == seq.name:
                continue
            runs = {1: max(0.0, measured[f"{s.name}/run1"] - add_s)}
            run_s[s.name] = runs
            c = by_key[f"{s.name}/chain"]
            section = _solve(lambda x: latency(c, Overheads(inline_s=inline, section_s=x,
                                                            run_s=runs[1])), measured[c.key])
            dispatch = 0.0
            if f"{s.name}/pairs" in measured:
                # Two executors: a run's own cost and a dispatch's from two
                # lengths of the same graph, both executors busy throughout
                # (the longer run's extra stages cost dispatches, not a
                # start). A one-op graph's run on two executors measured
                # 60-790 us here (the idle second executor woken from its
                # futex), while the DeepCPU LSTMs' 2x1 runs paid none of it.
                long_, short_ = by_key[f"{s.name}/pairs"], by_key[f"{s.name}/pairs-short"]

                def extra(x):
                    o = Overheads(inline_s=inline, section_s=section, dispatch_s=x)
                    return latency(long_, o) - latency(short_, o)
                dispatch = _solve(extra, measured[long_.key] - measured[short_.key])
                runs[2] = max(0.0, measured[long_.key] - latency(long_, Overheads(
                    inline_s=inline, section_s=section, dispatch_s=dispatch)))
            overheads[s.name] = {"inline_s": inline, "dispatch_s": dispatch,
                                 "section_s": section}
    finally:
        for sim in sims.values():
            sim.close()
    return overheads, run_s


# Calibrations are repeated until two agree: every figure within AGREE_REL
# of the larger or within an absolute floor below which it moves a
# prediction by < 1% of a 0.3 ms model (the smallest bundled one): 3 us for
# a run's own cost, 15 ns for a per-op cost (its 200 ops). On this shared
# 2-core VM a run's cost on two executors measured 80 us to 1 ms between
# calibrations of one idle hour; their dispatch costs 2-4 us.
AGREE_REL = 0.2
AGREE_ABS_RUN = 3e-6
AGREE_ABS_OP = 15e-9
MAX_ATTEMPTS = 4


# Figures that move with where the host runs the two vCPUs and how deeply
# an idle one sleeps: no agreement asked, the median over attempts kept.
PLACEMENT_FIGURES = ("xfer_s", "xfer_bps", "spin_s", "wake_s")


def agree(a: Calibration, b: Calibration) -> bool:
    fa, fb = a.figures(), b.figures()
    if fa.keys() != fb.keys():
        return False
    for k, x in fa.items():
        if k in PLACEMENT_FIGURES:
            continue  # moves with placement and sleep depth; combine takes their median
        y = fb[k]
        floor = AGREE_ABS_RUN if k.startswith("run_s/") else AGREE_ABS_OP
        if abs(x - y) > max(AGREE_REL * max(abs(x), abs(y)), floor):
            return False
    return True


def combine(attempts: List[Calibration]) -> Calibration:
    """The calibration kept from repeated ones: the mean of the last
    agreeing pair, else (none agreed) every figure's median over all
    attempts; spread says how far all attempts were apart."""
    pair = next(((a, b) for i, b in enumerate(attempts) for a in attempts[:i]
                 if agree(a, b)), None)
    use = list(pair) if pair else attempts
    figs = [c.figures() for c in attempts]

    def kept(name: str) -> float:
        if name in PLACEMENT_FIGURES:  # moves with the host's placement: every attempt's median
            return float(np.median([f[name] for f in figs]))
        return float(np.mean([c.figures()[name] for c in use]) if pair
                     else np.median([f[name] for f in figs]))
    first = attempts[0]
    out = Calibration(
        forkjoin={t: kept(f"forkjoin/{t}") for t in first.forkjoin},
        forkjoin_pool={t: kept(f"forkjoin_pool/{t}") for t in first.forkjoin_pool},
        overheads={s: {k: kept(f"{k}/{s}") for k in o} for s, o in first.overheads.items()},
        run_s={s: {n: kept(f"run_s/{s}/{n}") for n in r} for s, r in first.run_s.items()},
        add_s=float(np.median([c.add_s for c in attempts])), xfer_s=kept("xfer_s"),
        xfer_bps=kept("xfer_bps"), spin_s=kept("spin_s"), wake_s=kept("wake_s"),
        attempts=len(attempts),
        settled=pair is not None)
    for name, v in out.figures().items():
        xs = [f[name] for f in figs if name in f]
        scale = v if v > 0 else max(xs)
        out.spread[name] = float((max(xs) - min(xs)) / scale) if scale > 0 else 0.0
    return out


def calibrate(cores: int, progress=None, max_attempts: int = MAX_ATTEMPTS) -> Calibration:
    """Fork-join and engine overheads, measured again until two attempts
    agree (agree()), at most max_attempts times (combine())."""
    from hwtune.native import sched
    rows = list(sched.schedulers().values())
    attempts: List[Calibration] = []
    for i in range(max_attempts):
        if progress and i:
            progress(f"calibration {i + 1} of at most {max_attempts}: the previous ones "
                     f"disagree by more than {AGREE_REL:.0%}")
        fj, pool_fj = forkjoin(cores, progress)
        xfer_s, xfer_bps = transfer(cores, progress)
        spin_s, wake_s = waking(cores, progress)
        overheads, run_s, add_s = engine_overheads(
            rows, progress, transfer=Transfer(latency_s=xfer_s, bytes_per_s=xfer_bps),
            spin_s=spin_s, wake_s=wake_s)
        attempts.append(Calibration(forkjoin=fj, forkjoin_pool=pool_fj, overheads=overheads,
                                    run_s=run_s, add_s=add_s, xfer_s=xfer_s,
                                    xfer_bps=xfer_bps, spin_s=spin_s, wake_s=wake_s))
        if len(attempts) > 1 and combine(attempts).settled:
            break
    return combine(attempts) if len(attempts) > 1 else attempts[0]
