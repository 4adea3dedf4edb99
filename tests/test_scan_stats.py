"""Pure statistics of hwtune scan: median, MAD, spread, saturation, efficiency."""

import pytest

from hwtune.scan import stats


def test_median_odd_even_and_single():
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.median([7.5]) == 7.5


def test_median_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        stats.median([])


def test_mad_ignores_one_outlier():
    xs = [1.0, 1.1, 0.9, 1.0, 50.0]
    assert stats.median(xs) == 1.0
    assert stats.mad(xs) == pytest.approx(0.1)


def test_mad_zero_for_identical_samples_and_one_sample():
    assert stats.mad([2.0, 2.0, 2.0]) == 0.0
    assert stats.mad([2.0]) == 0.0
    assert stats.rel_spread([2.0, 2.0, 2.0]) == 0.0
    assert stats.rel_spread([2.0]) == 0.0
    assert not stats.is_noisy([2.0], 0.0)


def test_mad_with_ties_around_the_median():
    # Half the samples equal the median: MAD is 0 even though two samples
    # are far away, which the noisy test must treat as not noisy.
    xs = [1.0, 1.0, 1.0, 5.0, 9.0]
    assert stats.mad(xs) == 0.0
    assert not stats.is_noisy(xs, 0.01)
    ys = [1.0, 1.0, 3.0, 3.0]
    assert stats.median(ys) == 2.0
    assert stats.mad(ys) == 1.0


def test_rel_spread_and_noisy_threshold_is_strict():
    xs = [0.9, 1.0, 1.1]
    assert stats.rel_spread(xs) == pytest.approx(0.1)
    assert stats.is_noisy(xs, 0.05)
    assert not stats.is_noisy([1.0, 1.0, 1.1], 0.1)


def test_rel_spread_of_zero_median():
    assert stats.rel_spread([0.0, 0.0, 1.0]) == 0.0


def test_speedup_and_efficiency():
    assert stats.speedup(10.0, 18.0) == pytest.approx(1.8)
    assert stats.efficiency(10.0, 18.0, 2) == pytest.approx(0.9)
    # relative to a base of 2 threads: 4 threads doing 1.5x is 75%
    assert stats.efficiency(20.0, 30.0, 4, base_threads=2) == pytest.approx(0.75)
    assert stats.speedup(0.0, 5.0) == 0.0
    with pytest.raises(ValueError):
        stats.efficiency(1.0, 1.0, 0)


def test_saturation_point_first_count_past_which_gain_is_small():
    threads = [1, 2, 4, 8, 16]
    values = [10.0, 19.0, 35.0, 37.0, 36.0]
    assert stats.saturation_point(threads, values, 0.1) == 4
    # a stricter threshold: 35 -> 37 is a 5.7% gain, which counts at 5%
    assert stats.saturation_point(threads, values, 0.05) == 8


def test_saturation_point_ignores_a_single_dip():
    # 3 threads dip below 2, but 4 threads gain a lot: not saturated at 2.
    assert stats.saturation_point([1, 2, 3, 4], [10.0, 18.0, 17.0, 30.0], 0.1) is None


def test_saturation_point_none_when_still_scaling_or_single_point():
    assert stats.saturation_point([1, 2, 4], [1.0, 2.0, 4.0], 0.1) is None
    assert stats.saturation_point([1], [1.0], 0.1) is None


def test_saturation_point_unsorted_input_and_no_gain_at_all():
    assert stats.saturation_point([2, 1], [10.0, 10.0], 0.1) == 1
    with pytest.raises(ValueError):
        stats.saturation_point([1, 2], [1.0], 0.1)
    with pytest.raises(ValueError):
        stats.saturation_point([1, 2], [1.0, 2.0], -0.1)


# ---- the steps: option parsing and step lists (pure, no measuring) ----

from hwtune.errors import UsageError  # noqa: E402
from hwtune.scan import steps  # noqa: E402

PLAN_KW = dict(supported=["generic", "avx2", "avx512"], selected="avx512",
               l2_bytes=1 << 20, l3_bytes=36 << 20)


def test_parse_threads_lists_and_ranges():
    assert steps.parse_threads("1,2,4") == [1, 2, 4]
    assert steps.parse_threads("4,1-3,2") == [1, 2, 3, 4]
    for bad in ("", "a", "1,,2", "3-1", "1.5"):
        with pytest.raises(UsageError):
            steps.parse_threads(bad)


def test_parse_shape_and_size():
    assert steps.parse_shape("64x512x512") == (64, 512, 512)
    assert steps.parse_shape("1X512x2048") == (1, 512, 2048)
    for bad in ("64x512", "64x0x5", "axbxc", "64x512x512x1", "100000x10x10"):
        with pytest.raises(UsageError):
            steps.parse_shape(bad)
    assert steps.parse_size("32_768") == 32768
    for bad in ("0", "-1", "1e3", "", str(steps.MAX_ELTWISE_SIZE + 1)):
        with pytest.raises(UsageError):
            steps.parse_size(bad)


def test_threads_must_fit_the_allowed_cpus():
    assert steps.resolve_threads(None, 3) == [1, 2, 3]
    with pytest.raises(UsageError, match="between 1 and 2"):
        steps.resolve_threads([1, 3], 2)
    with pytest.raises(UsageError):
        steps.resolve_threads([0], 2)


def test_full_plan_covers_every_section_quick_is_smaller():
    opts = steps.ScanOptions(scale=1.0)
    full = steps.make_plan(opts, n_allowed=2, **PLAN_KW)
    benches = {s.bench for s in full}
    assert benches == {"fma_peak", "triad", "gemm", "eltwise", "corun"}
    assert {s.isa for s in full if s.bench == "fma_peak"} == {"generic", "avx2", "avx512"}
    assert all(s.reference for s in full if s.bench == "gemm")
    assert {s.op for s in full if s.bench == "eltwise"} == set(steps.ELTWISE_OPS)
    # co-run: (1x1, 1x2, 2x1) x (gemm, mul) x (pinned, OS)
    assert len([s for s in full if s.bench == "corun"]) == 12
    quick = steps.make_plan(steps.ScanOptions(quick=True, scale=1.0), n_allowed=2, **PLAN_KW)
    assert len(quick) < len(full)
    assert {s.isa for s in quick if s.bench == "fma_peak"} == {"avx512"}
    assert max(s.reps for s in quick) < max(s.reps for s in full)


def test_plan_options_are_honoured():
    opts = steps.ScanOptions(threads=[2], isa="avx2", reps=4, gemm=((1, 512, 2048),),
                            eltwise_size=1000, corun=False, scale=1.0)
    got = steps.make_plan(opts, n_allowed=2, **PLAN_KW)
    assert not [s for s in got if s.bench == "corun"]
    assert {s.isa for s in got} == {"avx2"}
    assert {s.reps for s in got} == {4}
    assert [s.params for s in got if s.bench == "gemm"] == [{"M": 1, "K": 512, "N": 2048}]
    assert {s.threads for s in got if s.bench in ("gemm", "eltwise", "triad")} == {2}
    assert {s.params["n"] for s in got if s.bench == "eltwise"} == {1000}
    with pytest.raises(UsageError, match="--isa"):
        steps.make_plan(steps.ScanOptions(isa="neon", scale=1.0), n_allowed=2, **PLAN_KW)


def test_corun_layouts_fill_at_most_n_cpus():
    assert steps.corun_layouts([1, 2], 2) == [(1, 1), (2, 1), (1, 2)]
    big = steps.corun_layouts([1], 64)
    assert big == [(1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (32, 1), (64, 1)]
    assert all(k * t <= 64 for k, t in steps.corun_layouts(list(range(1, 65)), 64))


def test_triad_sizes_out_of_cache_and_in_l2():
    dram_n, l2_n = steps.triad_sizes(1 << 20, 36 << 20)
    assert 12 * dram_n >= 4 * (36 << 20)      # 3 arrays of 4-byte floats, 4x the L3
    assert 12 * l2_n <= (1 << 20) // 2


def test_l3_triad_a_quarter_of_the_l3_past_twice_each_threads_l2():
    n = steps.l3_triad_n(1 << 20, 32 << 20, 2)
    assert (32 << 20) // 4 - 12 < 12 * n <= (32 << 20) // 4
    assert steps.l3_triad_n(1 << 20, 32 << 20, 4) == n       # 8 MiB: 2 MiB per thread
    assert steps.l3_triad_n(1 << 20, 32 << 20, 5) is None    # < 2 L2s per thread
    assert steps.l3_triad_n(1 << 20, 0, 1) is None           # no L3


def test_plan_has_an_l3_triad_per_thread_count_only_where_it_fits():
    opts = steps.ScanOptions(quick=True, threads=[1, 2])
    plan = steps.make_plan(opts, n_allowed=2, supported=["generic"], selected="generic",
                           l2_bytes=1 << 20, l3_bytes=32 << 20)
    l3 = [s for s in plan if s.bench == "triad" and s.params["where"] == "l3"]
    assert [s.threads for s in l3] == [1, 2]
    plan = steps.make_plan(opts, n_allowed=2, supported=["generic"], selected="generic",
                           l2_bytes=1 << 20, l3_bytes=0)
    assert not [s for s in plan if s.bench == "triad" and s.params["where"] == "l3"]


# ---- the summary the renderers print (from stored-row dicts) ----

from hwtune.scan import summary  # noqa: E402


def _row(bench, op, threads, value, variant="avx512", params=None, **kw):
    r = dict(bench=bench, op=op, threads=threads, value=value, kernel_variant=variant,
             params=params or {}, median_s=kw.pop("median_s", None), mad_s=None,
             rel_spread=kw.pop("rel_spread", 0.01), status=kw.pop("status", "ok"),
             executors=kw.pop("executors", 1), pinned=kw.pop("pinned", True), unit="GFLOPS")
    r.update(kw)
    return r


def test_summary_derives_speedup_efficiency_saturation_and_blas_ratio():
    shape = {"M": 64, "K": 512, "N": 512}
    rows = [_row("gemm", "gemm", t, v, params=shape) for t, v in ((1, 100.0), (2, 180.0),
                                                                   (4, 190.0))]
    rows += [_row("gemm", "gemm", t, v, variant="numpy-blas", params=shape, pinned=None)
             for t, v in ((1, 50.0), (2, 90.0), (4, 170.0))]
    rows.append(_row("eltwise", "mul", 1, 5.0, params={"n": 32768}, status="noisy",
                     rel_spread=0.2))
    s = summary.summarize(rows, facts={"saturation": 0.1, "warnings": ["w1"]})
    g = s["gemm"][0]
    assert g["shape"] == "64x512x512"
    assert [r["speedup"] for r in g["rows"]] == [1.0, 1.8, 1.9]
    assert g["rows"][1]["efficiency"] == pytest.approx(0.9)
    assert g["rows"][0]["vs_blas"] == 2.0
    assert g["saturation"] == 2 and g["blas_saturation"] is None
    assert s["noisy"][0]["label"].startswith("eltwise mul")
    assert s["advice"] == [summary.NOISY_ADVICE] and "raise --reps" in summary.NOISY_ADVICE
    assert s["warnings"] == ["w1"]


def test_summary_picks_the_best_corun_layout_and_pinning_gain():
    rows = [
        _row("corun", "gemm", 1, 100.0, executors=2, pinned=True),
        _row("corun", "gemm", 1, 80.0, executors=2, pinned=False),
        _row("corun", "gemm", 2, 90.0, executors=1, pinned=True),
        _row("corun", "gemm", 2, 95.0, executors=1, pinned=False),
    ]
    c = summary.summarize(rows)["corun"]["gemm"]
    assert (c["best"]["executors"], c["best"]["threads"], c["best"]["placement"]) == (2, 1,
                                                                                    "pinned")
    assert c["pinned_vs_os_max"] == 1.25


def test_default_threads_follow_the_cpu_quota():
    # 4 CPUs in the affinity mask, a quota of 2 CPUs: scale over 1..2 by
    # default, but an explicit --threads 3 is still allowed.
    assert steps.resolve_threads(None, 4, n_default=2) == [1, 2]
    assert steps.resolve_threads([3], 4, n_default=2) == [3]


def test_gemm_interleaving_rounds_cover_every_rep():
    from hwtune.scan.runner import _rounds

    for reps in (1, 2, 3, 4, 9, 21, 50):
        r = _rounds(reps)
        assert sum(r) == reps and min(r) >= 1 and len(r) <= 7
        assert max(r) - min(r) <= 1
    assert _rounds(9) == [3, 3, 3]


def test_dot_peaks_only_for_the_variant_rows_the_cpu_runs():
    # an AVX-512 CPU with VNNI but without AVX512_BF16: no avx512 bf16 step
    dot = {("int8", "avx512"): "avx512_vnni", ("int8", "avx2"): "avx2",
           ("int8", "generic"): "generic", ("bf16", "generic"): "generic"}
    got = steps.make_plan(steps.ScanOptions(scale=1.0), n_allowed=2, dot_variants=dot, **PLAN_KW)
    peaks = {(s.op, s.isa, s.threads): s.params["kernel"] for s in got if s.bench == "dot_peak"}
    assert peaks == {(k, i, t): v for (k, i), v in dot.items() for t in (1, 2)}
    assert all(s.label.startswith(f"{s.op} peak (") for s in got if s.bench == "dot_peak")
    none = steps.make_plan(steps.ScanOptions(scale=1.0), n_allowed=2, **PLAN_KW)
    assert not [s for s in none if s.bench == "dot_peak"]


def test_dot_peaks_carry_their_ratio_to_the_fma_peak_and_absent_kinds_stay_absent():
    def row(bench, op, isa, threads, value, **p):
        return {"bench": bench, "op": op, "kernel_variant": isa, "threads": threads,
                "value": value, "params": p, "status": "ok", "rel_spread": 0.01,
                "unit": "GOPS" if op == "int8" else "GFLOPS"}
    s = summary.summarize([row("fma_peak", "fma", "avx512", 1, 80.0),
                           row("dot_peak", "int8", "avx512", 1, 160.0, kernel="avx512_vnni"),
                           row("dot_peak", "int8", "avx2", 1, 70.0, kernel="avx2")])
    int8 = {r["isa"]: r for r in s["peak"]["int8"]}
    assert int8["avx512"]["vs_fma"] == 2.0 and int8["avx512"]["kernel"] == "avx512_vnni"
    assert int8["avx2"]["vs_fma"] is None  # no FMA row of that ISA
    assert "bf16" not in s["peak"]
