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
from hwtune.measure import output_check as checks
from hwtune.measure import clock
from hwtune.measure.sampling import interleave
from hwtune.measure.policy import SamplingPolicy
from hwtune.measure.result import ERROR, Measurement
from hwtune.measure.sides import Side


class EngineSide(Side):
    """A prepared engine: a sample is `runs` back-to-back run() calls,
    timed together, as seconds per run. rewarm: untimed runs before every
    chunk of samples, so that a chunk taken right after another engine's
    starts, as `hwtune run` does, with this engine's own data in cache."""

    def __init__(self, engine, *, label: str = "", runs: int = 1, rewarm: int = 0):
        self.engine, self.label, self.runs = engine, label, max(1, int(runs))
        self.rewarm = max(0, int(rewarm))

    def warm(self, n: int) -> Optional[float]:
        """n runs; the last one's seconds (the first faults in the arena)."""
        per = None
        for _ in range(n):
            per = clock.per_call(self.engine.run, 1)
        return per

    def take(self, k: int) -> List[float]:
        for _ in range(self.rewarm):
            self.engine.run()
        return [clock.per_call(self.engine.run, self.runs) for _ in range(k)]

    def outputs(self):
        return self.engine.outputs()

    def close(self) -> None:
        self.engine.close()


class FreshEngineSide(Side):
    """An engine opened anew for every chunk of samples and closed after
    it, so that no other engine's pool exists while it runs: the process
    state of a lone `hwtune run`. warm(n) opens it, runs it n times (the
    last run's seconds are returned) and keeps its outputs for the check;
    take(k) opens it, runs `rewarm` untimed runs, takes k samples, each
    `runs` back-to-back runs timed together (seconds per run)."""

    def __init__(self, opener: Callable[[], object], *, label: str = "", rewarm: int = 1,
                 runs: int = 1):
        self.opener, self.label, self.rewarm = opener, label, max(0, int(rewarm))
        self.runs = max(1, int(runs))
        self._outputs = None

    def _with_engine(self, body):
        engine = self.opener()
        try:
            out = body(engine)
            self._outputs = {k: v.copy() if hasattr(v, "copy") else v
                             for k, v in engine.outputs().items()}
            return out
        finally:
            engine.close()

    def warm(self, n: int) -> Optional[float]:
        """Seconds per run with the engine's open and close spread over
        the runs: what a sample costs a time budget, since every chunk
        opens the engine again."""
        took = clock.Stopwatch()

        def body(engine):
            for _ in range(max(1, n)):
                engine.run()
        self._with_engine(body)
        return took.elapsed() / max(1, n)

    def take(self, k: int) -> List[float]:
        def body(engine):
            for _ in range(self.rewarm):
                engine.run()
            return [clock.per_call(engine.run, self.runs) for _ in range(k)]
        return self._with_engine(body)

    def outputs(self):
        return self._outputs


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


def _first_as_reference(names: Sequence[str], tolerance=lambda side: None):
    """Check every side against the outputs of the first side checked (a
    peer: the comparison's baseline engine, which runs anyway), within
    tolerance(side) (None: hwtune run --check's)."""
    ref: dict = {}

    def check(side):
        if not ref:
            ref.update(side.outputs())
            return None
        return checks.wrong_outputs(side.outputs(), ref, names, tolerance(side))
    return check


def measure_engines(openers: Sequence[Callable[[], object]], policy: SamplingPolicy, *,
                    warmup: int, reference: Optional[Mapping[str, object]] = None,
                    outputs: Sequence[str] = (), deadline: Optional[float] = None,
                    settle: Optional[Callable[[], None]] = None, settle_each: bool = False,
                    rewarm: int = 0, fresh: bool = False, runs: int = 1,
                    on_round=None, on_chunk=None,
                    tolerances: Optional[Sequence[Optional[float]]] = None
                    ) -> List[Measurement]:
    """One Measurement per opener (a callable returning a prepared engine):
    all engines are open side by side while they are sampled, so their
    samples interleave; every engine is closed at the end. reference: the
    outputs (by name) every engine must match, FIRST to hold them to the
    first engine that opened, or None for no check. settle_each and
    rewarm: each chunk of samples starts as a lone `hwtune run` would, the
    other engines' workers parked and this engine's data warm (the
    tuner's final verdict, whose figures a later `hwtune run` must
    reproduce). fresh: each engine is opened for each chunk of samples and
    closed after it (FreshEngineSide): no two engines exist at once.
    runs: back-to-back runs per sample (seconds per run), as an inference
    loop runs a sub-millisecond model. on_chunk(i, n): engine i (openers'
    order) took n samples. tolerances: per opener, the relative error its
    outputs may have against the reference (None: hwtune run --check's; a
    precision-rewritten candidate's is tune-graph's --max-error).
    """
    sides: List[Optional[Side]] = []
    failed = {}
    try:
        for i, open_engine in enumerate(openers):
            if fresh:
                sides.append(FreshEngineSide(open_engine, rewarm=rewarm, runs=runs))
                continue
            try:
                sides.append(EngineSide(open_engine(), rewarm=rewarm, runs=runs))
            except HwtuneError as exc:
                sides.append(None)
                failed[i] = Measurement(ERROR, note=str(exc))
        live = [s for s in sides if s is not None]
        index = [i for i, s in enumerate(sides) if s is not None]
        tol = {id(s): t for s, t in zip(sides, tolerances or ()) if s is not None}
        check = (_first_as_reference(outputs, lambda side: tol.get(id(side)))
                 if isinstance(reference, str) and reference == FIRST
                 else output_check(reference, outputs))
        # fresh sides open their engine for every chunk: lower each graph once
        from hwtune.native.engine import shared_lowering
        with shared_lowering():
            got = iter(interleave(live, policy, warmup=warmup, check=check, deadline=deadline,
                                  settle=settle, settle_each=settle_each, on_round=on_round,
                                  on_chunk=None if on_chunk is None else
                                  (lambda j, n: on_chunk(index[j], n))))
            return [failed[i] if s is None else next(got) for i, s in enumerate(sides)]
    finally:
        for s in sides:
            if s is not None:
                s.close()
