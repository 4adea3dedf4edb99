"""tune-graph confirms a claimed gain across fresh processes (tuners/confirm.py,
measure/processes.py): real worker processes measure real engines; the
decision rule (replace only on a significant process-level gain, keep the
incumbent when no time is left) is checked on scripted process medians."""

from dataclasses import dataclass, field
from typing import List, Optional

import pytest

from hwtune.engine.config import EngineConfig
from hwtune.engine.runner import open_engine
from hwtune.errors import HwtuneError
from hwtune.measure import clock, processes
from hwtune.sources import load_any
from hwtune.tuners import confirm


@dataclass
class Cand:
    label: str
    median_s: float = 0.01
    samples: List[float] = field(default_factory=lambda: [0.01] * 5)
    graph: object = None
    config: object = None
    op_cost: Optional[dict] = None
    process_s: List[float] = field(default_factory=list)


def _log():
    lines = []
    return lines, lambda stage, msg: lines.append((stage, msg))


def test_worker_processes_measure_the_engine_pair_by_pair():
    graph, _ = load_any("lstm_small", {"seq": 2, "hidden": 16, "batch": 2, "layers": 1})
    one = EngineConfig(executors=1, threads=1, scheduler="sequential")
    two = EngineConfig(executors=1, threads=2, scheduler="sequential", pin=True)
    seen = []
    got = processes.paired_processes([(graph, one, None), (graph, two, None)], 2,
                                     open_engine=open_engine, warmup=1,
                                     samples=3, on_pair=lambda p, n: seen.append((p, n)))
    assert [len(m) for m in got] == [2, 2]
    assert all(0 < x < 1.0 for m in got for x in m)
    assert seen == [(1, 2), (2, 2)]


def test_a_failing_worker_is_one_line_error():
    graph, _ = load_any("lstm_small", {"seq": 2, "hidden": 16, "batch": 2, "layers": 1})
    # the worker's engine refuses the config (sequential runs one executor)
    bad = EngineConfig(executors=3, threads=2, scheduler="sequential")
    with pytest.raises(HwtuneError, match="a measuring process failed") as e:
        processes.paired_processes([(graph, bad, None)], 1, open_engine=open_engine,
                                   warmup=0, samples=1)
    assert "\n" not in str(e.value)


def test_deadline_stops_pairs_after_the_minimum():
    graph, _ = load_any("lstm_small", {"seq": 2, "hidden": 16, "batch": 2, "layers": 1})
    cfg = EngineConfig(executors=1, threads=1, scheduler="sequential")
    got = processes.paired_processes([(graph, cfg, None)], 5, open_engine=open_engine,
                                     warmup=0, samples=1,
                                     deadline=clock.monotonic(), min_pairs=2)
    assert len(got[0]) == 2


def _scripted(monkeypatch, medians):
    def fake(sides, pairs, **kw):
        assert len(sides) == len(medians)
        return [list(m) for m in medians]
    monkeypatch.setattr(processes, "paired_processes", fake)


def test_a_gain_confirmed_across_processes_is_taken(monkeypatch):
    default, tuned = Cand("default"), Cand("tuned")
    _scripted(monkeypatch, [[1.0, 1.1, 0.95, 1.0], [0.5, 0.52, 0.49, 0.5]])
    lines, progress = _log()
    chosen, speedup, why = confirm.across_processes(default, default, tuned, progress=progress)
    assert chosen is tuned and speedup.low > 1.5
    assert tuned.process_s == [0.5, 0.52, 0.49, 0.5]
    assert "fresh processes" in why[0]


def test_a_gain_that_does_not_show_across_processes_keeps_the_incumbent(monkeypatch):
    default, tuned = Cand("default"), Cand("tuned")
    # faster inside the tuning process, but one process in three is not
    _scripted(monkeypatch, [[1.0, 1.0, 1.0], [0.8, 1.05, 0.8]])
    chosen, speedup, why = confirm.across_processes(default, default, tuned,
                                                    progress=lambda *a: None)
    assert chosen is default and (speedup.low, speedup.high) == (1.0, 1.0)
    assert "no significant gain across processes" in why[0] and "default is kept" in why[0]


def test_the_stored_config_is_replaced_only_on_a_confirmed_gain_over_it(monkeypatch):
    default, stored, tuned = Cand("default"), Cand("stored"), Cand("tuned")
    # both beat the default clearly; the challenger does not beat the stored one
    _scripted(monkeypatch, [[1.0, 1.0, 1.0], [0.5, 0.55, 0.5], [0.52, 0.5, 0.53]])
    chosen, speedup, why = confirm.across_processes(default, stored, tuned,
                                                    progress=lambda *a: None)
    assert chosen is stored and speedup.median == pytest.approx(2.0)
    assert "stored tuned config is kept" in why[0]


def test_no_time_for_the_minimum_keeps_the_incumbent(monkeypatch):
    def never(*a, **kw):
        raise AssertionError("no process may start")
    monkeypatch.setattr(processes, "paired_processes", never)
    default, tuned = Cand("default", median_s=0.5), Cand("tuned", median_s=0.25)
    chosen, speedup, why = confirm.across_processes(default, default, tuned,
                                                    progress=lambda *a: None,
                                                    deadline=clock.monotonic() + 0.1)
    assert chosen is default and speedup.median == 1.0
    assert "no time left" in why[0]


def test_reserve_is_capped_by_the_budget_share():
    full = confirm.reserve(0.02, 0.1)
    assert full > 0 and confirm.reserve(0.02, 0.1, budget_s=1.0) == confirm.BUDGET_SHARE
    assert confirm.plan(0.45) == (confirm.SLOW_WARMUP, confirm.MIN_SAMPLES)
    assert confirm.plan(1e-4) == (confirm.WARMUP, confirm.MAX_SAMPLES)
