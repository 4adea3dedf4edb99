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
    candidates: List[object] = field(default_factory=list)  # every one measured

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
    return Verdict(chosen, inc, speedup, why, [default] + list(candidates))


def _x(r: Ratio) -> str:
    return f"{r.median:.2f}x ({LEVEL:.0%} interval {r.low:.2f}-{r.high:.2f}x)"


def _cand(c) -> dict:
    return {"label": c.label, "config": c.config.to_json(), "median_s": c.median_s,
            "mad_s": c.mad_s}


def summary(default, verdict: Optional[Verdict], challenger, chosen, speedup: Optional[Ratio],
            *, config_id: Optional[int], kept_stored: bool) -> dict:
    """The one verdict of a tuning, as data every format shows the same way:

    uses         'tuned' (a new config, stored), 'stored' (the stored tuned
                 config stays) or 'default' (nothing named tuned is stored)
    tuned        the stored config `hwtune run` uses, with its figure; None
                 when that is the default
    speedup      default / what run uses (paired), measured_over 'processes'
                 (pairs of fresh processes, confirm.py) or 'one process'
    not_confirmed  the candidate that won inside the tuning process and
                 failed (or had no time for) the cross-process confirmation:
                 its in-process ratio and its ratio over fresh processes
    best_other   with no winner, the fastest other candidate's in-process
                 ratio (the gain that did not show)
    verdict None (a result assembled without the final comparison): the
    last two are None."""
    over_processes = bool(chosen.process_s and default.process_s) and chosen is not default
    out = {"uses": "default" if chosen is default else "stored" if kept_stored else "tuned",
           "config_id": config_id, "default": _cand(default),
           "tuned": None if chosen is default else _cand(chosen),
           "speedup": speedup.to_json() if speedup else None,
           "measured_over": "processes" if over_processes else "one process",
           "pairs": len(chosen.process_s) if over_processes else None,
           "not_confirmed": None, "best_other": None}
    if verdict is None:
        return out
    inc = verdict.incumbent
    against = "the default" if inc is default else "the stored tuned config"
    if challenger is not inc and challenger is not chosen:
        proc = (ratio(inc.process_s, challenger.process_s)
                if inc.process_s and challenger.process_s else None)
        out["not_confirmed"] = {
            "label": challenger.label, "against": against,
            "in_process": ratio(inc.samples, challenger.samples).to_json(),
            "processes": proc.to_json() if proc else None,
            "pairs": len(challenger.process_s) if proc else 0}
    elif challenger is inc:
        others = [(c, ratio(inc.samples, c.samples)) for c in verdict_others(verdict)]
        others = [(c, r) for c, r in others if r is not None]
        if others:
            c, r = max(others, key=lambda cr: cr[1].median)
            out["best_other"] = {"label": c.label, "against": against,
                                 "in_process": r.to_json()}
    return out


def verdict_others(verdict: Verdict) -> List[object]:
    """The measured candidates other than the incumbent (OK, with samples)."""
    return [c for c in verdict.candidates if c is not verdict.incumbent
            and c.status == OK and c.samples]
