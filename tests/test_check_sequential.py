"""The pieces under `hwtune check`'s time and count decisions, on synthetic
data with known truth: the group-sequential test's error rates, the
per-side preemption rule, callgrind parsing and the count comparison."""

import math
import random

import pytest

from hwtune.check.counted import compare_counts
from hwtune.check.measure import FigureResult
from hwtune.check.sequential import SequentialTest, look_schedule, pocock_spent
from hwtune.check.timed import kept
from hwtune.measure import counting
from hwtune.measure.preempt import Window

MIN_ROUNDS, MAX_ROUNDS = 8, 120


def noisy_round(rng, shift):
    """One round's log-ratio on a shared runner: mostly 1% noise, one round
    in five in a slow phase of the host (+-15-60% measured on the 2-core
    EPYC VM; see TRIM in hwtune/check/sequential.py)."""
    if rng.random() < 0.2:
        return shift + rng.choice((-1, 1)) * rng.uniform(0.15, 0.6)
    return shift + rng.gauss(0.0, 0.01)


def run_test(rng, shift, base=None):
    test = SequentialTest(alpha=0.01, min_effect=0.05, min_rounds=MIN_ROUNDS,
                          max_rounds=MAX_ROUNDS)
    vals = []
    for n in range(1, MAX_ROUNDS + 1):
        vals.append(noisy_round(rng, shift))
        if n < MIN_ROUNDS:
            continue
        d = test.look(vals, base, n, n / MAX_ROUNDS)
        if d is not None:
            return d
    raise AssertionError("the final look must decide")


def test_spending_and_schedule():
    assert pocock_spent(0.01, 0.0) == 0 and pocock_spent(0.01, 1.0) == pytest.approx(0.01)
    looks = look_schedule(8, 400)
    assert looks[0] == 8 and looks[-1] == 400 and looks == sorted(set(looks))
    assert len(looks) < 25  # each look spends part of alpha: not every round


def test_paired_error_rates():
    """A/A: false regressions stay at alpha however many looks; A/B 10%
    slower: detected, mostly early."""
    rng = random.Random(1)
    aa = [run_test(rng, 0.0) for _ in range(200)]
    assert sum(d.status == "regression" for d in aa) <= 4  # alpha 0.01: ~2 expected at most
    assert sum(d.status == "pass" for d in aa) >= 190
    ab = [run_test(rng, math.log(1.10)) for _ in range(100)]
    assert sum(d.status == "regression" for d in ab) >= 95
    assert sorted(d.rounds for d in ab)[50] <= 20  # the median run stops early


def test_against_a_stored_baseline():
    rng = random.Random(2)
    base = [noisy_round(rng, 0.0) for _ in range(60)]
    aa = [run_test(rng, 0.0, base) for _ in range(100)]
    assert sum(d.status == "regression" for d in aa) <= 3
    ab = [run_test(rng, math.log(1.10), base) for _ in range(60)]
    assert sum(d.status == "regression" for d in ab) >= 54
    faster = run_test(rng, math.log(0.8), base)
    assert faster.status == "improvement" and "faster" in faster.reason


def test_too_few_rounds_says_which_side():
    t = SequentialTest(alpha=0.01, min_effect=0.05, min_rounds=3, max_rounds=3)
    d = t.look([0.0, 0.01, 0.0], [0.0], 3, 1.0)
    assert d.status == "undecidable" and "the baseline 1" in d.reason


def w(lost):
    return Window(1.0, 1.0 - lost, None, True, 1)


def test_burst_rule_judges_each_side_against_its_own_chunks():
    # Side A's work runs on a pool thread: every chunk 'loses' ~90% of the
    # measuring thread's time; side B is quiet but round 3 lost 60%.
    a = [w(0.9), w(0.92), w(0.88), w(0.91), w(0.9)]
    b = [w(0.02), w(0.03), w(0.01), w(0.6), w(0.02)]
    assert kept(a, b, 5) == [True, True, True, False, True]
    # A steady loss beside a quiet partner is load, not a burst (pooling the
    # two sides' losses, the first rule, discarded every round of A here).
    assert kept(a, [w(0.0)] * 5, 5) == [True] * 5


CALLGRIND = """version: 1
creator: callgrind-3.19.0
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
desc: Trigger: Client Request: fig-a
fn=hwt_gemm_run_part
10 100 40 20 1 4 2 0 1 1
cfn=pack_b
calls=1 0
10 50 20 10 0 2 1 0 0 0
fn=pack_b
11 50 20 10 0 2 1 0 0 0
totals: 150 60 30 1 6 3 0 1 1
"""


def test_parse_callgrind_and_estimated_cycles():
    p = counting.parse_callgrind(CALLGRIND)
    assert p.label == "fig-a" and p.totals["Ir"] == 150
    # The call line's cost is pack_b's inclusive cost, not the caller's own.
    assert p.functions["hwt_gemm_run_part"]["Ir"] == 100
    assert p.functions["pack_b"]["Ir"] == 50
    ev = p.totals
    l1_miss, ll_miss = 1 + 6 + 3, 0 + 1 + 1
    want = (150 + 60 + 30 - l1_miss) + 5 * (l1_miss - ll_miss) + 35 * ll_miss
    assert counting.estimated_cycles(ev) == want
    assert counting.metric_value("instructions", ev) == 150


def counted(value, funcs=None):
    return FigureResult("g", "gemm", {"metric": "estimated-cycles", "counter": "callgrind",
                                      "functions": funcs or {}}, "count", False, [value])


def test_count_comparison():
    assert compare_counts(counted(1000.0), counted(1000.0), 0.01)[0] == "pass"
    assert "identical" in compare_counts(counted(1000.0), counted(1000.0), 0.01)[2]
    assert compare_counts(counted(1005.0), counted(1000.0), 0.01)[0] == "pass"
    old = counted(1000.0, {"kern": {"Ir": 900.0}, "pack": {"Ir": 100.0}})
    cur = counted(1100.0, {"kern": {"Ir": 900.0}, "pack": {"Ir": 200.0}})
    status, ratio, reason = compare_counts(cur, old, 0.01)
    assert status == "regression" and ratio == pytest.approx(1.1) and "pack" in reason
    assert compare_counts(counted(900.0), counted(1000.0), 0.01)[0] == "improvement"
    other = counted(1000.0)
    other.params["counter"] = "perf"
    assert compare_counts(counted(1000.0), other, 0.01)[0] == "error"


def test_a_lower_rate_is_a_slowdown_in_the_gates_rule():
    """Throughput probes sample GFLOPS or GB/s: the rule compares 1/rate, so
    a probe 20% lower than its baseline (or the other build) regresses."""
    from hwtune.check.suite import parse_suite
    from hwtune.check.timed import _Rule, baseline_values, costs

    suite = parse_suite({"suite": {"name": "t", "min_rounds": 3, "max_rounds": 12},
                         "figure": [{"kind": "fma_peak", "name": "peak"}]})
    rng = random.Random(0)
    ends = list(range(3, 37, 3))
    old = [100.0 * rng.lognormvariate(0, 0.01) for _ in range(36)]
    new = [80.0 * rng.lognormvariate(0, 0.01) for _ in range(36)]
    ref = [1e-3] * 36
    # paired: both sides rates (two builds)
    d = _Rule(suite, [None, None], None, rates=(True, True))([old, new], ends, 1.0)
    assert d.status == "regression" and d.ratio == pytest.approx(1.25, rel=0.02)
    # against a baseline: the reference kernel times, the figure is a rate
    base = baseline_values(costs(old), ref, {"ends": ends}, absolute=True)
    d = _Rule(suite, [None, None], base, absolute=True, rates=(False, True))(
        [ref, new], ends, 1.0)
    assert d.status == "regression"
    d = _Rule(suite, [None, None], base, absolute=True, rates=(False, True))(
        [ref, [x * 1.5 for x in new]], ends, 1.0)   # 120 GFLOPS: faster
    assert d.status == "improvement"
