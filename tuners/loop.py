"""The search driver: propose, measure (or reuse), store, record.

Every tuner stage is a search run by `run_search`: the executor sweep (a
fixed list of configs), the CONV template search (any registered search
over the template's knobs) and the per-op thread climb (the 'hillclimb'
search over thread counts). Every trial is committed to results.db before
the next proposal, so Ctrl-C loses at most the trial in flight, and a rerun
answers the proposals it has already seen from the database instead of
measuring them again. Searches are deterministic for a seed, so a resumed
search walks the same path as an uninterrupted one and ends at the same
best.

Batches: when the search knows its next proposals (`upcoming()`) and the
measure can time several candidates together (`measure.batch(list)`), the
driver hands it every unstored upcoming proposal at once, so their samples
interleave (the executor sweep); the outcomes are then stored and recorded
one by one as the search proposes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from hwtune import interrupts
from hwtune.measure import clock
from hwtune.measure.stats import mad
from hwtune.tuners.search import (ERROR, OK, SKIPPED, TIMEOUT, Outcome, Params, Search,
                                  key_of)


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
    """The tuning_trials rows of one subject on one host / ISA / thread count.

    threads None: each trial's thread count is its params' "threads" (the
    per-op climb stores every count under its own). encode maps a search's
    params to the params stored (default: as they are)."""

    def __init__(self, db, run_id: Optional[int], host_key: str, *, tuner: str, subject: str,
                 isa: str, threads: Optional[int],
                 encode: Optional[Callable[[Params], Params]] = None):
        self.db, self.run_id, self.host_key = db, run_id, host_key
        self.tuner, self.subject, self.isa = tuner, subject, isa
        self.threads = None if threads is None else int(threads)
        self.encode = encode or (lambda p: p)

    def _where(self, stored: Params) -> dict:
        threads = self.threads if self.threads is not None else int(stored["threads"])
        return dict(tuner=self.tuner, subject=self.subject, isa=self.isa, threads=threads)

    def lookup(self, params: Params) -> Optional[Outcome]:
        """The latest stored trial of exactly these params (any search)."""
        stored = self.encode(params)
        row = self.db.trial(self.host_key, params=stored, **self._where(stored))
        if row is None:
            return None
        return Outcome(row["status"], row["median_s"], list(row["samples"]), row["note"])

    def add(self, params: Params, outcome: Outcome, search: str) -> int:
        stored = self.encode(params)
        samples = list(outcome.samples)
        return self.db.add_trial(
            self.run_id, self.host_key, search=search, params=stored, status=outcome.status,
            median_s=outcome.seconds, mad_s=mad(samples) if samples else None,
            samples=samples, note=outcome.note, **self._where(stored))

    def rows(self) -> list:
        if self.threads is None:
            return self.db.trials(self.host_key, tuner=self.tuner, subject=self.subject,
                                  isa=self.isa)
        return self.db.trials(self.host_key, tuner=self.tuner, subject=self.subject,
                              isa=self.isa, threads=self.threads)


def _failure(exc: BaseException) -> Outcome:
    if isinstance(exc, TrialTimeout):
        return Outcome(TIMEOUT, note=str(exc) or "over the trial time limit")
    return Outcome(ERROR, note=f"{type(exc).__name__}: {exc}")


def measure_once(measure: Callable[[Params], Outcome], params: Params,
                 trial_timeout_s: Optional[float]) -> Outcome:
    """One measurement with every failure turned into an outcome (Ctrl-C and
    other BaseExceptions propagate)."""
    watch = clock.Stopwatch()
    try:
        out = measure(params)
    except Exception as exc:  # a kernel or binding failure must not end the search
        return _failure(exc)
    spent = watch.elapsed()
    if not isinstance(out, Outcome):
        return Outcome(ERROR, note=f"measure() returned {type(out).__name__}, not an Outcome")
    # The C call cannot be interrupted from here; a trial that overran is
    # still reported as a timeout so that no search can win on it.
    if trial_timeout_s is not None and spent > trial_timeout_s and out.status == OK:
        return Outcome(TIMEOUT, note=f"took {spent:.3g} s, over the {trial_timeout_s:.3g} s "
                                     f"trial limit")
    return out


def _measure_batch(measure, batch: List[Params]) -> List[Outcome]:
    try:
        got = list(measure.batch(batch))
    except Exception as exc:
        return [_failure(exc)] * len(batch)
    return [o if isinstance(o, Outcome) else
            Outcome(ERROR, note=f"measure.batch() gave {type(o).__name__}, not an Outcome")
            for o in got]


def run_search(search: Search, measure: Callable[[Params], Outcome],
               store: Optional[TrialStore] = None, *, deadline: Optional[float] = None,
               on_trial: Optional[Callable[[Params, Outcome, bool], None]] = None,
               trial_timeout_s: Optional[float] = None) -> SearchResult:
    """Drive `search` to its end, its budget, or `deadline` (a
    measure.clock.monotonic() value). on_trial(params, outcome, reused) is
    called after each outcome is recorded."""
    measured = reused = 0
    stopped = "done"
    batched: Dict[Tuple, Outcome] = {}
    can_batch = hasattr(measure, "batch") and hasattr(search, "upcoming")
    try:
        while True:
            interrupts.check()  # a Ctrl-C that arrived inside a finalizer
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
                key = key_of(params)
                if key not in batched:
                    if clock.passed(deadline):
                        stopped = "deadline"
                        break
                    if can_batch:
                        todo = [params] + [p for p in search.upcoming()
                                           if key_of(p) != key and key_of(p) not in batched
                                           and (store is None or store.lookup(p) is None)]
                        batched.update(zip(map(key_of, todo), _measure_batch(measure, todo)))
                    else:
                        batched[key] = measure_once(measure, params, trial_timeout_s)
                outcome = batched.pop(key)
                if store is not None:
                    store.add(params, outcome, search.name)
                measured += 1
            search.record(params, outcome)
            if on_trial is not None:
                on_trial(params, outcome, was_reused)
    finally:
        # A proposal left unmeasured (deadline, Ctrl-C) is let go of now.
        search.close()
    best = search.best()
    return SearchResult(best_params=best[0] if best else None,
                        best_s=best[1] if best else None, trials=len(search.history),
                        measured=measured, reused=reused, stopped=stopped)
