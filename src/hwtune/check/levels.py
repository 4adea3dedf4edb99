"""A stored baseline as a distribution over fresh processes, and the test
of a check against it.

One run's rounds show only how a figure varies within that run; the level
of a whole run moves between processes (a neighbour's load that lasts the
run, where the pool's threads landed, the clock): issue #42's unchanged
build failed triad at +15.8% against a one-run baseline. So
`--update-baseline` records the figure's level in K processes (the check
process and K - 1 fresh worker processes, each interleaved with the
reference kernel), and a check's level is compared with that distribution
the way a new observation is compared with a sample of K:

    t = (L - mean(levels)) / sqrt(s^2 (1/K + 1/n) + se^2 / n)

with s the between-process standard deviation of the K stored levels, L
the mean of the check's n levels (its own run, then the re-measure in
fresh processes), se the check's within-run standard error (added because
a check may stop sampling sooner than a recording), Student t with K - 1
degrees of freedom. A level is the 20%-trimmed mean of a run's round
values, log seconds (absolute) or log(figure / reference) (relative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from hwtune.check.sequential import Decision, estimate, t_quantile

# Processes per stored baseline: the test multiplies the between-process
# spread by t(K - 1) x sqrt(1 + 1/K), at alpha = 1% 4.1 at K = 5, 3.6 at
# K = 6, 3.2 at K = 8, 3.0 at K = 10 (2.3 at infinity); recording costs K
# x one figure's sampling (1-4 s each here).
PROCESSES = 6
def sampling(suite):
    """The suite as one process's level is sampled, in a recording and in
    a check alike: 2 x min_rounds rounds (16), then stop. The spread
    between processes, not a longer run, is what limits the test, and a
    figure the machine cannot settle (triad under load: its recording ran
    into the 60 s cap in every process, 426 s for two figures x 6) costs
    a bounded time."""
    from dataclasses import replace
    return replace(suite, max_rounds=min(suite.max_rounds, 2 * suite.min_rounds))


def has_levels(old) -> bool:
    return old is not None and len(old.params.get("levels") or []) >= MIN_LEVELS


# Least stored levels for the distribution test; fewer (a baseline of an
# older hwtune, one process) keep the single-run test.
MIN_LEVELS = 3


@dataclass
class Level:
    abs: float      # trimmed mean of log(figure cost) over the run's kept rounds
    rel: float      # ... of log(figure cost / reference chunk median)
    se_abs: float
    se_rel: float

    def of(self, relative: bool):
        return (self.rel, self.se_rel) if relative else (self.abs, self.se_abs)

    def to_json(self) -> Dict[str, float]:
        return {"abs": self.abs, "rel": self.rel, "se_abs": self.se_abs, "se_rel": self.se_rel}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Level":
        return cls(float(d["abs"]), float(d["rel"]), float(d.get("se_abs", 0.0)),
                   float(d.get("se_rel", 0.0)))


def level_of(costs: Sequence[float], ref: Sequence[float], params: Dict[str, Any]
             ) -> Optional[Level]:
    """A run's level from its per-sample costs, reference chunk medians and
    rounds (params ends / kept), or None with fewer than 3 usable rounds."""
    from hwtune.check.timed import baseline_values
    out = []
    for absolute in (True, False):
        vals = baseline_values(costs, ref, params, absolute=absolute)
        vals = [v for v in vals if math.isfinite(v)]
        if len(vals) < 3:
            return None
        m, se, _ = estimate(vals, None)
        out += [m, se]
    return Level(out[0], out[2], out[1], out[3])


def stored(params: Dict[str, Any]) -> List[Level]:
    return [Level.from_json(d) for d in params.get("levels") or []]


def decide(base: Sequence[Level], cur: Sequence[Level], *, relative: bool, alpha: float,
           min_effect: float) -> Decision:
    """The check's levels `cur` (1 or 2) against the stored distribution:
    regression when the alpha-level lower bound of the slowdown is above 0
    and the estimate is at least min_effect; improvement its mirror; pass
    otherwise (the gate fails only on evidence; a slowdown of min_effect
    that is not significant passes with the smallest slowdown the spread
    shows in its reason)."""
    b = [lv.of(relative)[0] for lv in base]
    c = [lv.of(relative) for lv in cur]
    k, n = len(b), len(c)
    mb = sum(b) / k
    s2 = sum((x - mb) ** 2 for x in b) / (k - 1)
    mc = sum(m for m, _ in c) / n
    se2 = sum(se * se for _, se in c) / (n * n)
    sd = math.sqrt(s2 * (1.0 / k + 1.0 / n) + se2)
    d = mc - mb
    df = float(k - 1)
    ta = t_quantile(alpha, df)  # P(T > ta) = alpha
    lo, hi = d - ta * sd, d + ta * sd
    ratio = math.exp(d)
    eff = math.log1p(min_effect)
    z = d / sd if sd > 0 else (math.inf if d > 0 else -math.inf)
    from hwtune.check.sequential import t_sf
    p = t_sf(z, df) if math.isfinite(z) else (0.0 if z > 0 else 1.0)
    how = (f"{n} run{'s' if n > 1 else ''} vs {k} recorded processes (spread "
           f"{math.sqrt(s2):.1%})")
    pct = f"{ratio - 1:+.1%}"
    ci = (math.exp(lo), math.exp(hi))
    if lo > 0 and d >= eff:
        return Decision("regression", ratio, ci, p, n, 1,
                        f"{pct} slower (p={p:.2g}, {how})")
    if hi < 0 and -d >= eff:
        return Decision("improvement", ratio, ci, p, n, 1, f"{pct} (faster, {how})")
    if d < eff:
        return Decision("pass", ratio, ci, p, n, 1, f"{pct} (p={p:.2g}, {how})")
    # Slower by min_effect, not significantly: sampling longer would not
    # narrow the spread between processes, so "undecidable" (exit 3, a
    # failed CI step) would fail unchanged builds on a noisy figure; the
    # reason names the slowdown this spread can show.
    return Decision("pass", ratio, ci, p, n, 1,
                    f"{pct}, not significant: this spread shows slowdowns from "
                    f"{math.expm1(ta * sd):+.0%} ({how})")
