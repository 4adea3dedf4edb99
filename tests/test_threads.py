"""hwtune.native.threads: teams of pinned threads, as the engine and scan use them."""

import os

import pytest

from hwtune.errors import UsageError
from hwtune.native import bench
from hwtune.native.threads import Pool, allowed_cpus, format_cpus

ALLOWED = allowed_cpus()
N = len(ALLOWED)


def test_allowed_cpus_match_the_os():
    assert sorted(ALLOWED) == sorted(os.sched_getaffinity(0))
    assert len(set(ALLOWED)) == N


def test_format_cpus():
    assert format_cpus([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"
    assert format_cpus([5]) == "5"


def test_start_stop_many_times():
    for i in range(60):
        with Pool(executors=1 + i % 2, threads=1, pin=bool(i % 3)) as p:
            if i % 4 == 0:
                assert bench.forkjoin_pool(p, 1, 10) > 0
        assert p._h is None
    p = Pool(1, 1)
    p.close()
    p.close()  # idempotent
    with pytest.raises(UsageError, match="closed"):
        p.pinned


def test_pinned_pool_maps_teams_to_disjoint_allowed_cpus():
    with Pool(executors=N, threads=1, pin=True) as p:
        if not p.pinned:
            pytest.skip("the OS refused to pin threads here (restricted cpuset)")
        cmap = p.cpu_map
        assert len(cmap) == N and all(len(team) == 1 for team in cmap)
        flat = [c for team in cmap for c in team]
        assert len(set(flat)) == len(flat)
        assert set(flat) <= set(ALLOWED)


@pytest.mark.skipif(N < 2, reason="needs 2 CPUs")
def test_one_team_uses_cores_in_topology_order():
    with Pool(executors=1, threads=2, pin=True) as p:
        if p.pinned:
            assert p.cpu_map == [ALLOWED[:2]]


def test_explicit_cpu_list_is_honoured():
    with Pool(executors=1, threads=1, pin=True, cpus=[ALLOWED[-1]]) as p:
        if p.pinned:
            assert p.cpu_map == [[ALLOWED[-1]]]


def test_unpinned_pool_may_oversubscribe():
    with Pool(executors=N + 1, threads=2, pin=False) as p:
        assert not p.pinned and p.cpu_map is None
        assert (p.executors, p.threads) == (N + 1, 2)
        assert bench.forkjoin_pool(p, 2, 100) > 0


def test_impossible_counts_raise_usage_errors_naming_values_and_cpus():
    with pytest.raises(UsageError) as e:
        Pool(executors=N + 1, threads=1, pin=True)
    msg = str(e.value)
    assert f"executors={N + 1}" in msg and "threads=1" in msg and format_cpus(ALLOWED) in msg
    assert "\n" not in msg
    for bad in ({"executors": 0}, {"threads": -1}, {"threads": 1.5}, {"executors": True}):
        with pytest.raises(UsageError, match="must be an integer"):
            Pool(**bad)
    with pytest.raises(UsageError, match="distinct CPUs"):
        Pool(executors=2, threads=1, pin=True, cpus=[ALLOWED[0], ALLOWED[0]])
    with pytest.raises(UsageError, match="distinct CPUs"):
        Pool(executors=1, threads=1, pin=True, cpus=[max(ALLOWED) + 1000])


def test_threads_beyond_the_team_are_rejected():
    with Pool(1, 1) as p:
        with pytest.raises(UsageError, match="threads=2"):
            bench.forkjoin_pool(p, 2, 10)


@pytest.mark.parametrize("kind", ["gemm", "mul"])
def test_corun_returns_one_figure_per_team(kind):
    executors = 2 if N >= 2 else 1
    with Pool(executors=executors, threads=1, pin=N >= 2) as p:
        figs = bench.corun(p, kind, M=64, K=64, N=64, n=1 << 16, seconds=0.2)
    assert len(figs) == executors
    assert all(f > 0 and f == f and f != float("inf") for f in figs)


def test_corun_rejects_unknown_kind():
    with Pool(1, 1) as p:
        with pytest.raises(UsageError, match="gemm or mul"):
            bench.corun(p, "conv", seconds=0.1)
        with pytest.raises(UsageError, match="M="):
            bench.corun(p, "gemm", n=10, seconds=0.1)
