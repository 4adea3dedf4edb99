"""Hill climbing along one ordered knob (the runtime concurrency control
paper's per-op thread search, Section III-C).

The climb starts at the knob's first value and moves `step` values at a
time (the paper's interval x; the last step is shortened to land on the last
value, the climb's natural end) while the best time improves; it stops at
the first position that is not faster, at one where every point failed, or
at the last value. At each position it measures every valid combination of
the other knobs (the thread climb's "with and without cache sharing"
placements) and the position counts with the best of them. A local search:
on a curve with a bump it stops at the bump (the paper found op curves
convex).
"""

from __future__ import annotations

from typing import List, Optional

from hwtune.tuners.search import OK, Params, Search, Space, register


@register("hillclimb")
class HillClimb(Search):
    """along: the knob climbed (default: the first); step: values per move.
    floor_s: a first position faster than this ends the climb there (an op
    too small for more threads to pay off). `ended` says why it stopped:
    'slower', 'failed', 'last', 'floor' (None while running)."""

    def __init__(self, space: Space, *, along: Optional[str] = None, step: int = 1,
                 floor_s: Optional[float] = None, **kwargs):
        super().__init__(space, **kwargs)
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ValueError(f"invalid step {step!r}: must be an integer >= 1")
        self.along = along if along is not None else next(iter(space.knobs))
        if self.along not in space.knobs:
            raise ValueError(f"unknown knob {self.along!r} to climb along")
        self.values = list(space.knobs[self.along])
        self.step, self.floor_s = step, floor_s
        self._pos = 0
        self._best: Optional[float] = None
        self.climbed: List[object] = []   # positions measured, in order
        self.ended: Optional[str] = None

    def _points(self, pos: int) -> List[Params]:
        others = Space({k: v for k, v in self.space.knobs.items() if k != self.along})
        value = self.values[pos]
        return [p for p in ({self.along: value, **o} for o in others.points())
                if self.space.valid is None or self.space.valid(p)]

    def _position_best(self, points: List[Params]) -> Optional[float]:
        times = [o.seconds for o in map(self.outcome_of, points) if o and o.status == OK]
        return min(times) if times else None

    def _move(self, best: Optional[float]) -> None:
        """The current position is complete: go on or stop."""
        self.climbed.append(self.values[self._pos])
        first = self._best is None
        if best is None:
            self.ended = "failed"
        elif not first and best >= self._best:
            self.ended = "slower"
        elif first and self.floor_s is not None and best < self.floor_s:
            self._best, self.ended = best, "floor"
        elif self._pos == len(self.values) - 1:
            self._best, self.ended = best, "last"
        else:
            self._best = best
            self._pos = min(self._pos + self.step, len(self.values) - 1)

    def propose(self) -> Optional[Params]:
        while self.ended is None and not self.done():
            points = self._points(self._pos)
            for p in points:
                if not self.seen(p):
                    return p
            self._move(self._position_best(points))
        return None
