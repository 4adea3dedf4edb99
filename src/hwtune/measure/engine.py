"""Engine candidates: whole-graph runs, and one op's own time from the
engine's profiling events.

`measure_engines` is the one comparison of prepared engines that the
executor sweep and the tuner's final default-vs-tuned verdict share: every
engine is opened (a refused config is an 'error'), warmed up, checked
against the reference ('wrong_answer'), then sampled interleaved and closed.
`hwtune run` and `hwtune check`'s model figures time an EngineSide alone.
"""

from __future__ import annotations

from typing import Callable, List, Mapping, Optional, Sequence

from hwtune.errors import HwtuneError
from hwtune.measure import check as checks
from hwtune.measure import clock
from hwtune.measure.sampling import interleave
from hwtune.measure.policy import SamplingPolicy
from hwtune.measure.result import ERROR, Measurement
from hwtune.measure.sides import Side


class EngineSide(Side):
    """A prepared engine: a sample is `runs` back-to-back run() calls,
    timed together, as seconds per run."""

    def __init__(self, engine, *, label: str = "", runs: int = 1):
        self.engine, self.label, self.runs = engine, label, max(1, int(runs))

    def warm(self, n: int) -> Optional[float]:
        """n runs; the last one's seconds (the first faults in the arena)."""
        per = None
        for _ in range(n):
            per = clock.per_call(self.engine.run, 1)
        return per

    def take(self, k: int) -> List[float]:
        return [clock.per_call(self.engine.run, self.runs) for _ in range(k)]

    def outputs(self):
        return self.engine.outputs()

    def close(self) -> None:
        self.engine.close()


class OpEventSide(Side):
    """A one-op engine: a sample is one profiled run, timed by the engine's
    event for its only op (the op's own time, not the run's dispatch)."""

    def __init__(self, engine, *, label: str = ""):
        self.engine, self.label = engine, label

    def warm(self, n: int) -> Optional[float]:
        for _ in range(n):
            self.engine.run()
        return None

    def take(self, k: int) -> List[float]:
        out = []
        for _ in range(k):
            self.engine.run(profile=True)
            evs = self.engine.events()
            if not evs:
                raise HwtuneError("the engine recorded no event (op folded?)")
            out.append(evs[0].end_s - evs[0].start_s)
        return out

    def outputs(self):
        return self.engine.outputs()


FIRST = "first"  # measure_engines(reference=FIRST): every engine against the first one


def output_check(reference: Optional[Mapping[str, object]], names: Sequence[str]):
    """The check function interleave() takes: outputs against reference."""
    if reference is None:
        return None
    return lambda side: checks.wrong_outputs(side.outputs(), reference, names)


def _first_as_reference(names: Sequence[str]):
    """Check every side against the outputs of the first side checked (a
    peer: the comparison's baseline engine, which runs anyway)."""
    ref: dict = {}

    def check(side):
        if not ref:
            ref.update(side.outputs())
            return None
        return checks.wrong_outputs(side.outputs(), ref, names)
    return check


def measure_engines(openers: Sequence[Callable[[], object]], policy: SamplingPolicy, *,
                    warmup: int, reference: Optional[Mapping[str, object]] = None,
                    outputs: Sequence[str] = (), deadline: Optional[float] = None,
                    settle: Optional[Callable[[], None]] = None,
                    on_round=None) -> List[Measurement]:
    """One Measurement per opener (a callable returning a prepared engine):
    all engines are open side by side while they are sampled, so their
    samples interleave; every engine is closed at the end. reference: the
    outputs (by name) every engine must match, FIRST to hold them to the
    first engine that opened, or None for no check."""
    sides: List[Optional[EngineSide]] = []
    failed = {}
    try:
        for i, open_engine in enumerate(openers):
            try:
                sides.append(EngineSide(open_engine()))
            except HwtuneError as exc:
                sides.append(None)
                failed[i] = Measurement(ERROR, note=str(exc))
        live = [s for s in sides if s is not None]
        check = (_first_as_reference(outputs) if isinstance(reference, str) and
                 reference == FIRST else output_check(reference, outputs))
        got = iter(interleave(live, policy, warmup=warmup, check=check, deadline=deadline,
                              settle=settle, on_round=on_round))
        return [failed[i] if s is None else next(got) for i, s in enumerate(sides)]
    finally:
        for s in sides:
            if s is not None:
                s.close()


def profiled_runs(engine, graph, runs: int, warmup: int = 0) -> list:
    """`runs` profiled runs of a prepared engine (after `warmup` plain
    ones): per run, the engine's event of every op that ran, as OpEvents
    named after graph's ops (the per-op costs Graphi's profiler feeds the
    critical-path levels, and hwtune run --trace's timeline)."""
    from hwtune.engine.trace import OpEvent
    for _ in range(warmup):
        engine.run()
    out = []
    for _ in range(runs):
        engine.run(profile=True)
        out.append([OpEvent(graph.ops[ev.op].name, graph.ops[ev.op].op, ev.executor,
                            ev.threads, ev.start_s, ev.end_s) for ev in engine.events()])
    return out


def op_medians(runs: list) -> dict:
    """op name -> median seconds over profiled runs (profiled_runs())."""
    from hwtune.measure.stats import median
    durations: dict = {}
    for events in runs:
        for ev in events:
            durations.setdefault(ev.op_name, []).append(ev.end_s - ev.start_s)
    return {name: median(xs) for name, xs in durations.items()}
