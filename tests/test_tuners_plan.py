"""The tuning plan's arithmetic and the final verdict, on synthetic figures
(pure functions: no engine runs here; tests/test_tune_graph.py runs them
end to end)."""

from dataclasses import dataclass, field
from typing import List, Optional

import pytest

from hwtune.measure.stats import paired_ratio_ci
from hwtune.tuners import verdict
from hwtune.tuners.plan import MIN_WEIGHT_SHARE, Item, allocate, build


def item(name, trials, trial_s, weight, stage="conv", reused=False, tail_s=0.0):
    return Item(stage, name, trials, trial_s, weight, reused=reused, tail_s=tail_s)


def test_allocation_follows_share_of_time_and_never_exceeds_cost():
    big, small = item("big", 100, 0.1, 0.9), item("small", 100, 0.1, 0.1)
    allocate([big, small], 5.0)
    assert big.allot_s + small.allot_s == pytest.approx(5.0)
    assert big.allot_s > 3 * small.allot_s
    assert big.cut and small.cut
    # enough for everything: each gets exactly its cost, nothing is cut
    allocate([big, small], 100.0)
    assert big.allot_s == pytest.approx(10.0) and small.allot_s == pytest.approx(10.0)
    assert not big.cut and not small.cut and big.allowed_trials == 100


def test_water_filling_gives_a_capped_items_rest_to_the_others():
    cheap = item("cheap", 2, 0.1, 0.5)          # costs 0.2 s of its 2.5 s share
    dear = item("dear", 1000, 0.1, 0.5)
    allocate([cheap, dear], 5.0)
    assert cheap.allot_s == pytest.approx(0.2) and not cheap.cut
    assert dear.allot_s == pytest.approx(4.8)
    assert dear.allowed_trials == 48


def test_tiny_workloads_get_a_floor_and_reused_ones_nothing():
    heavy = item("conv", 1000, 0.1, 0.999)
    tiny = [item(f"relu{i}", 2, 0.01, 0.0001, stage="hillclimb") for i in range(4)]
    done = item("done", 10, 0.1, 0.5, reused=True)
    allocate([heavy, done] + tiny, 10.0)
    assert done.allot_s == 0 and done.cost_s == 0 and not done.cut
    assert all(t.allot_s > 0 for t in tiny)
    assert sum(t.allot_s for t in tiny) <= MIN_WEIGHT_SHARE * 10.0 + 1e-9


def test_tail_is_kept_inside_the_share():
    it = item("c", 100, 0.1, 1.0, tail_s=1.0)
    assert it.cost_s == pytest.approx(11.0)
    assert it.trials_in(3.0) == 20 and it.trials_in(0.5) == 0


def test_plan_reserves_the_end_and_caps_the_sweep():
    sweep = item("sweep", 4, 1.0, 1.0, stage="sweep")
    conv = [item("c1", 100, 0.1, 0.6), item("c2", 100, 0.1, 0.4)]
    p = build(None, latency_s=0.01, open_s=0.01, budget_s=10.0, sweep=sweep, conv=conv,
              hillclimb=[], reserve_s=2.0, sweep_share=0.5)
    assert sweep.allot_s == pytest.approx(4.0)      # its cost, under half of the 8 s left
    assert sum(c.allot_s for c in conv) == pytest.approx(4.0)
    assert p.planned_s == pytest.approx(10.0)
    assert [c.name for c in p.cuts()] == ["c1", "c2"]
    assert p.total_cost_s == pytest.approx(2.0 + 4.0 + 20.0)
    text = "\n".join(p.lines())
    assert "CUT" in text and "of the 10 s budget" in text
    # without a budget nothing is cut
    p = build(None, latency_s=0.01, open_s=0.01, budget_s=None, sweep=None, conv=conv,
              hillclimb=[], reserve_s=2.0, sweep_share=0.5)
    assert not p.cuts()


def test_paired_ratio_interval():
    a = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0]
    b = [1.0, 1.05, 0.95, 1.0, 1.0, 1.0, 1.02]
    mid, lo, hi = paired_ratio_ci(a, b)
    assert 1.9 < lo <= mid <= hi < 2.1
    # every pair equal (MAD = 0): a zero-width interval at 1
    assert paired_ratio_ci([1.0] * 5, [1.0] * 5) == (1.0, 1.0, 1.0)
    # seeded: the same samples give the same interval
    assert paired_ratio_ci(a, b) == paired_ratio_ci(a, b)
    with pytest.raises(ValueError):
        paired_ratio_ci([], [])


@dataclass
class Cand:
    label: str
    samples: List[float]
    status: str = "ok"
    note: Optional[str] = None
    median_s: float = field(init=False)

    def __post_init__(self):
        self.median_s = sorted(self.samples)[len(self.samples) // 2] if self.samples else None


def test_verdict_keeps_the_default_without_a_significant_gain():
    default = Cand("default", [1.0, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05])
    noisy = Cand("tuned", [0.9, 1.3, 0.85, 1.2, 0.95, 1.0, 1.0])   # faster median, not shown
    v = verdict.decide(default, [noisy])
    assert v.chosen is default and not v.replaced
    assert any("no significant gain" in w for w in v.why)


def test_verdict_takes_a_clear_gain():
    default = Cand("default", [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0])
    fast = Cand("tuned", [0.5, 0.55, 0.45, 0.5, 0.52, 0.48, 0.5])
    v = verdict.decide(default, [fast])
    assert v.chosen is fast and v.speedup.low > 1.5


def test_verdict_never_replaces_the_stored_config_with_a_slower_one():
    default = Cand("default", [1.0] * 7)
    stored = Cand("stored", [0.8, 0.82, 0.79, 0.8, 0.81, 0.8, 0.8])
    slower = Cand("tuned", [0.9, 0.92, 0.88, 0.9, 0.9, 0.91, 0.9])
    v = verdict.decide(default, [slower, stored], incumbent=stored)
    assert v.chosen is stored and not v.replaced
    # the default measured faster than the stored config, clearly: it wins
    stale = Cand("stored", [1.5, 1.55, 1.45, 1.5, 1.5, 1.52, 1.48])
    v = verdict.decide(default, [stale], incumbent=stale)
    assert v.chosen is default and v.replaced
    # a stored config that failed now is replaced by the best that ran
    broken = Cand("stored", [], status="error", note="boom")
    fast = Cand("tuned", [0.5] * 7)
    v = verdict.decide(default, [fast, broken], incumbent=broken)
    assert v.chosen is fast


# -- trial times measured by an earlier run ----------------------------------
def _trials_at(db, run, host, subject, times, status="ok", threads=2):
    """Trials of one subject stored at the given seconds after a start."""
    from datetime import datetime, timedelta, timezone
    t0 = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc)
    for t, st in zip(times, status if isinstance(status, list) else [status] * len(times)):
        tid = db.add_trial(run, host, tuner="conv", search="grid", subject=subject, isa="avx2",
                           threads=threads, params={"t": t}, status=st,
                           median_s=1e-3 if st == "ok" else None,
                           samples=[1e-3] if st == "ok" else [])
        stamp = (t0 + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        db._conn.execute("UPDATE tuning_trials SET created_at = ? WHERE id = ?", [stamp, tid])
    db._conn.commit()


def test_trial_times_are_the_median_gap_of_the_newest_run_of_the_graph(tmp_path):
    from hwtune.db import ResultsDB
    from hwtune.tuners.trial_times import TrialTimes
    from test_report_fixture import fingerprint

    with ResultsDB.open(str(tmp_path / "r.db")) as db:
        host = db.upsert_host(fingerprint("Test CPU", 2))
        old = db.start_run(host, "tune", {"graph_hash": "g", "reps": 2})
        _trials_at(db, old, host, "wl", [0, 1, 2, 3, 4])
        db.finish_run(old, "complete")
        new = db.start_run(host, "tune", {"graph_hash": "g", "reps": 2})
        # 0.5 s a trial; the skipped point (stored with no measurement) and
        # the search's slow start are not a trial's time
        _trials_at(db, new, host, "wl", [0, 2.0, 2.5, 2.6, 3.0, 3.5],
                   status=["ok", "ok", "ok", "skipped", "ok", "ok"])
        _trials_at(db, new, host, "few", [0, 0.1, 0.2])  # 2 gaps: not enough
        db.finish_run(new, "complete")
        other = db.start_run(host, "tune", {"graph_hash": "g", "reps": 5})  # other reps
        _trials_at(db, other, host, "wl", [0, 9, 18, 27, 36])
        db.finish_run(other, "complete")
        times = TrialTimes(db, host, "g", 2)
        assert times.get("conv", "wl", "avx2", 2) == (pytest.approx(0.5), new)
        assert times.get("conv", "wl", "avx2", 4) is None        # another team size
        assert times.get("conv", "few", "avx2", 2) is None
        assert TrialTimes(db, host, "other-graph", 2).get("conv", "wl", "avx2", 2) is None


def test_measured_trial_times_replace_the_estimate_in_the_plan():
    items = [Item("conv", "a", 100, 0.01, 0.5, measured_run=7), Item("conv", "b", 10, 0.01, 0.5)]
    plan = build(None, latency_s=1e-3, open_s=0.0, budget_s=None, sweep=None, conv=items,
                 hillclimb=[], reserve_s=0.0, sweep_share=0.0)
    lines = "\n".join(plan.lines())
    assert "measured in run 7" in lines and lines.count("measured in run") == 1
    assert plan.to_json()["items"][0]["measured_run"] == 7
