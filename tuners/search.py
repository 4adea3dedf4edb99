"""The one interface every search implements: propose, record, best.

A search walks a finite `Space` (knob name -> legal values, plus an optional
`valid(params)` filter). The driver (`hwtune.tuners.loop.run_search`) asks
for a proposal, measures it (or finds it already stored in results.db),
and records the outcome; failed trials are recorded too, with their status,
and never win. Adding a search is one file: subclass `Search`, decorate with
`@register("name")`, and import the module in `hwtune/tuners/__init__.py`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hwtune.engine.knob_space import Params, Space, key_of
from hwtune.measure.result import ERROR, OK, TIMEOUT, WRONG_ANSWER, Measurement

# Trial outcomes (tuning_trials.status in results.db): the measurement
# layer's statuses, plus 'skipped' for a point a search generated but will
# not measure.
SKIPPED = "skipped"
STATUSES = (OK, ERROR, WRONG_ANSWER, TIMEOUT, SKIPPED)


@dataclass
class Outcome:
    """What one trial produced: a time in seconds when status is OK."""
    status: str
    seconds: Optional[float] = None
    samples: List[float] = field(default_factory=list)
    note: Optional[str] = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown trial status {self.status!r}")
        if self.status == OK and (self.seconds is None or not self.seconds > 0):
            raise ValueError("an ok trial needs a positive time")

    @classmethod
    def of(cls, m: Measurement) -> "Outcome":
        """A trial outcome from a measurement: its median when ok; the raw
        samples whatever the status."""
        if m.status == OK and not m.samples:
            return cls(ERROR, samples=[], note=m.note or "no samples")
        return cls(m.status, m.median if m.status == OK else None, list(m.samples), m.note)


class Search:
    """Base class: keeps the history and the best; subclasses implement
    `propose`. Minimises seconds."""

    name = "search"

    def __init__(self, space: Space, *, seed: int = 0, max_trials: Optional[int] = None):
        self.space = space
        self.seed = seed
        self.max_trials = max_trials
        self.history: List[Tuple[Params, Outcome]] = []
        self._seen: Dict[Tuple, Outcome] = {}
        self._skipped: List[Tuple[Params, str]] = []

    def propose(self) -> Optional[Params]:
        """The next params to measure, or None when the search is done."""
        raise NotImplementedError

    def record(self, params: Params, outcome: Outcome) -> None:
        self.history.append((dict(params), outcome))
        self._seen[key_of(params)] = outcome

    def seen(self, params: Params) -> bool:
        return key_of(params) in self._seen

    def outcome_of(self, params: Params) -> Optional[Outcome]:
        """The recorded outcome of these params, if any."""
        return self._seen.get(key_of(params))

    def skip(self, params: Params, why: str) -> None:
        """A point the search generated but will not propose (it fails
        `Space.valid`): kept for the driver to store as a 'skipped' trial."""
        self._skipped.append((dict(params), why))

    def take_skipped(self) -> List[Tuple[Params, str]]:
        out, self._skipped = self._skipped, []
        return out

    def close(self) -> None:
        """The driver is done with the search (finished, stopped or
        interrupted): let go of what a proposal holds (a shared study's
        running trial)."""

    def best(self) -> Optional[Tuple[Params, float]]:
        ok = [(p, o.seconds) for p, o in self.history if o.status == OK]
        return min(ok, key=lambda x: x[1]) if ok else None

    def done(self) -> bool:
        return self.max_trials is not None and len(self.history) >= self.max_trials


SEARCHES: Dict[str, type] = {}


def register(name: str):
    def deco(cls):
        cls.name = name
        SEARCHES[name] = cls
        return cls
    return deco


def make_search(name: str, space: Space, **kwargs) -> Search:
    from hwtune.errors import UsageError
    if name not in SEARCHES:
        raise UsageError(f"unknown search {name!r}: choose one of {', '.join(sorted(SEARCHES))}")
    return SEARCHES[name](space, **kwargs)


@register("grid")
class GridSearch(Search):
    """Exhaustive: every point of the space once, in order."""

    def __init__(self, space: Space, **kwargs):
        super().__init__(space, **kwargs)
        self._it = space.points()

    def propose(self) -> Optional[Params]:
        if self.done():
            return None
        for p in self._it:
            if not self.seen(p):
                return p
        return None


@register("random")
class RandomSearch(Search):
    """Uniform sampling without replacement: the baseline any smarter search
    should beat on the same budget (Optuna keeps one for the same reason)."""

    def __init__(self, space: Space, **kwargs):
        super().__init__(space, **kwargs)
        self._order = list(space.points())
        random.Random(self.seed).shuffle(self._order)

    def propose(self) -> Optional[Params]:
        if self.done():
            return None
        while self._order:
            p = self._order.pop()
            if not self.seen(p):
                return p
        return None


class ListSearch(Search):
    """Proposes a fixed list of params in order: a stage that enumerates
    rather than searches (the executor sweep's configs, the counts a climb
    skipped). Not registered: it has no space of its own. upcoming() lets
    the driver measure the remaining points together (interleaved)."""

    name = "enumerate"

    def __init__(self, points: Sequence[Params], *, name: Optional[str] = None, **kwargs):
        knobs: Dict[str, List[Any]] = {}
        for p in points:
            for k, v in p.items():
                if v not in knobs.setdefault(k, []):
                    knobs[k].append(v)
        super().__init__(Space(knobs or {"none": [None]}), **kwargs)
        self._points = [dict(p) for p in points]
        if name is not None:
            self.name = name  # the search column of its stored trials

    def upcoming(self) -> List[Params]:
        return [p for p in self._points if not self.seen(p)]

    def propose(self) -> Optional[Params]:
        if self.done():
            return None
        rest = self.upcoming()
        return rest[0] if rest else None
