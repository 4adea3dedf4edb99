"""ONNX axes checked against the rank they index, in one place for every
rule and fold of the importer: an axis is refused when it is out of the
range the ONNX spec gives the op, never wrapped with `% rank` (which took
axis=5 on a rank-4 tensor as axis 1 and imported a model ONNX Runtime
refuses).

ONNX's ranges: most ops take an axis in [-rank, rank) (negative counts from
the end); Flatten's axis is in [-rank, rank] (rank: everything in the first
dimension); an axis of an op's output (Unsqueeze's axes, OneHot's axis) is
checked against the output's rank; Transpose's perm lists 0..rank-1, no
negative axes."""

from __future__ import annotations

from typing import Iterable, List

from hwtune.onnx.errors import InvalidAxis


def normalize_axis(value, rank: int, what: str = "axis", inclusive: bool = False) -> int:
    """An ONNX axis as 0..rank-1 (0..rank with inclusive, Flatten's range);
    raises InvalidAxis outside -rank..rank-1 (-rank..rank with inclusive),
    as ONNX Runtime refuses it."""
    a = int(value)
    high = rank if inclusive else rank - 1
    if not -rank <= a <= high:
        raise InvalidAxis(f"{what} {a} is out of range for a rank-{rank} input "
                          f"({-rank}..{high})")
    return a + rank if a < 0 else a


def normalize_axes(values: Iterable, rank: int, what: str = "axes") -> List[int]:
    """normalize_axis of each value, in their order (duplicates kept: the
    caller decides whether ONNX allows them)."""
    return [normalize_axis(v, rank, what) for v in values]


def check_perm(perm: Iterable, rank: int) -> List[int]:
    """Transpose's perm as ints; raises InvalidAxis unless it is a
    permutation of 0..rank-1 (ONNX Runtime refuses a negative entry)."""
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise InvalidAxis(f"perm {perm} is not a permutation of the {rank} axes of its input")
    return perm
