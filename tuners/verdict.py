"""The final verdict of tune-graph: which measured candidate is stored.

The candidates were sampled interleaved (measure.engine.measure_engines),
round by round, so their i-th samples form pairs. The incumbent is what
`hwtune run` would use without this run: the stored tuned config when there
is one, else the default. A challenger replaces it only when the paired
confidence interval of incumbent/challenger lies wholly above 1.0: a gain
the interval cannot show is reported as "no significant gain" and the
incumbent stays, so a re-run on a busier machine never stores a slower
config than the one it found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from hwtune.measure import OK
from hwtune.measure.stats import paired_ratio_ci

# Level of the interval on the ratio of paired samples: 95%, as hwtune
# check's intervals, so one A/A comparison in twenty may still show a
# "gain"; the stored config then changes for an equally fast one, never for
# a slower one beyond the interval.
LEVEL = 0.95


@dataclass
class Ratio:
    """incumbent / candidate seconds (above 1: the candidate is faster)."""
    median: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.low > 1.0

    def to_json(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "level": LEVEL}


@dataclass
class Verdict:
    chosen: object                      # the Candidate to store (or keep)
    incumbent: object
    speedup: Optional[Ratio]            # default / chosen, paired
    why: List[str] = field(default_factory=list)

    @property
    def replaced(self) -> bool:
        return self.chosen is not self.incumbent


def ratio(slow: Sequence[float], fast: Sequence[float]) -> Optional[Ratio]:
    """slow/fast over paired samples; None without a pair."""
    if not slow or not fast:
        return None
    return Ratio(*paired_ratio_ci(slow, fast, level=LEVEL))


def decide(default, candidates: Sequence, incumbent=None) -> Verdict:
    """default: the default Candidate (always measured OK: the pipeline
    raises otherwise); candidates: every other measured Candidate, the
    stored one included; incumbent: the stored Candidate, or None."""
    why: List[str] = []
    if incumbent is not None and incumbent.status != OK:
        why.append(f"final: the stored tuned config failed ({incumbent.status}: "
                   f"{incumbent.note}); it is replaced")
        incumbent = None
    inc = incumbent if incumbent is not None else default
    others = [c for c in [default] + list(candidates)
              if c is not inc and c.status == OK and c.samples]
    best: Optional[Tuple[object, Ratio]] = None
    for c in sorted(others, key=lambda c: c.median_s):
        r = ratio(inc.samples, c.samples)
        if r is not None and (best is None or r.median > best[1].median):
            best = (c, r)
    chosen = inc
    name = "the stored tuned config" if inc is not default else "the default"
    if best is None:
        why.append(f"final: nothing else ran: keeping {name}")
    elif best[1].significant:
        chosen = best[0]
        why.append(f"final: '{chosen.label}' beat {name} by {_x(best[1])} "
                   f"({len(chosen.samples)} paired samples, interleaved)")
    elif best[1].high < 1.0:
        why.append(f"final: {name} was fastest: the best other candidate, "
                   f"'{best[0].label}', ran {_x(best[1])} against it")
    else:
        why.append(f"final: no significant gain: the fastest other candidate, "
                   f"'{best[0].label}', ran {_x(best[1])} against {name}; the interval "
                   f"includes 1.0, so {name} is kept")
    speedup = ratio(default.samples, chosen.samples) if chosen is not default else \
        Ratio(1.0, 1.0, 1.0)
    return Verdict(chosen, inc, speedup, why)


def _x(r: Ratio) -> str:
    return f"{r.median:.2f}x ({LEVEL:.0%} interval {r.low:.2f}-{r.high:.2f}x)"
