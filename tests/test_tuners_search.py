"""One contract every registered search passes, plus the driver's storage,
failure and resume behaviour (hwtune.tuners.loop)."""

import time

import pytest

from hwtune.errors import NativeError
from hwtune.tuners import loop
from hwtune.tuners.loop import TrialStore, TrialTimeout, run_search
from hwtune.tuners.search import (ERROR, OK, SEARCHES, SKIPPED, TIMEOUT, WRONG_ANSWER, Outcome,
                                  Space, make_search)


# Each search's trial budget on SPACE, as a fraction of its valid points.
# A new search must add itself here (test_every_search_has_a_budget).
BUDGET = {"grid": None, "random": None, "optuna": 0.6, "hillclimb": None}

SPACE = Space({"a": [0, 1, 2, 3, 4, 5], "b": [1, 2, 4, 8, 16], "c": [False, True]},
              valid=lambda p: not (p["a"] == 5 and p["b"] == 16))
OPTIMUM = {"a": 3, "b": 4, "c": True}


def cost(p):
    """Smooth with an interaction; unique minimum at OPTIMUM (1.0)."""
    lb = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}[p["b"]]
    return (1.0 + 0.1 * (p["a"] - 3) ** 2 + 0.08 * (lb - 2) ** 2
            + (0.0 if p["c"] else 0.05) + 0.01 * abs(p["a"] - lb - 1))


def failure(p):
    """Some points fail, each kind differently; when a failure carries a
    time it is faster than anything, so a search that let it win is caught."""
    if p["c"] and p["a"] == 0:
        return ERROR
    if p["b"] == 16 and p["a"] in (1, 2):
        return WRONG_ANSWER
    if p["a"] == 4 and p["b"] == 1:
        return TIMEOUT
    return None


class Synthetic:
    """measure(): records calls, checks every proposal against the space."""

    def __init__(self, interrupt_at=None):
        self.calls = []
        self.interrupt_at = interrupt_at

    def __call__(self, p):
        assert SPACE.contains(p), f"proposed outside the space: {p}"
        self.calls.append(dict(p))
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        kind = failure(p)
        if kind == ERROR:
            raise NativeError("kernel refused the params")
        if kind == WRONG_ANSWER:
            return Outcome(WRONG_ANSWER, seconds=1e-9, note="differs from reference")
        if kind == TIMEOUT:
            raise TrialTimeout("over the limit")
        return Outcome(OK, cost(p), [cost(p)] * 3)




def budget(name):
    frac = BUDGET[name]
    return None if frac is None else int(frac * SPACE.size())


def store(db, host, subject="synthetic"):
    run = db.start_run(host, "tune", {})
    return TrialStore(db, run, host, tuner="test", subject=subject, isa="avx2", threads=1)


def search(name, seed=0):
    return make_search(name, SPACE, seed=seed, max_trials=budget(name))


def test_every_search_has_a_budget():
    assert set(SEARCHES) == set(BUDGET), "add the new search to BUDGET"


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_search_contract(name, db, host):
    st = store(db, host)
    m = Synthetic()
    res = run_search(search(name), m, st)
    # Finds the optimum within its budget, measuring each point at most once.
    assert res.best_params == OPTIMUM and res.best_s == pytest.approx(1.0)
    limit = budget(name) or SPACE.size()
    assert res.measured == len(m.calls) <= limit
    assert len({tuple(sorted(c.items())) for c in m.calls}) == len(m.calls)
    # Failures are stored with their status, never as the best.
    rows = st.rows()
    by_status = {}
    for r in rows:
        by_status.setdefault(r["status"], []).append(r["params"])
        if r["status"] != SKIPPED:
            want = failure(r["params"]) or OK
            assert r["status"] == want, r
    assert {ERROR, WRONG_ANSWER, TIMEOUT} <= set(by_status), sorted(by_status)
    assert all(failure(p) is None for p in by_status[OK])
    assert all(r["note"] for r in rows if r["status"] != OK)
    # Skipped points (outside valid) are never measured.
    for p in by_status.get(SKIPPED, []):
        assert not SPACE.valid(p) and p not in m.calls


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_search_is_deterministic_for_a_seed(name):
    a, b = Synthetic(), Synthetic()
    run_search(search(name, seed=3), a)
    run_search(search(name, seed=3), b)
    assert a.calls == b.calls


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_resume_after_interrupt(name, db, host):
    full = Synthetic()
    want = run_search(search(name), full)
    st = store(db, host)
    first = Synthetic(interrupt_at=7)
    with pytest.raises(KeyboardInterrupt):
        run_search(search(name), first, st)
    finished = first.calls[:-1]  # the 7th was in flight
    assert len(st.rows()) >= len(finished)
    again = Synthetic()
    res = run_search(search(name), again, store(db, host))
    assert not any(c in finished for c in again.calls), "a finished trial was re-measured"
    assert res.reused == len(finished) and res.measured == len(again.calls)
    assert len(finished) + len(again.calls) == len(full.calls)
    assert (res.best_params, res.best_s) == (want.best_params, want.best_s)


def test_overrun_is_a_timeout_and_errors_keep_going():
    space = Space({"x": [1, 2, 3]})

    def measure(p):
        if p["x"] == 1:
            time.sleep(0.05)
        if p["x"] == 2:
            raise ValueError("bad pointer")
        return Outcome(OK, 0.001 * p["x"])

    s = make_search("grid", space)
    seen = []
    res = run_search(s, measure, trial_timeout_s=0.02,
                     on_trial=lambda p, o, reused: seen.append((p["x"], o.status, reused)))
    assert seen == [(1, TIMEOUT, False), (2, ERROR, False), (3, OK, False)]
    assert res.best_params == {"x": 3} and res.stopped == "done"
    assert "ValueError: bad pointer" in s.history[1][1].note


def test_deadline_stops_before_measuring(db, host):
    st = store(db, host)
    res = run_search(search("grid"), Synthetic(), st, deadline=time.monotonic() - 1)
    assert res.stopped == "deadline" and res.measured == 0 and st.rows() == []


def test_trials_budget_stops_as_max_trials():
    res = run_search(make_search("grid", SPACE, max_trials=5), Synthetic())
    assert res.stopped == "max_trials" and res.trials == 5


def test_store_lookup_is_per_host_isa_and_threads(db, host):
    st = store(db, host)
    st.add({"a": 1}, Outcome(OK, 0.5, [0.5, 0.6]), "grid")
    assert st.lookup({"a": 1}).seconds == 0.5
    assert st.lookup({"a": 2}) is None
    other = TrialStore(db, st.run_id, host, tuner="test", subject="synthetic", isa="avx2",
                       threads=2)
    assert other.lookup({"a": 1}) is None
    assert st.rows()[0]["mad_s"] == pytest.approx(0.05)


def test_unknown_search_names_the_choices():
    from hwtune.errors import UsageError
    with pytest.raises(UsageError, match="grid"):
        make_search("nope", SPACE)


def test_measure_once_wraps_non_outcomes():
    out = loop.measure_once(lambda p: 3.0, {}, None)
    assert out.status == ERROR and "float" in out.note
