"""Sampling policies: how many samples each side takes, round by round.

The sampling loop (sampling.py) asks the policy before every round how many
samples each side takes next, showing it every sample so far; 0 ends the
sampling. A fixed count is all hwtune uses today; the seam is there for
policies that decide from the samples themselves: sequential sampling that
stops once the comparison is settled, or one that samples until a
confidence interval on the ratio of two sides is narrow enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence


class SamplingPolicy:
    """Base class. start() is called once after the warm-up with the
    seconds one warm-up round of every side took (None when unknown);
    next_chunk() before every round."""

    planned: Optional[int] = None  # samples per side, when known in advance

    def start(self, n_sides: int, round_s: Optional[float]) -> None:
        pass

    def next_chunk(self, samples: Sequence[Sequence[float]]) -> int:
        """Samples each side takes in the next round; 0 ends the sampling.
        samples: every live side's samples so far."""
        raise NotImplementedError


def split(total: int, rounds: int) -> List[int]:
    """total samples split into `rounds` near-equal positive chunks."""
    r = max(1, min(rounds, total))
    return [total // r + (1 if i < total % r else 0) for i in range(r)]


@dataclass
class FixedSampling(SamplingPolicy):
    """`reps` samples per side, in `rounds` near-equal rounds (split();
    default: one sample per round, the finest interleaving).

    budget_s: when one warm-up round took round_s, take only as many
    samples as fit in budget_s (never fewer than min_reps): a model that
    runs for seconds gets fewer samples, each long enough to average out
    load bursts.
    min_total_s / max_reps: keep sampling past reps, one sample per round,
    while a side's samples add up to less than min_total_s, up to max_reps
    (microsecond ops need more samples than millisecond ones for the same
    stability of the median).
    """
    reps: int
    rounds: Optional[int] = None
    budget_s: Optional[float] = None
    min_reps: int = 1
    min_total_s: Optional[float] = None
    max_reps: Optional[int] = None

    def __post_init__(self):
        if isinstance(self.reps, bool) or not isinstance(self.reps, int) or self.reps < 1:
            raise ValueError(f"reps must be an integer >= 1, got {self.reps!r}")
        self._started = False
        self.planned = self.reps

    def start(self, n_sides: int, round_s: Optional[float]) -> None:
        self._target = self.reps
        if self.budget_s is not None and round_s:
            fit = int(self.budget_s / max(round_s, 1e-9))
            self._target = max(min(self.reps, self.min_reps), min(self.reps, fit))
        self.planned = self._target
        self._rounds = max(1, min(self.rounds or self._target, self._target))
        self._started = True

    def _rest_of_round(self, taken: int) -> int:
        """What is left of the round that sample `taken` falls in (split()'s
        chunks: the first target % rounds of them one longer)."""
        base, extra = divmod(self._target, self._rounds)
        long_part = extra * (base + 1)
        if taken < long_part:
            return base + 1 - taken % (base + 1)
        return base - (taken - long_part) % base

    def next_chunk(self, samples: Sequence[Sequence[float]]) -> int:
        if not self._started:
            self.start(len(samples), None)
        taken = min((len(s) for s in samples), default=0)
        if taken < self._target:
            return self._rest_of_round(taken)
        if self.min_total_s is not None and samples:
            cap = self.max_reps if self.max_reps is not None else self._target
            short = min(sum(s) for s in samples) < self.min_total_s
            if short and taken < cap:
                return 1
        return 0
