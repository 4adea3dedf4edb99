"""Per-op thread hill climbing: the climb on synthetic curves, interpolation
and Table V's accuracy metric, Strategies 1 and 2, L2 placements, and a real
tuning of a tiny graph (trials, tuned subjects and op profiles stored; reuse
across runs and models; a wrong kernel output stored as 'wrong_answer')."""

import math
import time

import numpy as np
import pytest

from hwtune.engine import runner
from hwtune.errors import HwtuneError, UsageError
from hwtune.graph.generators.builder import Builder
from hwtune.native.threads import allowed_cpus
from hwtune.measure import clock
from hwtune.tuners import hillclimb as hc
from hwtune.tuners import interpolate as ip
from hwtune.tuners.context import TuneContext


def tune(db, run, host, g, *, strategy=1, check="peer", deadline=None, **kw):
    """hc.tune_op_threads with the context the pipeline would give it."""
    ctx = TuneContext(db, run, host, strategy=strategy, check=check, deadline=deadline)
    return hc.tune_op_threads(ctx, g, **kw)





def amdahl(serial, overhead):
    """A convex time curve: serial part, parallel part, per-thread cost."""
    return lambda t: serial + (1 - serial) / t + overhead * t


class Counting:
    def __init__(self, f):
        self.f, self.calls = f, []

    def __call__(self, t):
        self.calls.append(t)
        return self.f(t)


# -- climb ------------------------------------------------------------------

def test_climb_stops_at_first_increase():
    times = {1: 10.0, 2: 6.0, 3: 5.0, 4: 5.5, 5: 1.0}  # 5 is never reached
    m = Counting(times.__getitem__)
    r = hc.climb(m, 5)
    assert (r.best_threads, r.best_s) == (3, 5.0)
    assert m.calls == [1, 2, 3, 4]
    assert r.measured == {1: 10.0, 2: 6.0, 3: 5.0, 4: 5.5}


def test_climb_respects_the_core_limit_and_lands_on_it():
    m = Counting(lambda t: 100.0 / t)  # keeps improving
    r = hc.climb(m, 10, step=4)
    assert m.calls == [1, 5, 9, 10]
    assert r.best_threads == 10 and max(m.calls) == 10
    m1 = Counting(lambda t: 1.0 / t)
    assert hc.climb(m1, 1).best_threads == 1 and m1.calls == [1]


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_climb_steps_by_the_interval(step):
    m = Counting(amdahl(0.0, 0.0))
    hc.climb(m, 32, step)
    assert m.calls[:-1] == list(range(1, 33, step))[:len(m.calls) - 1]
    assert all(b - a == step for a, b in zip(m.calls, m.calls[1:-1]))


def test_equal_time_counts_as_no_improvement():
    m = Counting(lambda t: 1.0)
    assert hc.climb(m, 8).best_threads == 1 and m.calls == [1, 2]


def test_failed_measurement_stops_the_climb():
    r = hc.climb({1: 4.0, 2: 2.0, 3: None}.get, 8)
    assert r.best_threads == 2 and 3 not in r.measured
    assert hc.climb({1: 4.0, 2: math.inf}.get, 8).best_threads == 1
    with pytest.raises(HwtuneError):
        hc.climb(lambda t: None, 4)
    with pytest.raises(UsageError):
        hc.climb(lambda t: 1.0, 0)
    with pytest.raises(UsageError):
        hc.climb(lambda t: 1.0, 4, step=0)


CURVES = [amdahl(s, o) for s in (0.0, 0.02, 0.1) for o in (5e-4, 1e-3, 2e-3, 5e-3)]


@pytest.mark.parametrize("step", [1, 2, 4])
@pytest.mark.parametrize("max_threads", [8, 16, 64])
def test_climb_within_2_percent_of_exhaustive(step, max_threads):
    """The paper's claim (< 2% from the exhaustive optimum at x = 4) on
    convex Amdahl-with-overhead curves; with x = 1 it finds the optimum."""
    for f in CURVES:
        best = min(hc.exhaustive(f, max_threads).values())
        got = hc.climb(f, max_threads, step).best_s
        assert got <= best * 1.02
        if step == 1:
            assert got == best


def test_climb_is_a_local_search():
    """Non-convex curve: the climb stops at the first bump (a documented
    limitation; the paper found op curves convex)."""
    times = {1: 4.0, 2: 3.0, 3: 3.5, 4: 1.0}
    assert hc.climb(times.__getitem__, 4).best_threads == 2


# -- interpolation and Table V's metric -----------------------------------------

def test_predict_interpolates_inside_the_measured_range_only():
    m = {1: 8.0, 5: 4.0, 9: 6.0}
    assert ip.predict(m, 1) == 8.0
    assert ip.predict(m, 3) == pytest.approx(6.0)
    assert ip.predict(m, 7) == pytest.approx(5.0)
    assert ip.predict(m, 10) is None and ip.predict(m, 0) is None
    assert ip.predict_all(m, range(1, 12)) == pytest.approx(
        {1: 8.0, 2: 7.0, 3: 6.0, 4: 5.0, 5: 4.0, 6: 4.5, 7: 5.0, 8: 5.5, 9: 6.0})
    with pytest.raises(ValueError):
        ip.predict({}, 1)
    with pytest.raises(ValueError):
        ip.predict({1: 0.0}, 1)


def test_prediction_accuracy_on_synthetic_curves():
    linear = {t: 10.0 - t for t in range(1, 9)}
    acc = ip.prediction_accuracy(linear, [1, 5, 8])
    assert acc["accuracy"] == pytest.approx(1.0) and acc["points"] == 5
    f = amdahl(0.0, 0.0)  # 1/t: interpolation over-predicts between samples
    exact = {t: f(t) for t in range(1, 5)}
    acc = ip.prediction_accuracy(exact, [1, 4])
    pred2, pred3 = 1 - 0.75 / 3, 1 - 2 * 0.75 / 3
    errs = [abs(pred2 - 0.5) / 0.5, abs(pred3 - 1 / 3) / (1 / 3)]
    assert acc["points"] == 2
    assert acc["accuracy"] == pytest.approx(1 - sum(errs) / 2)
    assert acc["max_rel_error"] == pytest.approx(max(errs))
    assert acc["per_count"][2]["predicted"] == pytest.approx(pred2)
    # Nothing skipped: nothing to score.
    none = ip.prediction_accuracy(exact, [1, 2, 3, 4])
    assert none["accuracy"] is None and none["points"] == 0
    with pytest.raises(ValueError):
        ip.prediction_accuracy(exact, [1, 7])


def test_accuracy_falls_with_the_interval_as_in_table_v():
    f = amdahl(0.05, 2e-3)
    exact = {t: f(t) for t in range(1, 65)}
    accs = []
    for x in (2, 4, 8, 16):
        sampled = sorted(hc.climb(f, 64, x).measured)
        accs.append(ip.prediction_accuracy(exact, sampled)["accuracy"])
    assert accs == sorted(accs, reverse=True)
    assert accs[0] > 0.95
    line = ip.format_accuracy(dict(ip.aggregate(
        [ip.prediction_accuracy(exact, sorted(hc.climb(f, 64, 4).measured))]), interval=4))
    assert line.startswith(f"prediction accuracy {accs[1]:.1%} over 1 op(s)")
    assert "interval 4" in line
    assert "nothing to predict" in ip.format_accuracy(None)
    assert "interval 1" in ip.format_accuracy({"accuracy": None, "interval": 1})
    agg = ip.aggregate([{"accuracy": 0.9, "points": 2, "max_rel_error": 0.2},
                        {"accuracy": 1.0, "points": 1, "max_rel_error": 0.0},
                        {"accuracy": None, "points": 0}])
    assert agg == {"ops": 2, "points": 3, "accuracy": pytest.approx(0.95),
                   "max_rel_error": 0.2}


# -- strategies ----------------------------------------------------------------

def _group(wk, op_type, ops, size, best, status="tuned"):
    g = hc.GroupResult(wk, op_type, ops, size, size)
    g.best_threads, g.status = best, status
    g.measured = {1: 1.0, best: 0.5} if best else {}
    return g


def test_strategy_2_uses_the_largest_instance_of_each_type():
    groups = [_group("mm-small", "matmul", ["m1", "m2"], 100, 1),
              _group("mm-big", "matmul", ["m3"], 10_000, 4),
              _group("mm-mid", "matmul", ["m4"], 1_000, 2),
              _group("add", "add", ["a1"], 50, 3),
              _group("tiny", "mul", ["u1"], 10, None, status="small")]
    s1 = hc.choose_op_threads(groups, 8, 1)
    assert s1 == {"m1": 1, "m2": 1, "m3": 4, "m4": 2, "a1": 3, "u1": 8}
    s2 = hc.choose_op_threads(groups, 8, 2)
    assert s2 == {"m1": 4, "m2": 4, "m3": 4, "m4": 4, "a1": 3, "u1": 8}
    with pytest.raises(UsageError):
        hc.choose_op_threads(groups, 8, 3)


def test_candidates_are_the_best_few_counts_best_first():
    g = hc.GroupResult("k", "matmul", ["m"], 1, 1, measured={1: 9.0, 3: 3.0, 5: 4.0})
    assert hc.op_candidates(g, 8) == [(3, 3.0), (4, 3.5), (5, 4.0)]
    assert hc.op_candidates(g, 8, k=1) == [(3, 3.0)]


def test_l2_placements():
    topo = {"caches": {"L2": {"groups": [{"cpus": [0, 1]}, {"cpus": [2, 3]}]}}}
    assert hc.l2_placements(2, [0, 1, 2, 3], topo) == {"shared": [0, 1], "private": [0, 2]}
    assert hc.l2_placements(4, [0, 1, 2, 3], topo) == {"any": [0, 1, 2, 3]}
    assert hc.shares_l2([0, 1, 2, 3], topo) and not hc.shares_l2([0, 2], topo)
    private = {"caches": {"L2": {"groups": [{"cpus": [0]}, {"cpus": [1]}]}}}
    assert hc.l2_placements(2, [0, 1], private) == {"any": None}
    assert not hc.shares_l2([0, 1], private)


# -- a real tuning --------------------------------------------------------------

def lstm_like(name, batch=32):
    """Two identical matmul+sigmoid cells and a small mul: three workloads."""
    b = Builder(name, seed=5)
    x = b.input("x", (batch, 128))
    w = b.param("w", (128, 128))
    h1 = b.op("h1", "matmul", [x, w])
    h2 = b.op("h2", "matmul", [x, w])
    s1 = b.op("s1", "sigmoid", [h1])
    s2 = b.op("s2", "sigmoid", [h2])
    b.op("y", "mul", [s1, s2])
    b.output("y")
    return b.build()


def team():
    return min(2, len(allowed_cpus()))


def test_tune_op_threads_stores_and_reuses(db, host, monkeypatch):
    g = lstm_like("cells")
    run = db.start_run(host, "tune", {})
    res = tune(db, run, host, g, team_threads=team(), min_op_s=0)
    assert set(res.op_threads) == {op.name for op in g.ops}
    assert all(1 <= t <= team() for t in res.op_threads.values())
    assert res.op_threads["h1"] == res.op_threads["h2"]  # one workload
    keys = {grp.workload_key for grp in res.groups}
    assert len(res.groups) == 3 and all(grp.status == "tuned" for grp in res.groups)
    assert res.groups[0].op_type == "matmul"  # heaviest first
    for grp in res.groups:
        assert sorted(grp.measured)[0] == 1
        row = db.tuned(host, tuner="op-threads", subject=grp.workload_key,
                       isa=db.trials(host)[0]["isa"], threads=team())
        assert row["best_params"] == {"threads": grp.best_threads}
        assert db.op_profile(host, grp.workload_key, threads=1)["median_s"] > 0
    trials = db.trials(host, tuner="op-threads")
    assert {t["subject"] for t in trials} == keys
    assert all(t["status"] == "ok" and t["params"]["threads"] == t["threads"] for t in trials)
    assert res.measured == len(trials)
    for name, cands in res.candidates.items():
        assert cands and [s for _, s in cands] == sorted(s for _, s in cands)
        assert cands[0][0] == res.op_threads[name] or res.strategy == 2
    if team() == 1 or not hc.shares_l2(allowed_cpus()):
        assert any("no L2 cache is shared" in n for n in res.notes)

    # Another model with the same workloads: nothing is measured again.
    monkeypatch.setattr(hc, "measure_op", lambda *a, **k: pytest.fail("re-measured"))
    again = tune(db, None, host, lstm_like("other-model"),
                 team_threads=team(), min_op_s=0)
    assert again.measured == 0 and again.reused == 3
    assert again.op_threads == res.op_threads
    assert len(db.trials(host, tuner="op-threads")) == len(trials)


def test_small_ops_keep_the_team_size(db, host):
    g = lstm_like("small", batch=1)
    res = tune(db, None, host, g, team_threads=team(), min_op_s=1.0)
    assert all(grp.status == "small" for grp in res.groups)
    assert set(res.op_threads.values()) == {team()}
    assert all(len(grp.measured) == 1 for grp in res.groups)  # only the 1-thread probe


def test_wrong_kernel_output_is_stored_as_wrong_answer(db, host, monkeypatch):
    import hwtune.graph as hg
    real = hg.run_reference
    monkeypatch.setattr(hg, "run_reference",
                        lambda graph, *a, **k: {n: np.asarray(v) + 1.0
                                                for n, v in real(graph, *a, **k).items()})
    g = lstm_like("wrong")
    res = tune(db, None, host, g, team_threads=team(), min_op_s=0,
               check="numpy")
    trials = db.trials(host, tuner="op-threads")
    assert trials and all(t["status"] == "wrong_answer" for t in trials)
    assert all(grp.status == "failed" for grp in res.groups)
    assert set(res.op_threads.values()) == {team()}
    assert db.tuned(host, tuner="op-threads", subject=res.groups[0].workload_key,
                    isa=trials[0]["isa"], threads=team()) is None


def test_peer_check_catches_a_disagreeing_run(db, host, monkeypatch):
    real = runner.reference_outputs
    monkeypatch.setattr(runner, "reference_outputs",
                        lambda graph, check: {n: v * 2.0 + 1.0
                                              for n, v in real(graph, check).items()})
    res = tune(db, None, host, lstm_like("peer"), team_threads=team(),
               min_op_s=0)
    assert all(grp.status == "failed" for grp in res.groups)
    assert {t["status"] for t in db.trials(host, tuner="op-threads")} == {"wrong_answer"}
    with pytest.raises(UsageError):
        tune(db, None, host, lstm_like("peer"), team_threads=1, check="x")


def test_folded_ops_are_not_measured(db, host):
    """An op on params only runs once at prepare (constant folding)."""
    b = Builder("fold", seed=1)
    x = b.input("x", (8, 32))
    w = b.param("w", (32, 32))
    wt = b.op("wt", "tanh", [w])
    b.op("y", "matmul", [x, wt])
    b.output("y")
    g = b.build()
    assert hc.folded_ops(g) == {"wt"}
    res = tune(db, None, host, g, team_threads=team(), min_op_s=0)
    status = {grp.ops[0]: grp.status for grp in res.groups}
    assert status == {"wt": "folded", "y": "tuned"}
    assert res.op_threads["wt"] == team()
    assert {t["subject"].split("|")[0] for t in db.trials(host, tuner="op-threads")} == \
        {"matmul"}
    assert res.op_threads["y"] in range(1, team() + 1)


def test_deadline_leaves_ops_at_team_size(db, host):
    g = lstm_like("late")
    res = tune(db, None, host, g, team_threads=team(),
               deadline=time.monotonic() - 1)
    assert res.stopped == "deadline" and res.measured == 0
    assert set(res.op_threads.values()) == {team()}
    assert all(grp.status == "pending" for grp in res.groups)


def test_budget_cut_inside_a_climb_resumes(db, host, monkeypatch):
    """A deadline passing mid-climb stores nothing as tuned; the rerun
    reuses the finished trials and completes the climb."""
    g = lstm_like("cut")
    calls = {"n": 0}
    real = hc.measure_op

    def one_then_late(*a, **k):
        calls["n"] += 1
        return real(*a, **k)
    monkeypatch.setattr(hc, "measure_op", one_then_late)
    t_now = time.monotonic()
    # Fake a clock that passes the deadline after the first measurement.
    monkeypatch.setattr(clock, "monotonic",
                        lambda: t_now if calls["n"] == 0 else t_now + 10)
    res = tune(db, None, host, g, team_threads=team(), min_op_s=0,
               deadline=t_now + 5)
    assert res.stopped == "deadline" and res.measured == 1
    statuses = [grp.status for grp in res.groups]
    if team() > 1:
        assert statuses[0] == "partial"
        assert db.tuned(host, tuner="op-threads", subject=res.groups[0].workload_key,
                        isa=db.trials(host)[0]["isa"], threads=team()) is None
    monkeypatch.setattr(clock, "monotonic", time.monotonic)
    again = tune(db, None, host, g, team_threads=team(), min_op_s=0)
    assert again.stopped == "done" and all(grp.status == "tuned" for grp in again.groups)
    trials = db.trials(host, tuner="op-threads")
    assert len({(t["subject"], t["threads"]) for t in trials}) == len(trials)  # none twice


def test_one_op_graph_keeps_param_values():
    from hwtune.graph import run_reference
    g = lstm_like("one")
    op = g.ops[0]
    one = hc.one_op_graph(g, op)
    assert [o.name for o in one.ops] == ["h1"] and one.outputs == ["h1"]
    assert [p.name for p in one.params] == ["w"] and [i.name for i in one.inputs] == ["x"]
    full = run_reference(g, keep_all=True)
    np.testing.assert_allclose(run_reference(one)["h1"], full["h1"], rtol=1e-6)
    out = hc.measure_op(one, 1, reference=run_reference(one))
    assert out.status == "ok" and out.seconds > 0 and len(out.samples) >= hc.MIN_REPS


def test_op_timer_feeds_climb_and_exhaustive():
    g = lstm_like("timer")
    timer = hc.op_timer(g, "h1")
    ex = hc.exhaustive(timer, team())
    assert set(ex) == set(range(1, team() + 1)) and all(v > 0 for v in ex.values())
    assert hc.climb(timer, team()).best_threads in ex
    with pytest.raises(UsageError):
        hc.op_timer(g, "nope")


def test_bad_arguments(db, host):
    g = lstm_like("bad")
    with pytest.raises(UsageError):
        tune(db, None, host, g, team_threads=0)
    with pytest.raises(UsageError):
        tune(db, None, host, g, team_threads=1, strategy=3)
    with pytest.raises(UsageError):
        tune(db, None, host, g, team_threads=len(allowed_cpus()) + 1)
