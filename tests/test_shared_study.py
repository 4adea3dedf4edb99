"""A shared Optuna study's life cycle without a PostgreSQL server (Optuna's
RDB storage on a SQLite file, heartbeats included): a trial whose worker
stopped beating is failed and its point queued again for the next worker;
a search stopped before measuring its point gives the trial up at once.
URLs lose their passwords wherever hwtune shows or records them.
(Two real workers on a real server: test_fleet_storage.py.)"""

import time

import pytest

from hwtune.tuners import shared_study
from hwtune.tuners.loop import run_search
from hwtune.tuners.optuna_search import OptunaSearch
from hwtune.tuners.pipeline import TuneOptions
from hwtune.tuners.search import OK, Outcome, Space, key_of

SPACE = Space({"a": [1, 2, 3, 4], "b": [1, 2, 3, 4]})


@pytest.mark.parametrize("url, shown", [
    ("postgresql://tuner:pw@db-host/hwtune", "postgresql://tuner:***@db-host/hwtune"),
    ("postgresql://tuner:p@ss:w@db-host:5432/x", "postgresql://tuner:***@db-host:5432/x"),
    ("postgresql://tuner@db-host/hwtune", "postgresql://tuner@db-host/hwtune"),
    ("postgresql://db-host/x?user=u&password=pw&sslmode=require",
     "postgresql://db-host/x?user=u&password=***&sslmode=require"),
    ("sqlite:///study.db", "sqlite:///study.db"),
])
def test_urls_lose_their_passwords(url, shown):
    assert shared_study.redact_url(url) == shown


def test_the_recorded_run_options_name_the_storage_without_its_password():
    opts = TuneOptions(budget_s=60.0, storage="postgresql://tuner:pw@db-host/hwtune")
    rec = opts.recorded()
    assert rec["storage"] == "postgresql://tuner:***@db-host/hwtune"
    assert rec["budget_s"] == 60.0 and rec["search"] == "optuna"
    assert "pw@" not in repr(rec) and TuneOptions().recorded()["storage"] is None


@pytest.fixture
def fast_heartbeat(monkeypatch):
    # SQLite's clock has whole seconds: stale after more than 1 s.
    monkeypatch.setattr(shared_study, "HEARTBEAT_S", 1)
    monkeypatch.setattr(shared_study, "GRACE_S", 1)


def _states(url, name):
    import optuna
    return [t.state.name for t in optuna.load_study(study_name=name, storage=url).get_trials()]


def test_a_dead_workers_trial_is_failed_and_its_point_measured_by_the_next(tmp_path,
                                                                          fast_heartbeat):
    import optuna

    url = f"sqlite:///{tmp_path / 'study.db'}"
    dead = OptunaSearch(SPACE, storage=url, study_name="s", max_trials=4)
    point = dead.propose()
    assert _states(url, "s") == ["RUNNING"]
    dead._beats[key_of(point)].stop()  # the worker dies: no more beats, no tell
    time.sleep(2.5)
    live = OptunaSearch(SPACE, storage=url, study_name="s", max_trials=4)
    assert live.propose() == point     # the queued point comes first
    live.record(point, Outcome(OK, 1e-3, [1e-3]))
    trials = optuna.load_study(study_name="s", storage=url).get_trials()
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].system_attrs["failed_trial"] == trials[0].number
    assert trials[1].user_attrs[shared_study.WORKER_ATTR] == shared_study.worker_id()


def test_a_live_workers_trial_is_not_failed(tmp_path, fast_heartbeat, monkeypatch):
    monkeypatch.setattr(shared_study, "GRACE_S", 3)  # a beat a second, 3 s of grace
    url = f"sqlite:///{tmp_path / 'study.db'}"
    busy = OptunaSearch(SPACE, storage=url, study_name="s", max_trials=4)
    point = busy.propose()
    time.sleep(4.5)                    # measuring, and beating
    other = OptunaSearch(SPACE, storage=url, study_name="s", max_trials=4)
    assert other.propose() != point    # the point is taken
    assert _states(url, "s")[0] == "RUNNING"
    busy.record(point, Outcome(OK, 1e-3, [1e-3]))
    assert _states(url, "s")[0] == "COMPLETE"
    other.close()


def test_a_search_stopped_at_its_deadline_gives_its_trial_up(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    s = OptunaSearch(SPACE, storage=url, study_name="s", max_trials=4)
    # The deadline has passed when the first point comes: nothing measured.
    res = run_search(s, lambda p: Outcome(OK, 1e-3, [1e-3]), deadline=0.0)
    assert res.stopped == "deadline" and res.measured == 0
    assert _states(url, "s") == ["FAIL"]
