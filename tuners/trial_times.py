"""Trial times measured by earlier tunings of the same model on this host,
for the budget plan (tuners/plan.py) to cost a workload's trials at
instead of its static estimate.

A trial's time is the gap between its tuning_trials row and the row the
same search stored before it in the same run: everything one trial costs
(the search's proposal, the one-op engine's build, the samples, the output
check, the commit), where the static estimate knows only the samples and a
fixed overhead. Trials are committed one at a time as they finish
(tuners/loop.py), so the gaps are their wall times; skipped points are
stored without being measured and are left out.

Only runs of the same graph with the same samples per trial (--reps) are
read, newest first: a trial with 5 samples is not one with 2.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from hwtune.db.timestamps import parse
from hwtune.measure.stats import median

# Gaps needed before their median replaces the estimate: a search's first
# trials also pay its start (the default point's engine, Optuna's study),
# so with fewer than 3 gaps one slow start is the median.
MIN_GAPS = 3
# Earlier runs read, newest first: the latest that measured a subject is
# the closest to this machine's state now.
MAX_RUNS = 5

Key = Tuple[str, str, str, Optional[int]]  # tuner, subject, ISA, threads (None: any)


class TrialTimes:
    """Measured seconds per trial of each subject in the newest earlier
    run (of one graph on one host, same reps) that measured enough of them."""

    def __init__(self, db, host_key: str, graph_hash: str, reps: int):
        runs = [r for r in db.runs(host_key, "tune")
                if r["options"].get("graph_hash") == graph_hash
                and r["options"].get("reps") == reps]
        self._runs: List[Tuple[int, List[dict]]] = [
            (r["run_id"], [t for t in db.trials(host_key, run_id=r["run_id"])
                           if t["status"] != "skipped"])
            for r in reversed(runs[-MAX_RUNS:])]

    def get(self, tuner: str, subject: str, isa: str,
            threads: Optional[int] = None) -> Optional[Tuple[float, int]]:
        """(median seconds per trial, the run that measured them), or None
        when no earlier run measured MIN_GAPS + 1 trials of the subject."""
        for run_id, rows in self._runs:
            times = [parse(t["created_at"]).timestamp() for t in rows
                     if t["tuner"] == tuner and t["subject"] == subject and t["isa"] == isa
                     and (threads is None or t["threads"] == threads)]
            gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
            if len(gaps) >= MIN_GAPS:
                return median(gaps), run_id
        return None
