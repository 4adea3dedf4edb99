"""Time figures, sampled until decided: two sides (a figure and its
partner) in interleaved rounds under SequentialSampling, the rounds a
preemption burst overlapped discarded by preempt's rule, and the
group-sequential test of hwtune.check.sequential deciding.

Partners: the other build's run of the same figure (paired mode, `--against`:
two worker processes), or the reference kernel measured right beside the
figure in this process (against a stored baseline, and when recording one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hwtune.check.sequential import (Decision, SequentialTest, estimate, round_logratios)
from hwtune.check.suite import Suite
from hwtune.measure import OK, interleave, settle
from hwtune.measure.preempt import burst_threshold
from hwtune.measure.sequential import SequentialSampling
from hwtune.measure.sides import Side

# A baseline is recorded until the standard error of its mean log-ratio is
# below this share of log(1 + min_effect): then a comparison's own rounds,
# not the baseline's, limit how soon it decides (with 1/6 the baseline adds
# ~3% to the standard error of a comparison that ran as many rounds).
RECORD_PRECISION = 6.0
# Samples per chunk are re-planned once, after the pilot rounds, within
# these bounds (Kalibera & Jones' optimal repetitions at the lower level).
CHUNK_MIN, CHUNK_MAX = 1, 8


def kept(windows_a, windows_b, rounds: int) -> List[bool]:
    """keep[i]: neither side's chunk of round i was part of a preemption
    burst (hwtune.measure.preempt's rule, each side's chunks against that
    side's own: a side whose work runs on a pool thread the measuring
    thread cannot see loses the same large share in every chunk, and
    pooling the two sides' losses made that steady share read as a burst:
    7 of 8 rounds of a 1-thread element-wise figure discarded at load 17)."""
    def flags(ws) -> List[bool]:
        losses = [ws[i].lost_share() for i in range(min(rounds, len(ws)))]
        limit = burst_threshold(losses)
        return [i >= len(ws) or ws[i].lost_share() <= limit for i in range(rounds)]
    return [x and y for x, y in zip(flags(windows_a), flags(windows_b))]


def _robust_var(xs: Sequence[float]) -> float:
    """(1.4826 MAD)^2: the variance of the bulk of xs, bursts left out."""
    s = sorted(xs)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    dev = sorted(abs(x - med) for x in s)
    mad = dev[n // 2] if n % 2 else 0.5 * (dev[n // 2 - 1] + dev[n // 2])
    return (1.4826 * mad) ** 2


def plan_chunk(a: Sequence[float], b: Sequence[float], ends: Sequence[int], chunk: int,
               round_s: float, sample_s: float) -> int:
    """Kalibera & Jones' optimal repetitions at the lower level (samples per
    chunk) from the pilot rounds: k* = sqrt(c_round / c_sample * S2_within /
    S2_between), where S2_within is the variance of log samples within a
    chunk, S2_between the variance of the paired round log-ratios that more
    samples per chunk would not remove, c_sample one sample's seconds and
    c_round the rest of a round's cost (settling, process round trips).
    Variances are robust (MAD): the bursts that trimming removes later
    must not decide the plan."""
    within: List[float] = []
    start = 0
    for end in ends:
        for xs in (a[start:end], b[start:end]):
            logs = [math.log(x) for x in xs if x > 0]
            if len(logs) > 2:
                within.append(_robust_var(logs))
        start = end
    d = round_logratios(b, a, ends)
    if len(d) < 3 or not within:
        return chunk
    s2w = sorted(within)[len(within) // 2]
    s2b = max(0.0, (_robust_var(d) - 2.0 * s2w / chunk) / 2.0)
    c_round = max(round_s - 2 * chunk * sample_s, 0.1 * sample_s)
    if s2b <= 0:
        return min(CHUNK_MAX, max(chunk, CHUNK_MIN)) if s2w > 0 else chunk
    k = math.sqrt(c_round / max(sample_s, 1e-9) * s2w / s2b)
    return int(min(CHUNK_MAX, max(CHUNK_MIN, round(k))))


class _Rule:
    """The decide() of SequentialSampling for one figure: side 0 is the
    partner (build A, or the reference), side 1 the figure (build B)."""

    def __init__(self, suite: Suite, sides: Sequence[Side], base: Optional[List[float]],
                 record: bool = False, absolute: bool = False,
                 rates: Tuple[bool, bool] = (False, False)):
        th = suite.thresholds
        self.suite, self.sides, self.base, self.record = suite, sides, base, record
        self.absolute, self.rates = absolute, rates
        self.test = SequentialTest(alpha=th.alpha, min_effect=th.min_effect,
                                   min_rounds=suite.min_rounds, max_rounds=suite.max_rounds)
        self.policy: Optional[SequentialSampling] = None
        self.planned = False
        self.keep: List[bool] = []
        self.values: List[float] = []

    def __call__(self, samples, ends, share) -> Optional[Any]:
        # Throughput probes sample a rate: the test compares 1/rate, so a
        # lower rate reads as slower, as a longer time does.
        a, b = (costs(xs) if rate else xs for xs, rate in zip(samples, self.rates))
        rounds = len(ends)
        if not self.planned and self.policy is not None:
            self.planned = True
            round_s = self.policy.elapsed_s / max(rounds, 1)
            # Seconds per sample from the sides that time (a probe's
            # sample is one slice of sample_seconds).
            per = [x for xs, rate in zip(samples, self.rates) if not rate
                   for x in xs if x > 0]
            inner = [getattr(s, "inner", None) or 1 for s in self.sides]
            sample_s = (sorted(per)[len(per) // 2] * max(inner) * self.suite.best_of
                        if per else self.suite.sample_seconds)
            self.policy.chunk = plan_chunk(a, b, ends, self.policy.chunk, round_s, sample_s)
        self.keep = kept(getattr(self.sides[0], "windows", []),
                         getattr(self.sides[1], "windows", []), rounds)
        # Absolute: the figure's own times per round (the partner chunk only
        # paces the rounds and shares the preemption rule).
        self.values = round_logratios(b, [1.0] * len(b) if self.absolute else a, ends,
                                      self.keep)
        if self.record:
            return self._recorded(rounds, share)
        return self.test.look(self.values, self.base, rounds, share)

    def _recorded(self, rounds: int, share: float) -> Optional[Decision]:
        vals = self.values
        if len(vals) >= 3:
            m, se, _ = estimate(vals, None)
            target = math.log1p(self.suite.thresholds.min_effect) / RECORD_PRECISION
            if (rounds >= 2 * self.suite.min_rounds and se <= target) or share >= 1.0:
                return Decision("recorded", math.exp(m), (math.exp(m - 2 * se),
                                                          math.exp(m + 2 * se)),
                                math.nan, len(vals), 0,
                                f"{len(vals)} rounds, standard error {se:.2%}"
                                + ("" if se <= target else f" (target {target:.2%} not reached "
                                                           "within the cap)"))
        elif share >= 1.0:
            return Decision("recorded", math.nan, (math.nan, math.nan), math.nan, len(vals), 0,
                            f"only {len(vals)} undisturbed rounds")
        return None


@dataclass
class Sampled:
    """Both sides' raw samples of one figure and how the sampling went."""
    a: List[float]
    b: List[float]
    ends: List[int]
    keep: List[bool]
    decision: Optional[Decision]
    chunk: int
    elapsed_s: float
    capped: bool
    errors: List[Optional[str]] = field(default_factory=list)
    lost: List[float] = field(default_factory=list)  # per round, the larger side's

    @property
    def rounds(self) -> int:
        return len(self.ends)

    @property
    def discarded(self) -> int:
        return sum(1 for k in self.keep if not k)

    def info(self) -> Dict[str, Any]:
        return {"metric": "time", "rounds": self.rounds, "discarded": self.discarded,
                "chunk": self.chunk, "sampling_s": round(self.elapsed_s, 3),
                "capped": self.capped, "ends": self.ends,
                "kept": [int(k) for k in self.keep]}


def sample(suite: Suite, partner: Side, figure: Side, *, base: Optional[List[float]] = None,
           record: bool = False, absolute: bool = False, settle_each: bool = True,
           rates: Tuple[bool, bool] = (False, False)) -> Sampled:
    """Rounds of partner and figure chunks until the rule decides: against
    base (a stored baseline's per-round values), paired (base None, not
    recording: figure vs partner), or until precise enough to record.
    rates: whether each side samples a rate (higher is better) rather than
    seconds."""
    rule = _Rule(suite, [partner, figure], base, record, absolute, rates)
    policy = SequentialSampling(rule, chunk=suite.chunk, min_rounds=suite.min_rounds,
                                max_seconds=suite.max_seconds, max_rounds=suite.max_rounds)
    rule.policy = policy
    got = interleave([partner, figure], policy, settle=settle if settle_each else None,
                     settle_each=settle_each)
    errors = [None if m.status == OK else (m.note or m.status) for m in got]
    ends = list(policy.ends)
    wa, wb = getattr(partner, "windows", []), getattr(figure, "windows", [])
    lost = [max(wa[i].lost_share() if i < len(wa) else 0.0,
                wb[i].lost_share() if i < len(wb) else 0.0) for i in range(len(ends))]
    return Sampled(got[0].samples, got[1].samples, ends, rule.keep or [True] * len(ends),
                   policy.verdict, policy.chunk, policy.elapsed_s, policy.capped, errors, lost)


def costs(samples: Sequence[float]) -> List[float]:
    """Larger-is-worse values of rate samples: 1/rate."""
    return [1.0 / x if x > 0 else math.inf for x in samples]


def baseline_values(samples: Sequence[float], ref: Sequence[float],
                    params: Dict[str, Any], absolute: bool = False) -> List[float]:
    """A stored figure's per-round log(figure / reference): from its rounds
    when it has them (recorded by sequential sampling), else one value per
    sample against the reference chunk beside it (older baselines)."""
    ends, keep = params.get("ends"), params.get("kept")
    if absolute:
        ref = [1.0] * len(samples)
    if ends:
        # ref[i] is the median of sample i's reference chunk: one per round.
        refs, start = [], 0
        for end in ends:
            refs.append(ref[start:end] if end <= len(ref) else [])
            start = end
        flat = [x for r in refs for x in r]
        return round_logratios(samples, flat, ends, [bool(k) for k in keep] if keep else None)
    return [math.log(s / r) for s, r in zip(samples, ref) if s > 0 and r > 0]
