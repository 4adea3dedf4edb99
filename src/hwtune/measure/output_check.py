"""Output checks: a candidate's outputs against a reference, before it is
timed. A mismatch is a result ('wrong_answer'), not an exception."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

import numpy as np

CHECKS = ("peer", "numpy", "none")
# --check passes when max|engine - numpy| <= CHECK_TOL * max|numpy| on every
# output. Measured worst case 2.1e-6 (pathnet-small; lstm, phased-lstm,
# resnet18, inception-small all <= 4.4e-7, identical under all three
# schedulers): 1e-4 leaves ~50x for larger graphs and other ISAs.
CHECK_TOL = 1e-4


def output_mismatch(got, want, tol: Optional[float] = None) -> Optional[str]:
    """None when got is within tol (default: hwtune run --check's) times
    max |want| of want, NaN matching NaN; else a one-line reason."""
    if tol is None:
        tol = CHECK_TOL
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    both_nan = np.isnan(got) & np.isnan(want)
    diff = np.where(both_nan, 0.0, np.nan_to_num(np.abs(got - want), nan=np.inf))
    scale = float(np.nan_to_num(np.abs(want)).max(initial=0)) or 1.0
    err = float(diff.max(initial=0))
    if err <= tol * scale:
        return None
    return f"max |engine - reference| = {err:.3g} > {tol:g} x {scale:.3g}"


def wrong_outputs(outputs: Optional[Mapping[str, object]], reference: Mapping[str, object],
                  names: Iterable[str], tol: Optional[float] = None) -> Optional[str]:
    """The first output of `names` that differs from the reference (by more
    than tol, output_mismatch's), as a one-line reason; None when all
    match."""
    if outputs is None:
        return "the candidate has no outputs to check"
    for name in names:
        bad = output_mismatch(outputs[name], reference[name], tol)
        if bad:
            return f"output {name!r}: {bad}"
    return None
