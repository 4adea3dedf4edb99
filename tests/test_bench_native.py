"""hwtune.native.bench: C measurement loops return sane, well-shaped figures."""

import math

import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.native import bench
from hwtune.native.isa import supported_isas
from hwtune.native.threads import Pool, allowed_cpus

THREADS = min(2, len(allowed_cpus()))


@pytest.fixture(scope="module")
def pool():
    with Pool(executors=1, threads=THREADS, pin=True) as p:
        yield p


def _ok(samples, reps):
    assert isinstance(samples, np.ndarray) and samples.shape == (reps,)
    assert np.all(np.isfinite(samples)) and np.all(samples > 0)


@pytest.mark.parametrize("isa", supported_isas())
def test_gemm_samples(pool, isa):
    s = bench.gemm_samples(pool, THREADS, 48, 40, 72, isa=isa, warmup=1, reps=5, inner=2)
    _ok(s, 5)
    # Far slower than any real kernel needs: 2*M*N*K flops at >= 0.01 GFLOPS.
    assert np.median(s) < 2 * 48 * 40 * 72 / 1e7


def test_gemm_samples_many_reps_span_several_calls(pool, monkeypatch):
    monkeypatch.setattr(bench, "CALL_SECONDS", 1e-4)
    _ok(bench.gemm_samples(pool, 1, 16, 16, 16, warmup=0, reps=40), 40)


@pytest.mark.parametrize("op", bench.EW_OPS)
def test_eltwise_samples(pool, op):
    _ok(bench.eltwise_samples(pool, THREADS, op, 10_000, warmup=1, reps=4), 4)


def test_eltwise_nt_stores(pool):
    _ok(bench.eltwise_samples(pool, THREADS, "mul", 1 << 18, nt_stores=True, reps=3), 3)


@pytest.mark.parametrize("n, regions", [(10_001, 7), (64, 64), (1 << 18, 64)])
def test_eltwise_regions_cover_odd_splits(pool, n, regions):
    """The same n elements as `regions` fork-joins over consecutive slices
    (uneven slices when regions does not divide n; one element each at
    regions = n), with and without non-temporal stores."""
    _ok(bench.eltwise_samples(pool, THREADS, "mul", n, reps=3, regions=regions), 3)
    _ok(bench.eltwise_samples(pool, THREADS, "fma", n, reps=2, regions=regions,
                              nt_stores=True), 2)


def test_bad_arguments_raise_usage_errors(pool):
    with pytest.raises(UsageError, match="regions=65 exceeds n=64"):
        bench.eltwise_samples(pool, 1, "mul", 64, regions=65)
    with pytest.raises(UsageError, match="regions=0"):
        bench.eltwise_samples(pool, 1, "mul", 64, regions=0)
    with pytest.raises(UsageError, match="unknown element-wise op"):
        bench.eltwise_samples(pool, 1, "swish", 10)
    with pytest.raises(UsageError, match="M=0"):
        bench.gemm_samples(pool, 1, 0, 4, 4)
    with pytest.raises(UsageError, match="reps=0"):
        bench.gemm_samples(pool, 1, 4, 4, 4, reps=0)
    with pytest.raises(UsageError, match="unknown ISA"):
        bench.gemm_samples(pool, 1, 4, 4, 4, isa="sse9")
    with pytest.raises(UsageError, match="seconds"):
        bench.fma_peak(pool, 1, seconds=0)


def test_fma_peak_runs_on_every_thread_count(pool):
    """The probe gives a finite rate at 1 and at THREADS threads. How it
    scales is a speed figure, not a unit test (`hwtune scan` prints it per
    thread count): asserting a 1.2x 2-thread gain here failed a clean-clone
    CI run on this KVM guest with ratios 1.000, 1.000, 0.90 at load < 1.5,
    and passed on every rerun, the second vCPU being the hypervisor's to
    give."""
    for t in sorted({1, THREADS}):
        gflops = bench.fma_peak(pool, t, seconds=0.2)
        assert math.isfinite(gflops) and gflops > 0.1  # GFLOPS: any FPU does better


def test_triad(pool):
    gbs = bench.triad(pool, THREADS, 1 << 20, seconds=0.2)
    assert math.isfinite(gbs) and 0.1 < gbs < 10_000


def test_forkjoin(pool):
    t = bench.forkjoin_pool(pool, THREADS, 2000)
    assert math.isfinite(t) and 0 < t < 1e-3
    omp = bench.forkjoin_omp(THREADS, 2000)
    assert omp is None or (math.isfinite(omp) and omp > 0)


@pytest.mark.skipif(THREADS < 2, reason="a transfer needs two cores")
def test_xfer_reads_on_two_threads(pool):
    remote, local = bench.xfer(pool, 4096, 5)
    assert remote.shape == local.shape == (5,)
    _ok(local, 5)
    # NaN only for a read the pool ran on the writer's CPU
    ran = remote[~np.isnan(remote)]
    assert np.all(ran > 0) and np.all(np.isfinite(ran))


def test_xfer_needs_two_threads_and_a_size():
    with Pool(executors=1, threads=1, pin=False) as one:
        with pytest.raises(UsageError, match="threads=2"):
            bench.xfer(one, 4096, 3)
    if THREADS >= 2:
        with Pool(executors=1, threads=2, pin=False) as two:
            with pytest.raises(UsageError, match="nbytes"):
                bench.xfer(two, 0, 3)


def test_wake_times_a_parked_thread_from_the_post(pool):
    w = bench.wake(pool, 50e-6, 7)
    assert w.shape == (7,)
    # the waiter stamps its wake-up after the post: positive, and far under
    # the second the round trip's spin would allow
    assert np.all(w > 0) and np.all(w < 1.0)


def test_wake_needs_two_threads_and_a_sane_gap():
    with Pool(executors=1, threads=1, pin=False) as one:
        with pytest.raises(UsageError, match="threads=2"):
            bench.wake(one, 1e-5, 3)
    if THREADS >= 2:
        with Pool(executors=1, threads=2, pin=False) as two:
            with pytest.raises(UsageError, match="gap"):
                bench.wake(two, 2.0, 3)
            with pytest.raises(UsageError, match="reps"):
                bench.wake(two, 1e-5, 0)


def test_the_engines_spin_is_timed():
    s = bench.spin_s(3)
    assert 0 < s < 1.0  # 2000 polls: ~2 us (Zen 1) to ~100 us (Cascade Lake)
    with pytest.raises(UsageError, match="reps"):
        bench.spin_s(0)


def test_now_is_monotonic():
    a = bench.now()
    b = bench.now()
    assert b >= a > 0
