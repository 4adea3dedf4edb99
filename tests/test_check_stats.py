"""The gate's statistics on known distributions and edge cases."""

import itertools
import math

import numpy as np
import pytest

from hwtune.check.stats import (Thresholds, _u_counts, compare, mann_whitney_greater,
                                noise_floor, ratio_ci)


def brute_force_p(x, y):
    """P(U >= observed) over every split of the pooled values (no ties)."""
    pooled = list(x) + list(y)
    n1 = len(x)

    def u(a, b):
        return sum((ai > bj) + 0.5 * (ai == bj) for ai in a for bj in b)

    obs = u(x, y)
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), n1):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        hits += u(a, b) >= obs - 1e-9
    return hits / total


@pytest.mark.parametrize("x,y", [
    ([5.0, 6.0, 7.0], [1.0, 2.0, 3.0, 4.0]),
    ([1.5, 3.5, 9.0], [1.0, 2.0, 3.0, 4.0]),
    ([0.1, 0.2], [0.3, 0.4, 0.5]),
    ([2.0, 4.0, 6.0, 8.0], [1.0, 3.0, 5.0, 7.0, 9.0]),
])
def test_exact_u_matches_enumeration(x, y):
    t = mann_whitney_greater(x, y)
    assert t.method == "exact"
    assert t.p == pytest.approx(brute_force_p(x, y))


def test_u_count_table_sums_to_all_orders():
    for n1, n2 in [(1, 1), (3, 4), (7, 5), (15, 15)]:
        c = _u_counts(n1, n2)
        assert sum(c) == math.comb(n1 + n2, n1)
        assert len(c) == n1 * n2 + 1
        assert list(c) == list(reversed(c))  # symmetric under H0


def test_normal_approximation_close_to_exact():
    rng = np.random.default_rng(3)
    x, y = rng.normal(1.02, 0.05, 25), rng.normal(1.0, 0.05, 25)
    exact = mann_whitney_greater(x, y)
    assert exact.method == "exact"
    # Large samples take the normal approximation; compare on 40 vs 40.
    big_x, big_y = rng.normal(1.02, 0.05, 40), rng.normal(1.0, 0.05, 40)
    approx = mann_whitney_greater(big_x, big_y)
    assert approx.method == "normal"
    # The same data through both: force exact by enumeration size limit.
    n = 20
    xs, ys = big_x[:n], big_y[:n]
    ex = mann_whitney_greater(xs, ys).p
    u = mann_whitney_greater(xs, ys).u
    z = (u - n * n / 2 - 0.5) / math.sqrt(n * n * (2 * n + 1) / 12)
    assert abs(ex - 0.5 * math.erfc(z / math.sqrt(2))) < 0.01


def test_ties_use_corrected_normal():
    t = mann_whitney_greater([1, 1, 2, 2, 3], [1, 1, 2, 2, 3])
    assert t.method == "normal"
    assert 0.4 < t.p < 0.7
    assert mann_whitney_greater([2, 2, 2], [2, 2, 2]).p == 1.0  # no evidence at all


def test_normal_shift_is_a_regression():
    rng = np.random.default_rng(0)
    base, cur = rng.normal(1.0, 0.01, 15), rng.normal(1.10, 0.01, 15)
    v = compare(cur, base)
    assert v.status == "regression"
    assert v.ratio == pytest.approx(1.10, abs=0.02)
    assert v.ci[0] > 1.0 and v.p < 0.01


def test_same_distribution_passes():
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = compare(rng.normal(1.0, 0.005, 15), rng.normal(1.0, 0.005, 15))
        assert v.status == "pass", v.reason


def test_small_significant_shift_below_min_effect_passes():
    rng = np.random.default_rng(2)
    v = compare(rng.normal(1.02, 0.001, 15), rng.normal(1.0, 0.001, 15))
    assert v.p < 0.01 and v.status == "pass"


def test_improvement():
    rng = np.random.default_rng(4)
    v = compare(rng.normal(0.8, 0.005, 15), rng.normal(1.0, 0.005, 15))
    assert v.status == "improvement"


def test_mad_zero_identical():
    v = compare([1.0] * 10, [1.0] * 10)
    assert v.status == "pass" and v.noise == 0.0 and v.p == 1.0 and v.ratio == 1.0


def test_mad_zero_shifted_is_regression():
    v = compare([1.2] * 10, [1.0] * 10)
    assert v.status == "regression" and v.noise == 0.0


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_samples_undecidable(n):
    v = compare([1.0 + 0.1 * i for i in range(n)], [1.0, 1.1, 1.2])
    assert v.status == "undecidable" and "too few samples" in v.reason
    v = compare([5.0, 5.0, 5.0], [1.0] * n)
    assert v.status == "undecidable"


def test_three_samples_cannot_be_significant():
    # The smallest exact one-sided p of 3 vs 3 is 1/20 > alpha: never a regression.
    v = compare([2.0, 2.1, 2.2], [1.0, 1.01, 1.02])
    assert v.status != "regression" and v.p == pytest.approx(0.05)


def test_noisy_host_undecidable_but_huge_regression_still_caught():
    rng = np.random.default_rng(5)
    base = rng.lognormal(0.0, 0.3, 15)
    v = compare(rng.lognormal(0.0, 0.3, 15), base)
    assert v.status == "undecidable" and "too noisy" in v.reason and v.noise > 0.05
    v = compare(rng.lognormal(np.log(4.0), 0.3, 15), base)
    assert v.status == "regression"


def test_non_positive_and_non_finite_samples():
    assert compare([0.0] * 5, [1.0] * 5).status == "undecidable"
    v = compare([1.0, 1.0, 1.0, float("nan"), float("inf")], [1.0] * 5)
    assert v.status == "pass"


def test_noise_floor_and_ci_are_deterministic():
    rng = np.random.default_rng(6)
    xs, ys = rng.normal(1, 0.05, 15), rng.normal(1, 0.05, 15)
    assert noise_floor(xs) == noise_floor(xs)
    assert ratio_ci(xs, ys) == ratio_ci(xs, ys)
    lo, hi = ratio_ci(xs, ys)
    assert lo < 1.0 < hi
    assert noise_floor([3.0]) == 0.0


def test_thresholds_validate():
    with pytest.raises(ValueError):
        Thresholds(alpha=0.7).validate()
    with pytest.raises(ValueError):
        Thresholds(min_effect=0).validate()


def test_machine_drift_makes_absolute_undecidable():
    rng = np.random.default_rng(7)
    base, cur = rng.normal(1.0, 0.005, 15), rng.normal(1.10, 0.005, 15)
    assert compare(cur, base, drift=0.02).status == "regression"
    v = compare(cur, base, drift=0.2)
    assert v.status == "undecidable" and "reference kernel moved +20.0%" in v.reason
    assert compare(rng.normal(3.0, 0.005, 15), base, drift=0.2).status == "regression"
