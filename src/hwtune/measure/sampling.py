"""The one sampling loop: warm up, check, then interleaved rounds.

Every side is warmed up, checked against the reference and held to its time
limit first; then each round takes a chunk of samples of every live side in
turn, the order rotated by one each round so that no side always runs right
after the same neighbour (caches, clocks and a spinning pool carry over) and
a drift of the machine's load hits every side alike. The policy decides the
chunk of each round and when to stop; the deadline stops after the round in
flight (every side keeps at least one round). Raw samples are always kept.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from hwtune.errors import HwtuneError
from hwtune.measure import clock
from hwtune.measure.policy import FixedSampling, SamplingPolicy
from hwtune.measure.result import ERROR, OK, TIMEOUT, WRONG_ANSWER, Measurement
from hwtune.measure.sides import Side

CheckFn = Callable[[Side], Optional[str]]
# on_round(rounds_done, samples_per_side_so_far), after every round
RoundFn = Callable[[int, int], None]


def interleave(sides: Sequence[Side], policy: SamplingPolicy, *, warmup: int = 0,
               check: Optional[CheckFn] = None, limit_s: Optional[float] = None,
               deadline: Optional[float] = None,
               settle: Optional[Callable[[], None]] = None, settle_each: bool = False,
               on_round: Optional[RoundFn] = None, raise_errors: bool = False,
               on_chunk: Optional[Callable[[int, int], None]] = None
               ) -> List[Measurement]:
    """One Measurement per side, in order.

    warmup: runs of each side before anything counts (side.warm(warmup)
    also sizes the side's samples; its seconds per run feed limit_s and the
    policy's budget). check(side): a one-line reason
    when the side's outputs are wrong ('wrong_answer'), else None. limit_s:
    a side whose warm-up runs took longer than this per run is stopped
    ('timeout'). settle() runs once before the first round and, with
    settle_each, before every chunk; on_chunk(i, n) after each chunk:
    side i took n samples. deadline: a clock.monotonic() value.
    A side that raises HwtuneError is an 'error' from then on; the other
    sides go on (with raise_errors, the error propagates instead: a
    measurement that is all or nothing)."""
    out: Dict[int, Measurement] = {}
    live: List[int] = []
    round_s = None
    for i, side in enumerate(sides):
        try:
            per = side.warm(warmup)
            bad = check(side) if check is not None else None
        except HwtuneError as exc:
            if raise_errors:
                raise
            out[i] = Measurement(ERROR, note=str(exc))
            continue
        if bad:
            out[i] = Measurement(WRONG_ANSWER, note=bad)
            continue
        if limit_s is not None and per is not None and per > limit_s:
            out[i] = Measurement(TIMEOUT, note=f"first run {per * 1e3:.3g} ms, over the "
                                               f"{limit_s * 1e3:.3g} ms limit")
            continue
        if per is not None:
            round_s = (round_s or 0.0) + per
        live.append(i)
    samples: Dict[int, List[float]] = {i: [] for i in live}
    policy.start(len(live), round_s)
    if settle is not None and live:
        settle()
    r = 0
    cut = False
    # A round that would end past the deadline is not started once the
    # policy's minimum is in (its length: the last round's): a final
    # comparison of five fresh-engine candidates of inception_small took
    # ~9 s a round and ended 10 s past a 60 s budget when only a passed
    # deadline stopped it.
    least = int(getattr(policy, "min_reps", 1) or 1)
    round_took = 0.0
    while live:
        if r > 0 and deadline is not None:
            short = min(len(samples[i]) for i in live) < least
            if clock.passed(deadline) or (not short and
                                          clock.monotonic() + round_took > deadline):
                cut = True
                break
        k = policy.next_chunk([samples[i] for i in live])
        if k <= 0:
            break
        round_watch = clock.Stopwatch()
        shift = r % len(live)
        for i in live[shift:] + live[:shift]:
            if settle is not None and settle_each:
                settle()
            try:
                got = sides[i].take(k)
                samples[i].extend(got)
                if on_chunk is not None:
                    on_chunk(i, len(got))
            except HwtuneError as exc:
                if raise_errors:
                    raise
                out[i] = Measurement(ERROR, samples[i], str(exc))
        live = [i for i in live if i not in out]
        round_took = round_watch.elapsed()
        r += 1
        if on_round is not None and live:
            on_round(r, len(samples[live[0]]))
    planned = getattr(policy, "planned", None)
    for i in live:
        note = None
        if cut:
            note = f"{len(samples[i])} samples (deadline)"
            if planned:
                note = f"{len(samples[i])} of {planned} samples (deadline)"
        out[i] = Measurement(OK, samples[i], note)
    return [out[i] for i in range(len(sides))]


def interleaved_calls(fns: Sequence[Callable[[], object]], reps: int, *, sample_s: float,
                      max_calls: int = 10_000, settle_s: Optional[float] = None
                      ) -> List[List[float]]:
    """Seconds per call of each Python callable (an engine's run, a peer
    library's session), `reps` samples each, interleaved one sample of each
    per round; each callable's calls per sample are sized at warm-up so a
    sample lasts about sample_s. Before every sample the previous side's
    spinning workers get up to settle_s to park. Failures propagate (a
    benchmark side that fails is a broken benchmark)."""
    from hwtune.measure.settling import settle as settle_fn
    from hwtune.measure.sides import CallSide

    sides = [CallSide(f, sample_s=sample_s, calibrate=1, max_calls=max_calls) for f in fns]
    pause = (lambda: settle_fn()) if settle_s is None else (lambda: settle_fn(settle_s))
    got = interleave(sides, FixedSampling(reps), warmup=1, settle=pause, settle_each=True,
                     raise_errors=True)
    return [m.samples for m in got]
