"""The executor sweep (Graphi's profiler): candidate enumeration, width
pruning, a real sweep on a tiny graph with every trial stored, resume without
re-measuring, wrong outputs stored as 'wrong_answer', per-op profiling."""

import time

import pytest

from hwtune.db.keys import graph_hash
from hwtune.engine.config import EngineConfig
from hwtune.engine import runner
from hwtune.errors import HwtuneError, UsageError
from hwtune.graph.generators.builder import Builder
from hwtune.native.threads import allowed_cpus
from hwtune.measure import output_check as checks
from hwtune.tuners import executor_sweep as es
from hwtune.tuners.context import TuneContext





def sweep(db, run, host, g, gh, *, cpus=None, reps=5, deadline=None, **kw):
    return es.sweep(TuneContext(db, run, host, cpus=cpus, reps=reps, deadline=deadline), g,
                    gh, **kw)


def tiny_graph(name="sweep-tiny"):
    """Two matmul branches joined by an add: width 2, depth 2."""
    b = Builder(name, seed=3)
    x = b.input("x", (16, 64))
    w1, w2 = b.param("w1", (64, 64)), b.param("w2", (64, 64))
    a = b.op("a", "matmul", [x, w1])
    c = b.op("c", "matmul", [x, w2])
    b.op("y", "add", [a, c])
    b.output("y")
    return b.build()


EXPECTED_COUNTS = {1: 1, 2: 2, 7: 4, 12: 6, 60: 14, 256: 31}


@pytest.mark.parametrize("n", sorted(EXPECTED_COUNTS))
def test_candidates_cover_every_maximal_split(n):
    c = es.candidates(n)
    assert len(c) == EXPECTED_COUNTS[n]
    assert len(set(c)) == len(c)
    assert all(k >= 1 and t >= 1 and k * t <= n for k, t in c)
    # Every factorization of n is there, each split uses the largest team
    # that fits, and no candidate is dominated by one with more executors.
    for k in range(1, n + 1):
        if n % k == 0:
            assert (k, n // k) in c
    for k, t in c:
        assert t == n // k
        assert (k + 1) * t > n
    assert [k for k, _ in c] == sorted(k for k, _ in c)


def test_candidates_non_power_of_two_splits():
    assert es.candidates(7) == [(1, 7), (2, 3), (3, 2), (7, 1)]
    sixty = es.candidates(60)
    assert (6, 10) in sixty and (3, 20) in sixty and (7, 8) in sixty


def test_width_caps_executors_at_width_plus_one():
    assert es.candidates(60, width=5) == [(1, 60), (2, 30), (3, 20), (4, 15), (5, 12), (6, 10)]
    assert es.candidates(7, width=2) == [(1, 7), (2, 3), (3, 2)]
    assert es.candidates(2, width=1) == [(1, 2), (2, 1)]
    assert es.candidates(1, width=10) == [(1, 1)]
    with pytest.raises(UsageError):
        es.candidates(0)
    with pytest.raises(UsageError):
        es.candidates(4, width=0)


def test_schedulers_and_width():
    cfgs = es.candidate_configs(4)
    assert [(c.executors, c.threads, c.scheduler) for c in cfgs] == [
        (1, 4, "sequential"), (2, 2, "critical-path"), (4, 1, "critical-path")]
    assert es.graph_width(tiny_graph()) == 2


def test_sweep_stores_every_trial_and_resumes(db, host, monkeypatch):
    g = tiny_graph()
    gh = graph_hash(g.to_json())
    cpus = allowed_cpus()
    run = db.start_run(host, "tune", {})
    res = sweep(db, run, host, g, gh, cpus=cpus, reps=3)
    configs = es.candidate_configs(len(cpus), width=2)
    assert [r[0] for r in res.rows] == configs
    assert all(st == "ok" and s > 0 for _, s, st in res.rows)
    assert res.best_s == min(s for _, s, _ in res.rows)
    assert res.measured == len(configs) and res.reused == 0
    trials = db.trials(host, tuner="executor-sweep", subject=gh)
    assert len(trials) == len(configs)
    assert {(t["params"]["executors"], t["params"]["threads"]) for t in trials} == \
        {(c.executors, c.threads) for c in configs}
    assert all(t["status"] == "ok" and t["n"] == 3 for t in trials)

    # Rerun: every candidate comes from results.db; nothing is measured.
    def boom(*a, **k):
        raise AssertionError("a stored candidate was measured again")
    monkeypatch.setattr(es, "_measure_interleaved", boom)
    again = sweep(db, db.start_run(host, "tune", {}), host, g, gh, cpus=cpus, reps=3)
    assert again.measured == 0 and again.reused == len(configs)
    assert again.best == res.best and again.best_s == res.best_s
    assert len(db.trials(host, tuner="executor-sweep", subject=gh)) == len(configs)


def test_sweep_resumes_after_interrupt(db, host, monkeypatch):
    """Ctrl-C inside the measurement loses only that batch; the trials
    stored before it are reused and the rest measured on the rerun."""
    g = tiny_graph()
    gh = graph_hash(g.to_json())
    cpus = allowed_cpus()
    n_cfg = len(es.candidate_configs(len(cpus), width=2))
    first = es.candidate_configs(len(cpus), width=2)[0]
    # One candidate already stored (as by an interrupted earlier sweep).
    sweep(db, None, host, g, gh, cpus=cpus, reps=2, extra=None, prune=True)
    kept = db.trials(host, tuner="executor-sweep", subject=gh)
    with db._conn:
        db._conn.execute("DELETE FROM tuning_trials WHERE id != ?", [kept[0]["id"]])
    assert kept[0]["params"]["executors"] == first.executors

    real = es._measure_interleaved
    calls = []

    def interrupted(graph, configs, *a, **k):
        calls.append(len(configs))
        raise KeyboardInterrupt
    monkeypatch.setattr(es, "_measure_interleaved", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep(db, None, host, g, gh, cpus=cpus, reps=2)
    assert calls == [n_cfg - 1]  # only the unstored ones were in flight
    assert len(db.trials(host, tuner="executor-sweep", subject=gh)) == 1

    monkeypatch.setattr(es, "_measure_interleaved", real)
    res = sweep(db, None, host, g, gh, cpus=cpus, reps=2)
    assert res.reused == 1 and res.measured == n_cfg - 1
    assert all(st == "ok" for _, _, st in res.rows)


def test_wrong_outputs_are_stored_as_wrong_answer(db, host, monkeypatch):
    g = tiny_graph()
    gh = graph_hash(g.to_json())
    real = runner.reference_outputs
    monkeypatch.setattr(runner, "reference_outputs",
                        lambda graph, check: {k: v + 1.0 for k, v in real(graph, check).items()})
    with pytest.raises(HwtuneError, match="wrong_answer"):
        sweep(db, None, host, g, gh, cpus=allowed_cpus(), reps=1)
    trials = db.trials(host, tuner="executor-sweep", subject=gh)
    assert trials and all(t["status"] == "wrong_answer" for t in trials)
    assert "max |engine - reference|" in trials[0]["note"]


def test_output_mismatch_tolerance_and_nan():
    import numpy as np
    want = np.array([1.0, -2.0, np.nan])
    assert checks.output_mismatch(want + 1e-5, want) is None  # 1e-5 <= 1e-4 x 2
    assert "max |engine - reference|" in checks.output_mismatch(want + 1e-3, want)
    assert checks.output_mismatch(np.array([1.0, -2.0, 0.0]), want) is not None


@pytest.mark.parametrize("check", ["peer", "numpy"])
def test_reference_outputs_agree(check):
    import numpy as np
    from hwtune.graph import run_reference
    g = tiny_graph()
    got = runner.reference_outputs(g, check)["y"]
    np.testing.assert_allclose(got, run_reference(g)["y"], rtol=1e-4, atol=1e-5)


def test_deadline_before_anything_keeps_the_default(db, host):
    g = tiny_graph()
    res = sweep(db, None, host, g, graph_hash(g.to_json()), cpus=allowed_cpus(),
                   deadline=time.monotonic() - 1)
    assert res.stopped == "deadline" and res.best_s is None
    assert res.best.executors == 1 and res.best.scheduler == "sequential"
    assert db.trials(host, tuner="executor-sweep") == []


def test_extra_configs_are_measured_and_keyed_apart(db, host):
    g = tiny_graph()
    gh = graph_hash(g.to_json())
    extra = EngineConfig(executors=1, threads=1, scheduler="sequential")
    res = sweep(db, None, host, g, gh, cpus=allowed_cpus(), reps=2, extra=[extra])
    assert res.rows[-1][0] == extra and res.rows[-1][2] == "ok"
    assert db.trial(host, tuner="executor-sweep", subject=gh, isa=db.trials(host)[0]["isa"],
                    threads=len(allowed_cpus()),
                    params={"executors": 1, "threads": 1, "scheduler": "sequential"})
    with pytest.raises(UsageError):
        sweep(db, None, host, g, gh, cpus=allowed_cpus(),
                 extra=[EngineConfig(executors=1, threads=99)])


def test_profile_op_costs_names_every_op(db, host):
    from hwtune.engine.runner import profiled_costs
    g = tiny_graph()
    cfg = es.candidate_configs(len(allowed_cpus()), width=2)[-1]
    assert profiled_costs(db, host, g, cfg) is None
    costs = es.profile_op_costs(g, cfg, runs=5, db=db, host_key=host)
    # Stored per workload: the two matmuls share one row, read back for
    # every op of this layout.
    back = profiled_costs(db, host, g, cfg)
    assert set(back) == {"a", "c", "y"} and back["y"] == pytest.approx(costs["y"])
    assert set(costs) == {"a", "c", "y"}
    assert all(v > 0 for v in costs.values())
    # The matmuls do 16x64x64 MACs, the add 16x64 elements.
    assert costs["a"] > costs["y"] and costs["c"] > costs["y"]
