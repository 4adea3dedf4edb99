"""Two-sample statistics for the regression gate: pure functions, no I/O.

Samples are costs (seconds, or 1/rate for throughput figures): larger is
worse. The gate asks one question per figure, "is the current run slower
than the baseline?", and answers it three ways that must agree before it
says yes: a one-sided Mann-Whitney U test (rank-based: one sample hit by
another process moves it by one rank, not by its size), a bootstrap
confidence interval on the ratio of medians (how large the slowdown is, with
its uncertainty) and a noise floor (how much two equal runs of this figure
differ by chance on this host).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence, Tuple

import numpy as np

from hwtune.scan.stats import median

# Below this many samples per side no test here can reach p < 0.05 (the
# smallest exact one-sided p of 3 vs 3 is 1/20): the verdict is
# 'undecidable', not a guess.
MIN_SAMPLES = 3
# The exact U distribution is enumerated up to this size per side (a
# 30 x 30 table of counts takes ~10 ms once, then it is cached); above it,
# and whenever there are ties, the normal approximation with tie correction
# is within 0.002 of exact at these sizes.
EXACT_MAX = 30
# On a noisy host (noise floor above min_effect) a change must clear this
# many noise floors to count: the floor comes from one run, and between runs
# the loaded 2-core dev box moved further (A/A ratios of medians up to 1.7x
# at within-run floors of 0.3-0.9 at load average ~13, single 10 ms samples,
# benchmarks/bench_gate.py); re-deciding those recorded samples, a margin of
# 1x flagged 5 of 30 A/A comparisons, 2x flagged 1.
NOISY_MARGIN = 2.0
# Bootstrap resamples: 2000 puts the 2.5% quantile of the ratio within
# ~0.1% of its value at 20000 on the suite's figures (n = 15), for ~5 ms.
BOOTSTRAP = 2000


@lru_cache(maxsize=None)
def _u_counts(n1: int, n2: int) -> Tuple[int, ...]:
    """How many rank orders of n1 x's and n2 y's give each U = #(x > y).

    Recurrence on the largest value: it is an x (beating all n2 y's) or a y
    (beating nothing)."""
    if n1 == 0 or n2 == 0:
        return (1,)
    a = _u_counts(n1 - 1, n2)  # largest is an x: U shifts by n2
    b = _u_counts(n1, n2 - 1)  # largest is a y
    out = [0] * (n1 * n2 + 1)
    for u, c in enumerate(a):
        out[u + n2] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


@dataclass(frozen=True)
class UTest:
    u: float        # #(current > baseline) + half the ties
    p: float        # one-sided: P(U >= u) when both come from one distribution
    method: str     # 'exact' or 'normal'


def mann_whitney_greater(current: Sequence[float], baseline: Sequence[float]) -> UTest:
    """One-sided Mann-Whitney U test of 'current tends to be larger'.

    Exact for small samples without ties; otherwise the normal
    approximation with the tie correction of the variance and a continuity
    correction. Raises ValueError on an empty side."""
    x = np.asarray(current, dtype=np.float64)
    y = np.asarray(baseline, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    allv = np.concatenate([x, y])
    # Midranks: tied values share the mean of the ranks they span.
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(len(allv))
    sv = allv[order]
    i = 0
    ties = []
    while i < len(sv):
        j = i
        while j + 1 < len(sv) and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    if not ties and n1 <= EXACT_MAX and n2 <= EXACT_MAX:
        counts = _u_counts(n1, n2)
        total = math.comb(n1 + n2, n1)
        k = int(round(u))
        return UTest(u, sum(counts[k:]) / total, "exact")
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal: no evidence either way
        return UTest(u, 1.0, "normal")
    z = (u - mu - 0.5) / math.sqrt(var)
    return UTest(u, 0.5 * math.erfc(z / math.sqrt(2.0)), "normal")


def _boot_medians(xs: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    idx = rng.integers(0, len(xs), size=(b, len(xs)))
    return np.median(xs[idx], axis=1)


def ratio_ci(current: Sequence[float], baseline: Sequence[float], *, level: float = 0.95,
             resamples: int = BOOTSTRAP, seed: int = 0) -> Tuple[float, float]:
    """Percentile bootstrap CI of median(current) / median(baseline).

    Seeded: the same samples always give the same interval (a CI gate that
    flips on a rerun of identical data would be worse than useless)."""
    x = np.asarray(current, dtype=np.float64)
    y = np.asarray(baseline, dtype=np.float64)
    rng = np.random.default_rng(seed)
    mx, my = _boot_medians(x, rng, resamples), _boot_medians(y, rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(my > 0, mx / np.where(my > 0, my, 1.0), np.inf)
    lo, hi = np.quantile(r, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def noise_floor(samples: Sequence[float], *, level: float = 0.95, resamples: int = BOOTSTRAP,
                seed: int = 1) -> float:
    """How far apart the medians of two runs of this figure land by chance.

    A/A split by bootstrap: two resamples of the same samples, each as large
    as the original, play 'baseline' and 'current'; the floor is the `level`
    quantile of |ratio of their medians - 1|. 0 when every sample is equal
    (MAD = 0: no evidence of noise)."""
    xs = np.asarray(samples, dtype=np.float64)
    if len(xs) < 2 or float(np.ptp(xs)) == 0.0:
        return 0.0
    rng = np.random.default_rng(seed)
    a, b = _boot_medians(xs, rng, resamples), _boot_medians(xs, rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(a / b - 1.0)
    r = r[np.isfinite(r)]
    return float(np.quantile(r, level)) if len(r) else math.inf


@dataclass(frozen=True)
class Thresholds:
    alpha: float = 0.01        # one-sided significance per figure
    min_effect: float = 0.05   # smallest slowdown (fraction) worth failing a build
    level: float = 0.95        # bootstrap CI level

    def validate(self) -> "Thresholds":
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha!r}")
        if not 0 < self.min_effect < 10:
            raise ValueError(f"min_effect must be in (0, 10), got {self.min_effect!r}")
        if not 0.5 < self.level < 1:
            raise ValueError(f"level must be in (0.5, 1), got {self.level!r}")
        return self


@dataclass(frozen=True)
class Verdict:
    status: str                 # pass | regression | improvement | undecidable
    ratio: Optional[float]      # median(current) / median(baseline) of the costs
    ci: Optional[Tuple[float, float]]
    p: Optional[float]
    noise: Optional[float]      # noise floor (fraction) of this figure on this host
    reason: str

    @property
    def slowdown(self) -> Optional[float]:
        return None if self.ratio is None else self.ratio - 1.0


def compare(current: Sequence[float], baseline: Sequence[float],
            th: Thresholds = Thresholds(), drift: float = 0.0) -> Verdict:
    """Decide one figure from raw cost samples (larger = worse).

    regression: slower with p < alpha, the CI's lower end above 1, and a
    slowdown of at least min_effect. When the noise floor is above
    min_effect the machine cannot resolve a min_effect change: the figure
    is 'undecidable' unless the slowdown also clears NOISY_MARGIN noise
    floors (a 3x regression on a noisy host is still a regression).

    drift: how far the machine itself moved between the two runs, as a
    fraction (the gate passes |reference kernel ratio - 1| in absolute
    mode). The within-run floor cannot see a neighbour's build that ran
    through the whole current run and not the baseline; the reference can,
    and the larger of the two is the noise floor."""
    cur = [float(v) for v in current if math.isfinite(float(v))]
    base = [float(v) for v in baseline if math.isfinite(float(v))]
    if len(cur) < MIN_SAMPLES or len(base) < MIN_SAMPLES:
        return Verdict("undecidable", None, None, None, None,
                       f"too few samples ({len(base)} baseline, {len(cur)} current; need "
                       f">= {MIN_SAMPLES} each)")
    mb, mc = median(base), median(cur)
    if mb <= 0 or mc <= 0:
        return Verdict("undecidable", None, None, None, None,
                       "a median is not positive: the figure measured nothing")
    ratio = mc / mb
    ci = ratio_ci(cur, base, level=th.level)
    within = max(noise_floor(base, level=th.level), noise_floor(cur, level=th.level))
    noise = max(within, abs(drift))
    why = (f"noise floor {noise:.1%}" if within >= abs(drift) else
           f"the reference kernel moved {drift:+.1%} since the baseline run (machine load "
           "changed; --relative divides it out)")
    slower = mann_whitney_greater(cur, base)
    faster = mann_whitney_greater(base, cur)
    pct = f"{ratio - 1:+.1%}"
    if slower.p < th.alpha and ci[0] > 1.0 and ratio - 1 >= th.min_effect:
        if noise > th.min_effect and ratio - 1 < NOISY_MARGIN * noise:
            return Verdict("undecidable", ratio, ci, slower.p, noise,
                           f"{pct} but too noisy: {why} > threshold {th.min_effect:.0%}")
        return Verdict("regression", ratio, ci, slower.p, noise,
                       f"{pct} slower (p={slower.p:.2g}, CI {ci[0]:.3f}-{ci[1]:.3f})")
    # Speed-ups mirror slow-downs in log space: 1.25x slower <-> 1/1.25 as fast.
    gain = 1.0 / ratio - 1.0
    if faster.p < th.alpha and ci[1] < 1.0 and gain >= th.min_effect \
            and not (noise > th.min_effect and gain < NOISY_MARGIN * noise):
        return Verdict("improvement", ratio, ci, slower.p, noise,
                       f"{pct} (faster, p={faster.p:.2g})")
    if noise > th.min_effect:
        return Verdict("undecidable", ratio, ci, slower.p, noise,
                       f"too noisy: {why} > threshold {th.min_effect:.0%}")
    return Verdict("pass", ratio, ci, slower.p, noise, f"{pct} (p={slower.p:.2g})")
