"""Two builds compared on this machine now (`hwtune check --against PYTHON`):
each time figure runs in two worker processes, one per build, alternating
chunk by chunk (the order rotated every round) until the sequential test
decides on the per-round log-ratios; counted figures are counted in both.

Interleaving the builds themselves is what lets a noisy shared runner
decide: on the 2-core EPYC VM a 1-thread GEMM's speed moved by up to 28%
within seconds (other guests, invisible to this one), far more than a 10%
regression, but both builds' chunks of one round see the same machine.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

from hwtune.check import timed
from hwtune.check.counted import count_figures
from hwtune.check.measure import FigureResult
from hwtune.check.remote import RemoteSide, Worker
from hwtune.check.suite import Suite


def measure_paired(suite: Suite, against: str, *, python: Optional[str] = None,
                   progress=None, figures_b: Optional[Dict[str, Any]] = None
                   ) -> Tuple[Dict[str, FigureResult], Dict[str, FigureResult], Dict[str, Any]]:
    """(other build's results, this build's results, about the other
    build). figures_b: figure name -> the figure as this side runs it
    (benchmarks run a deliberately changed figure there), default the
    suite's."""
    old: Dict[str, FigureResult] = {}
    cur: Dict[str, FigureResult] = {}
    timed_figs = [f for f in suite.figures if suite.metric_of(f) == "time"]
    info: Dict[str, Any] = {"python": against}
    if timed_figs:
        wa = Worker(against, label="--against")
        try:
            wb = Worker(python or sys.executable, label="current")
            try:
                info.update(version=wa.info.get("version"), isa=wa.info.get("isa"))
                for i, f in enumerate(timed_figs):
                    if progress:
                        progress(i, len(timed_figs), f.name)
                    fb = (figures_b or {}).get(f.name, f)
                    _one(suite, f, fb, wa, wb, old, cur)
            finally:
                wb.close()
        finally:
            wa.close()
    for m, figs in suite.counted().items():
        if progress:
            progress(0, 1, f"counting {len(figs)} figure(s) ({m}) in both builds")
        old.update(count_figures(figs, m, suite, python=against, label="--against"))
        figs_b = [(figures_b or {}).get(f.name, f) for f in figs]
        cur.update(count_figures(figs_b, m, suite, python=python, label="current"))
    return old, cur, info


def _one(suite: Suite, fa, fb, wa: Worker, wb: Worker, old, cur) -> None:
    from hwtune.errors import HwtuneError
    from hwtune.measure.clock import Stopwatch
    ra = FigureResult(fa.name, fa.kind, dict(fa.params), fa.unit, fa.higher_is_better)
    rb = FigureResult(fb.name, fb.kind, dict(fb.params), fb.unit, fb.higher_is_better)
    old[fa.name], cur[fa.name] = ra, rb
    watch = Stopwatch()
    try:
        sa = RemoteSide(wa, fa.to_json(), suite.settings())
        # The same calls per sample on both sides: the same loop is timed.
        sb = RemoteSide(wb, fb.to_json(), suite.settings(), inner=sa.inner)
    except HwtuneError as exc:
        ra.error = rb.error = str(exc)
        ra.wall_s = rb.wall_s = watch.elapsed()
        return
    try:
        got = timed.sample(suite, sa, sb, settle_each=False,
                           rates=(fa.higher_is_better, fb.higher_is_better))
    finally:
        sa.close()
        sb.close()
    # Both builds' chunks alternate in the same rounds: one wall time for both.
    ra.wall_s = rb.wall_s = watch.elapsed()
    ra.samples, rb.samples = list(got.a), list(got.b)
    for r, side in ((ra, sa), (rb, sb)):
        if side.inner is not None:
            r.params["inner"] = side.inner
        r.params.update(got.info())
    rb.params["paired"] = True
    rb.decision = got.decision
    ra.error, rb.error = got.errors[0], got.errors[1]
