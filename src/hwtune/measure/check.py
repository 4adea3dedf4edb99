"""Output checks: a candidate's outputs against a reference, before it is
timed. A mismatch is a result ('wrong_answer'), not an exception."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

import numpy as np

CHECKS = ("peer", "numpy", "none")


def output_mismatch(got, want, tol: Optional[float] = None) -> Optional[str]:
    """None when got is within tol (default: hwtune run --check's) times
    max |want| of want, NaN matching NaN; else a one-line reason."""
    if tol is None:
        from hwtune.engine.runner import CHECK_TOL
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


def reference_outputs(graph, check: str = "peer"):
    """What every candidate's outputs must match. 'numpy': the numpy
    reference (hwtune run --check's oracle; 45 s for inception_small and 18 s
    for lstm_medium on this shared box, too slow for every sweep). 'peer':
    one sequential 1-thread engine run, so a scheduler that races or skips
    an op shows as a mismatch while kernel correctness stays the kernels'
    own tests' job."""
    if check == "numpy":
        from hwtune.graph import run_reference
        return run_reference(graph)
    from hwtune.engine.config import EngineConfig
    from hwtune.engine.runner import open_engine
    e = open_engine(graph, EngineConfig(executors=1, threads=1, scheduler="sequential"))
    try:
        e.run()
        return e.outputs()
    finally:
        e.close()
