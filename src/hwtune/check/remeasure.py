"""A suspected regression is measured again before it fails the build.

The gate's first measurement of a time figure runs in the `hwtune check`
process, beside its reference kernel; a stored baseline is one earlier such
process. On a shared runner one process can land in a slow phase the other
did not (issue #42: `hwtune check --update-baseline` then `hwtune check` on
the same build failed triad-n4194304-t2 at +15.8%, twice on a loaded
machine), and a false alarm is what makes teams switch a gate off. So a
figure the sequential test calls a regression is sampled again, against the
same baseline, by fresh worker processes (hwtune.check.worker: one for the
figure, one for its reference kernel, chunks alternating round by round as
in the first measurement), and fails only when that measurement says
regression too; a re-measure that passes turns the figure into a pass with
both figures named, one that cannot decide into undecidable (exit 3, not 1).

Model figures keep their first verdict: a worker runs a model without the
results.db its tuned config lives in, so it would time another config.
"""

from __future__ import annotations

import sys
from typing import Optional, Tuple

from hwtune.check import timed
from hwtune.check.measure import FigureResult
from hwtune.check.suite import Figure, Suite
from hwtune.errors import HwtuneError


def can_remeasure(fig: Figure, old: Optional[FigureResult]) -> bool:
    return (fig.kind != "model" and old is not None and old.metric == "time"
            and bool(old.samples) and len(old.ref) == len(old.samples))


def remeasure(suite: Suite, fig: Figure, ref: Figure, old: FigureResult, *, relative: bool,
              inner_hints=None, python: Optional[str] = None
              ) -> Tuple[Optional[object], FigureResult]:
    """(the sequential test's Decision, or None when the workers failed;
    the re-measured FigureResult) of fig against the baseline's `old`."""
    from hwtune.check import levels
    if levels.has_levels(old):
        # Against a distribution of levels: a level sampled as they were
        # (gate.level_decision decides).
        _, res = in_workers(levels.sampling(suite), fig, ref, base=None, relative=relative,
                            inner_hints=inner_hints, python=python, record=True)
        return (None if res.error else "levels"), res
    base = timed.baseline_values(old.costs(), old.ref, old.params, absolute=not relative)
    return in_workers(suite, fig, ref, base=base, relative=relative, inner_hints=inner_hints,
                      python=python)


def record_level(suite: Suite, fig: Figure, ref: Figure, *, inner_hints=None,
                 python: Optional[str] = None):
    """One fresh process's level of fig for a baseline (levels.py): the
    figure and its reference kernel in two new workers, sampled as
    `--update-baseline` samples; (Level or None, the FigureResult)."""
    from hwtune.check import levels
    _, res = in_workers(levels.sampling(suite), fig, ref, base=None, relative=False,
                        inner_hints=inner_hints, python=python, record=True)
    if res.error or not res.samples:
        return None, res
    return levels.level_of(res.costs(), res.ref, res.params), res


def in_workers(suite: Suite, fig: Figure, ref: Figure, *, base, relative: bool,
               inner_hints=None, python: Optional[str] = None, record: bool = False
               ) -> Tuple[Optional[object], FigureResult]:
    """fig sampled in a fresh worker process, rounds alternating with its
    reference kernel in another: against base (per-round values), or
    record=True until precise enough to record."""
    from hwtune.check.remote import RemoteSide, Worker
    from hwtune.measure.clock import Stopwatch

    python = python or sys.executable
    hints = inner_hints or {}
    res = FigureResult(fig.name, fig.kind, dict(fig.params), fig.unit, fig.higher_is_better)
    watch = Stopwatch()
    try:
        wr = Worker(python, label="re-measure reference")
        try:
            wf = Worker(python, label="re-measure")
            try:
                sr = RemoteSide(wr, ref.to_json(), suite.settings(), inner=hints.get(ref.name))
                sf = RemoteSide(wf, fig.to_json(), suite.settings(),
                                inner=hints.get(fig.name))
                try:
                    got = timed.sample(suite, sr, sf, base=base, record=record,
                                       absolute=not relative, settle_each=False,
                                       rates=(False, fig.higher_is_better))
                finally:
                    sr.close()
                    sf.close()
            finally:
                wf.close()
        finally:
            wr.close()
    except HwtuneError as exc:
        res.error = f"re-measure failed: {exc}"
        res.wall_s = watch.elapsed()
        return None, res
    res.samples = list(got.b)
    from hwtune.check.measure import _ref_samples
    res.ref = _ref_samples(got.b, got.a, got.ends)
    res.params.update(got.info(), reference=ref.name, remeasured=True)
    if sf.inner is not None:
        res.params["inner"] = sf.inner
    res.wall_s = watch.elapsed()
    if any(got.errors):
        res.error = next(e for e in got.errors if e)
        return None, res
    return got.decision, res
