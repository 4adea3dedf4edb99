"""The scheduler table (engine/exec/sched_table.c) as every consumer reads
it. One row per scheduler below: a new scheduler adds its row here (its
properties are a contract the engine, hwtune's config resolution, the
database and the stand-alone runner act on); tests/c/test_engine_sched.c
runs every row of the table on random DAGs."""

import pytest

from hwtune.engine.config import EngineConfig
from hwtune.engine.runner import op_costs
from hwtune.errors import UsageError
from hwtune.native import sched

# name: (single_team, worker_groups, in_order, needs_costs, pins, default_one, default_many)
EXPECTED = {
    "sequential": (True, False, True, False, "on_request", True, False),
    "shared-queue": (False, False, False, False, "never", False, False),
    "critical-path": (False, False, False, True, "by_default", False, True),
    "corun": (False, True, False, True, "by_default", False, False),
}


def test_the_table_is_the_expected_rows_in_order():
    table = sched.schedulers()
    assert list(table) == list(EXPECTED)
    for name, row in table.items():
        got = (row.single_team, row.worker_groups, row.in_order, row.needs_costs, row.pins,
               row.default_one, row.default_many)
        assert got == EXPECTED[name], name
        assert row.summary and "\n" not in row.summary


def test_names_are_one_user_facing_spelling():
    for name in sched.names():
        assert name == name.lower() and "_" not in name and " " not in name, name
    assert sched.default().name == "sequential"
    assert sched.default(many_executors=True).name == "critical-path"


@pytest.mark.parametrize("bad,hint", [("critical_path", "critical-path"),
                                      ("shared_queue", "shared-queue"), ("fifo", None)])
def test_other_spellings_are_refused_clearly(bad, hint):
    with pytest.raises(UsageError) as e:
        sched.lookup(bad, "--scheduler")
    msg = str(e.value)
    assert msg.startswith(f"invalid --scheduler {bad!r}") and "choose one of" in msg
    assert (f"did you mean {hint!r}" in msg) == (hint is not None)
    with pytest.raises(UsageError, match="--scheduler"):
        EngineConfig(scheduler=bad).validate([0, 1])


@pytest.mark.parametrize("name", list(EXPECTED))
def test_consumers_follow_the_row(name):
    row = sched.schedulers()[name]
    cfg = EngineConfig(executors=1, threads=2, scheduler=name)
    assert cfg.pinned == (row.pins == "by_default")
    assert cfg.workers == 2  # one executor: a team's threads either way
    assert EngineConfig(executors=2, threads=1, scheduler=name).workers == \
        (2 if row.worker_groups else 1)
    if row.single_team:
        with pytest.raises(UsageError, match="one executor"):
            EngineConfig(executors=2, threads=1, scheduler=name).validate([0, 1])
    # One rule for "needs op costs", whoever asks (run, check, tune).
    given = {"a": 1e-3}
    assert op_costs(None, None, None, cfg, given) == (given if row.needs_costs else None)
