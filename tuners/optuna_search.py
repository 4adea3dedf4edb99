"""Optuna's TPE sampler behind the search interface.

Each knob is one categorical distribution over its legal values (the
values are unordered choices to TPE: a block size of 16 is not "between"
8 and 32 for the cache behaviour that decides its speed). TPE only sees
what we tell it, so:
- a point outside `Space.valid` is told a penalty and recorded as
  'skipped' (never measured, never proposed);
- a point already measured is answered from the history (no measurement,
  and it does not use the trial budget);
- a failed trial (error, wrong answer, timeout) is told a penalty worse
  than every time seen, so TPE moves away from it.
"""

from __future__ import annotations

import random
import zlib
from typing import Dict, Optional, Tuple

from hwtune.tuners import shared_study
from hwtune.tuners.search import OK, Outcome, Params, Search, Space, key_of, register

# TPE with categorical knobs converges onto its incumbent and then keeps
# proposing points it has seen. After this many answered-from-history
# proposals in a row we take an unseen point at random instead. Replaying a
# measured grid table of the ResNet-18 1x1/2 128->256 conv (1728 points,
# benchmarks/bench_tuners.py): with 5, a 10% budget found the table's minimum
# for every seed tried, with ~1.5 asks per trial; with 20, asks and the
# sampler's time (which grows with the history) tripled for the same result.
_MAX_REPEATS = 5
# Share of the budget sampled at random before TPE models the results
# (at least optuna's default of 10). Replaying a measured grid table with a
# 15% budget, 0.2 found the minimum for 2 of 5 seeds, 0.0 for 4 of 5.
STARTUP_FRACTION = 0.0
# A failed trial is told this multiple of the slowest successful time.
_FAIL_FACTOR = 4.0


def _quiet(optuna) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_default_handler()


@register("optuna")
class OptunaSearch(Search):
    """Seeded TPE (optuna.samplers.TPESampler) with a trial budget."""

    def __init__(self, space: Space, *, multivariate: bool = True,
                 startup_fraction: float = STARTUP_FRACTION, storage: Optional[str] = None,
                 study_name: Optional[str] = None, **kwargs):
        super().__init__(space, **kwargs)
        import optuna  # heavy (~0.5 s): only when an optuna search is made

        _quiet(optuna)
        self._optuna = optuna
        self._dists = {name: optuna.distributions.CategoricalDistribution(list(values))
                       for name, values in space.knobs.items()}
        # multivariate: the knobs interact (reg_n's best value depends on
        # oc_bn); independent per-knob TPE needed more trials to find it.
        budget = self.max_trials or space.size()
        startup = max(10, int(startup_fraction * budget))  # 10: optuna's own default
        self._shared = storage is not None
        seed = self.seed
        if self._shared:
            # Workers of one fleet start from one seed: mixed with the
            # worker, their samplers do not all draw the same first points.
            seed = zlib.crc32(f"{self.seed}:{shared_study.worker_id()}".encode())
        # constant_liar: a shared study's running trials count as bad
        # guesses, steering the other workers' TPE away from them.
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=multivariate,
                                             n_startup_trials=startup,
                                             constant_liar=self._shared)
        self._rdb = None
        if self._shared:
            self._rdb = shared_study.open_storage(optuna, storage)
            self._study = optuna.create_study(
                direction="minimize", sampler=sampler, load_if_exists=True,
                storage=self._rdb, study_name=study_name or "hwtune")
        else:
            self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._pending: Dict[Tuple, object] = {}
        # Proposed trials of a shared study, beating until recorded.
        self._beats: Dict[Tuple, shared_study.Heartbeat] = {}
        self._invalid: set = set()
        self._rng = random.Random(self.seed)
        self._unseen_order = None

    # -- what TPE is told ------------------------------------------------
    def _penalty(self) -> float:
        ok = [o.seconds for _, o in self.history if o.status == OK]
        return _FAIL_FACTOR * max(ok) if ok else 1.0

    def _value(self, outcome: Outcome) -> float:
        return outcome.seconds if outcome.status == OK else self._penalty()

    def _ask(self, fixed: Optional[Params] = None):
        if fixed is not None:
            self._study.enqueue_trial(fixed)
        if self._shared:
            # A dead worker's trial is failed here and its point queued:
            # this ask may be the one that takes it.
            shared_study.fail_stale(self._optuna, self._study)
            with shared_study.quiet(self._optuna):
                trial = self._study.ask(self._dists)
        else:
            trial = self._study.ask(self._dists)
        return trial, {name: trial.params[name] for name in self.space.knobs}

    def _random_unseen(self) -> Optional[Params]:
        if self._unseen_order is None:
            self._unseen_order = list(self.space.points())
            self._rng.shuffle(self._unseen_order)
        while self._unseen_order:
            p = self._unseen_order.pop()
            if not self.seen(p):
                return p
        return None

    # -- the interface ---------------------------------------------------
    def propose(self) -> Optional[Params]:
        if self.done():
            return None
        repeats = 0
        while True:
            fixed = None
            if repeats >= _MAX_REPEATS:
                fixed = self._random_unseen()
                if fixed is None:
                    return None  # every valid point has been seen
            trial, params = self._ask(fixed)
            key = key_of(params)
            if self.space.valid is not None and not self.space.valid(params):
                if key not in self._invalid:
                    self._invalid.add(key)
                    self.skip(params, "outside the search space's valid() filter")
                if self._shared:
                    # Told, never measured: other workers and readers of
                    # the study tell it from a measurement by this status.
                    trial.set_user_attr(shared_study.WORKER_ATTR, shared_study.worker_id())
                    trial.set_user_attr(shared_study.STATUS_ATTR, "skipped")
                self._study.tell(trial, self._penalty())
                repeats += 1
                continue
            seen = self.outcome_of(params)
            if seen is not None and not self._shared:
                self._study.tell(trial, self._value(seen))
                repeats += 1
                continue
            if self._shared:
                # In a shared study a point is measured once across the
                # fleet: a duplicate trial is given up, not told a value.
                states = (self._optuna.trial.TrialState.RUNNING,
                          self._optuna.trial.TrialState.COMPLETE)
                dup = shared_study.duplicate_of(self._study, trial, params, states)
                if seen is not None or dup is not None:
                    if dup is not None:
                        trial.set_user_attr(shared_study.DUPLICATE_ATTR, dup)
                    self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
                    repeats += 1
                    continue
            if key in self._pending:  # proposed but not yet recorded: ask again
                self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
                repeats += 1
                continue
            self._pending[key] = trial
            if self._shared:
                self._beats[key] = shared_study.Heartbeat(self._rdb, trial._trial_id)
            return params

    def record(self, params: Params, outcome: Outcome) -> None:
        super().record(params, outcome)
        trial = self._pending.pop(key_of(params), None)
        beat = self._beats.pop(key_of(params), None)
        value = self._value(outcome)
        if trial is not None and self._shared:
            try:
                trial.set_user_attr(shared_study.WORKER_ATTR, shared_study.worker_id())
                trial.set_user_attr(shared_study.STATUS_ATTR, outcome.status)
                self._study.tell(trial, value)
            except (self._optuna.exceptions.UpdateFinishedTrialError, RuntimeError):
                # Failed as stale while this worker measured it (no beat for
                # GRACE_S): the measurement stays in this host's results.db.
                pass
            finally:
                if beat is not None:
                    beat.stop()
        elif trial is not None:
            self._study.tell(trial, value)
        else:  # recorded without being proposed here: still teach TPE
            self._study.add_trial(self._optuna.trial.create_trial(
                params=dict(params), distributions=self._dists, value=value))

    def close(self) -> None:
        """Give up the trials proposed and never recorded (the driver
        stopped at its deadline, or was interrupted): FAIL now, rather
        than RUNNING until their heartbeat goes stale."""
        for key, trial in list(self._pending.items()):
            beat = self._beats.pop(key, None)
            if beat is not None:
                beat.stop()
            try:
                self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL,
                                 skip_if_finished=True)
            except Exception:  # an unreachable storage: the heartbeat's grace ends it
                pass
        self._pending.clear()
