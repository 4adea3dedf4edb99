"""Sequential sampling: keep taking interleaved rounds until a decision rule
is satisfied or a time cap is reached.

The policy knows nothing about statistics: `decide(samples, elapsed_share)`
(the caller's rule, e.g. hwtune.check.sequential's group-sequential test)
looks at every side's samples so far and the share of the time cap spent,
and returns a verdict to stop with, or None to go on. The policy takes
`chunk` samples of every side per round (interleave() rotates the order;
the rule may change `chunk` between rounds, e.g. after a pilot that showed
where the variance is), asks the rule after every round from `min_rounds`
on, and stops at `max_seconds` of sampling or `max_rounds`, whichever comes
first; the rule's answer at that last look (share 1.0, its final look) is
the verdict.

The share passed to the rule is rounds / max_rounds, or 1.0 at the last
look: it depends on how many rounds were taken, never on their values, as
an alpha-spending function's information fraction must.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from hwtune.measure import clock
from hwtune.measure.policy import SamplingPolicy

# decide(samples per side, round ends, share spent (1.0 = final look)):
# round i's samples of every side are samples[side][ends[i-1]:ends[i]].
DecideFn = Callable[[Sequence[Sequence[float]], Sequence[int], float], Optional[Any]]


class SequentialSampling(SamplingPolicy):
    """Rounds of `chunk` samples per side until decide() returns a verdict,
    max_seconds of sampling pass or max_rounds are taken. After the run,
    `verdict` holds the rule's answer (None only if sampling never got to a
    look), `rounds` the rounds taken and `elapsed_s` the seconds spent."""

    def __init__(self, decide: DecideFn, *, chunk: int = 1, min_rounds: int = 3,
                 max_seconds: float = 60.0, max_rounds: int = 10000):
        if chunk < 1 or min_rounds < 1 or max_rounds < min_rounds or not max_seconds > 0:
            raise ValueError(f"bad sequential sampling settings: chunk={chunk}, min_rounds="
                             f"{min_rounds}, max_rounds={max_rounds}, max_seconds={max_seconds}")
        self.decide, self.chunk, self.min_rounds = decide, chunk, min_rounds
        self.max_seconds, self.max_rounds = float(max_seconds), max_rounds
        self.verdict: Optional[Any] = None
        self.rounds = 0
        self.elapsed_s = 0.0
        self.capped = False
        self._watch: Optional[clock.Stopwatch] = None
        self.ends: list = []

    def start(self, n_sides: int, round_s: Optional[float]) -> None:
        self._watch = clock.Stopwatch()
        self.verdict, self.rounds, self.capped = None, 0, False
        self.ends = []

    def next_chunk(self, samples: Sequence[Sequence[float]]) -> int:
        if self._watch is None:
            self.start(len(samples), None)
        taken = min((len(s) for s in samples), default=0)
        if taken and (not self.ends or taken > self.ends[-1]):
            self.ends.append(taken)
        self.rounds = len(self.ends)
        self.elapsed_s = self._watch.elapsed()
        if self.rounds >= self.min_rounds:
            final = self.elapsed_s >= self.max_seconds or self.rounds >= self.max_rounds
            share = 1.0 if final else min(1.0, self.rounds / self.max_rounds)
            self.capped = final
            self.verdict = self.decide(samples, list(self.ends), share)
            if self.verdict is not None or final:
                return 0
        return self.chunk
