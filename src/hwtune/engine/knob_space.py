"""A template's knob space: knob name -> legal values, plus an optional
filter over whole points. The CONV templates declare theirs (hwtune.native.conv,
hwtune.native.grad_conv); a run checks a tuned row against it
(hwtune.engine.conv_knobs) and every search of hwtune.tuners walks it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple

Params = Dict[str, Any]


@dataclass(frozen=True)
class Space:
    """knobs: name -> legal values (order matters: grid order, hill-climb
    direction). valid: optional filter over whole proposals."""
    knobs: Mapping[str, Sequence[Any]]
    valid: Optional[Callable[[Params], bool]] = None

    def __post_init__(self):
        for name, values in self.knobs.items():
            if len(values) == 0:
                raise ValueError(f"knob {name!r} has no legal values")

    def points(self) -> Iterator[Params]:
        names = list(self.knobs)
        for combo in itertools.product(*(self.knobs[n] for n in names)):
            p = dict(zip(names, combo))
            if self.valid is None or self.valid(p):
                yield p

    def size(self) -> int:
        return sum(1 for _ in self.points())

    def contains(self, params: Params) -> bool:
        return (set(params) == set(self.knobs)
                and all(params[k] in self.knobs[k] for k in self.knobs)
                and (self.valid is None or self.valid(params)))


def key_of(params: Params) -> Tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
