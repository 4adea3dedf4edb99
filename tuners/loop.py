"""The search driver: propose, measure (or reuse), store, record.

Every trial is committed to results.db before the next proposal, so Ctrl-C
loses at most the trial in flight, and a rerun answers the proposals it has
already seen from the database instead of measuring them again. Searches are
deterministic for a seed, so a resumed search walks the same path as an
uninterrupted one and ends at the same best.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from hwtune.errors import HwtuneError
from hwtune.scan.stats import mad
from hwtune.tuners.search import (ERROR, OK, SKIPPED, TIMEOUT, Outcome, Params, Search)


class TrialTimeout(Exception):
    """Raised by a measure() that gave up on a trial over its time limit."""


@dataclass
class SearchResult:
    best_params: Optional[Params]
    best_s: Optional[float]
    trials: int      # outcomes the search saw (measured + reused)
    measured: int    # measured in this call
    reused: int      # answered from results.db
    stopped: str     # 'done' | 'deadline' | 'max_trials'


class TrialStore:
    """The tuning_trials rows of one subject on one host / ISA / thread count."""

    def __init__(self, db, run_id: Optional[int], host_key: str, *, tuner: str, subject: str,
                 isa: str, threads: int):
        self.db, self.run_id, self.host_key = db, run_id, host_key
        self.tuner, self.subject, self.isa, self.threads = tuner, subject, isa, int(threads)

    def _where(self) -> dict:
        return dict(tuner=self.tuner, subject=self.subject, isa=self.isa, threads=self.threads)

    def lookup(self, params: Params) -> Optional[Outcome]:
        """The latest stored trial of exactly these params (any search)."""
        row = self.db.trial(self.host_key, params=params, **self._where())
        if row is None:
            return None
        return Outcome(row["status"], row["median_s"], list(row["samples"]), row["note"])

    def add(self, params: Params, outcome: Outcome, search: str) -> int:
        samples = list(outcome.samples)
        return self.db.add_trial(
            self.run_id, self.host_key, search=search, params=params, status=outcome.status,
            median_s=outcome.seconds, mad_s=mad(samples) if samples else None,
            samples=samples, note=outcome.note, **self._where())

    def rows(self) -> list:
        return self.db.trials(self.host_key, **self._where())


def measure_once(measure: Callable[[Params], Outcome], params: Params,
             trial_timeout_s: Optional[float]) -> Outcome:
    """One measurement with every failure turned into an outcome (Ctrl-C and
    other BaseExceptions propagate)."""
    t0 = time.monotonic()
    try:
        out = measure(params)
    except TrialTimeout as exc:
        return Outcome(TIMEOUT, note=str(exc) or "over the trial time limit")
    except HwtuneError as exc:
        return Outcome(ERROR, note=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a kernel or binding failure must not end the search
        return Outcome(ERROR, note=f"{type(exc).__name__}: {exc}")
    spent = time.monotonic() - t0
    if not isinstance(out, Outcome):
        return Outcome(ERROR, note=f"measure() returned {type(out).__name__}, not an Outcome")
    # The C call cannot be interrupted from here; a trial that overran is
    # still reported as a timeout so that no search can win on it.
    if trial_timeout_s is not None and spent > trial_timeout_s and out.status == OK:
        return Outcome(TIMEOUT, note=f"took {spent:.3g} s, over the {trial_timeout_s:.3g} s "
                                     f"trial limit")
    return out


def run_search(search: Search, measure: Callable[[Params], Outcome],
               store: Optional[TrialStore] = None, *, deadline: Optional[float] = None,
               on_trial: Optional[Callable[[Params, Outcome, bool], None]] = None,
               trial_timeout_s: Optional[float] = None) -> SearchResult:
    """Drive `search` to its end, its budget, or `deadline` (a
    time.monotonic() value). on_trial(params, outcome, reused) is called
    after each outcome is recorded."""
    measured = reused = 0
    stopped = "done"
    while True:
        params = search.propose()
        for p, why in search.take_skipped():
            if store is not None and store.lookup(p) is None:
                store.add(p, Outcome(SKIPPED, note=why), search.name)
        if params is None:
            if search.done():
                stopped = "max_trials"
            break
        outcome = store.lookup(params) if store is not None else None
        was_reused = outcome is not None
        if was_reused:
            reused += 1
        else:
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "deadline"
                break
            outcome = measure_once(measure, params, trial_timeout_s)
            if store is not None:
                store.add(params, outcome, search.name)
            measured += 1
        search.record(params, outcome)
        if on_trial is not None:
            on_trial(params, outcome, was_reused)
    best = search.best()
    return SearchResult(best_params=best[0] if best else None,
                        best_s=best[1] if best else None, trials=len(search.history),
                        measured=measured, reused=reused, stopped=stopped)
