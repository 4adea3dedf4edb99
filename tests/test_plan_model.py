"""The planner's parts on given inputs: machine descriptions, the cost
model's stated parts and its serial-fraction fit, the simulator binding,
and the search over schedulers, splits and per-op thread strategies."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.graph.generators.builder import Builder
from hwtune.native import sched
from hwtune.engine.simulator import Simulator
from hwtune.native.simulate import Overheads
from hwtune.planner import costmodel, graphi, search
from hwtune.planner.costmodel import CostModel
from hwtune.planner.machine import GB, bundled, envelope, from_toml, parse_cores

from plan_fixture import machine, predictor


# -- machines -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["epyc-7763", "xeon-phi-7250", "ryzen-9-5950x"])
def test_bundled_descriptions_load(name):
    m = machine(name)
    assert m.cores in (16, 64, 68) and m.peak_gflops_core > 0
    # bandwidth rises with cores until it saturates, never falls
    bw = m.dram_gbs
    assert all(b1 >= b0 for b0, b1 in zip(bw[1:], bw[2:])) and bw[-1] <= bw[1] * m.cores
    assert m.forkjoin(1) == 0 and m.forkjoin(m.cores) > m.forkjoin(2) > 0
    assert "bundled description" in m.source


def test_every_bundled_number_has_a_source_comment():
    for name, path in bundled().items():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0].strip()
            if "=" in code and not code.startswith(("name", "notes")) and \
                    any(ch.isdigit() for ch in code.split("=", 1)[1]):
                # the number's own line or the comment block right above it
                lines = path.read_text().splitlines()
                above = lines[i - 2].strip() if i > 1 else ""
                assert "#" in line or above.startswith("#"), f"{name}:{i}: {line}"


def test_xeon_phi_matches_graphi_section_2():
    m = machine("xeon-phi-7250")
    assert m.cores == 68 and m.clock_ghz == 1.4 and m.l2_shared_by == 2
    assert m.l2_bytes == 1 << 20 and m.dram_gbs[-1] == 400.0


def _rejected(tmp_path, text: str, match: str) -> None:
    """A description of this text is refused with an error matching `match`."""
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(UsageError, match=match):
        from_toml(str(p))


def test_description_errors_name_the_key(tmp_path):
    good = bundled()["ryzen-9-5950x"].read_text()
    _rejected(tmp_path, good.replace("cores = 16", "cores = -3"),
              "cores must be an integer in 1..4096, got -3")
    _rejected(tmp_path, good.replace("dram_gbs_saturated = 41.0", ""),
              "missing memory.dram_gbs_saturated")
    _rejected(tmp_path, "name = [", "not valid TOML")
    with pytest.raises(UsageError, match="cannot read machine description"):
        from_toml(str(tmp_path / "missing.toml"))


def test_a_description_may_give_the_l3_rate_per_core(tmp_path):
    """memory.l3_gbs_per_core: n cores move n times it in the L3; without
    the key the L3 level takes the in-L2 rate; the key without an L3 is an
    error naming both keys."""
    good = bundled()["ryzen-9-5950x"].read_text()
    m = from_toml(str(bundled()["ryzen-9-5950x"]))
    assert m.l3_gbs[1] == 80.0 and m.l3_bw(16) == pytest.approx(16 * 80.0 * GB)
    assert m.l3_bw(1) < m.l2_bw(1)
    p = tmp_path / "m.toml"
    p.write_text("\n".join(ln for ln in good.splitlines()
                           if not ln.startswith("l3_gbs_per_core")))
    plain = from_toml(str(p))
    assert plain.l3_gbs == () and plain.l3_bw(4) == plain.l2_bw(4)
    _rejected(tmp_path, good.replace("l3_mib = 32", "l3_mib = 0"),
              "l3_gbs_per_core needs caches.l3_mib")
    _rejected(tmp_path, good.replace("l3_gbs_per_core = 80.0", "l3_gbs_per_core = -1"),
              "l3_gbs_per_core must be a number")


def test_bandwidth_envelope_never_falls():
    # the scan's 2-thread figure below its 1-thread one is other programs' load
    assert envelope({1: 22.0, 2: 12.1}, 3) == (0.0, 22.0, 22.0, 22.0)
    assert envelope({2: 30.0, 4: 50.0}, 4) == (0.0, 30.0, 30.0, 30.0, 50.0)


@pytest.mark.parametrize("text", ["", "0", "16,x", "-1", "5000"])
def test_bad_core_lists(text):
    with pytest.raises(UsageError, match="invalid --cores"):
        parse_cores(text)


def test_core_lists_sorted_distinct():
    assert parse_cores("64, 16,32,16") == [16, 32, 64]


# -- cost model --------------------------------------------------------------------

def _model(host="ryzen-9-5950x", target="epyc-7763", s=0.0):
    fits = {"x": costmodel.SerialFit("x", s, 1, 0, 0, "given")}
    return costmodel.CostModel(machine(host), machine(target), fits)


def test_one_thread_on_the_same_machine_is_the_measured_time():
    m = _model(target="ryzen-9-5950x")
    tab = m.table([1e-3, 5e-6], [1 << 20, 64 << 20], ["x", "x"], 4)
    assert tab.seconds[:, 0] == pytest.approx([1e-3, 5e-6])


def test_compute_scales_with_the_per_core_peak_and_splits_over_threads():
    m = _model()  # 108.8 -> 78.4 GFLOPS per core
    tab = m.table([1e-3], [1024], ["x"], 8)
    c1 = 1e-3 - 1024 / (machine("ryzen-9-5950x").l2_gbs_core * GB)
    ratio = 108.8 / 78.4
    t = machine("epyc-7763")
    for n in (1, 2, 8):
        want = c1 * ratio / n + 1024 / (n * t.l2_gbs_core * GB) + t.forkjoin(n)
        assert tab.seconds[0, n - 1] == pytest.approx(want, rel=1e-9)


def test_the_serial_fraction_of_a_gemv_holds_its_traffic_as_well_as_its_compute():
    """A GEMV: T(t) = s (c + memory(1)) + (1 - s) (c / t + memory(t)) +
    forkjoin(t), so one whose 1-thread time is all traffic still scales by
    1 / s at most, and out of cache its serial share keeps one core's
    bandwidth; any other op's traffic moves at the t-thread rate."""
    from hwtune.planner.opdata import GEMV_FAMILY
    t = machine("ryzen-9-5950x")
    m = costmodel.CostModel(t, t, {k: costmodel.SerialFit(k, 0.5, 1, 0, 0, "given")
                                   for k in ("x", GEMV_FAMILY)})
    nb = t.l2_bytes // 2
    mem1 = nb / t.l2_bw(1)
    tab = m.table([mem1, 2 * mem1, 2 * mem1], [nb, nb, nb], [GEMV_FAMILY, GEMV_FAMILY, "x"], 4)
    for n in (2, 4):
        mem, fj = nb / t.l2_bw(n), t.forkjoin(n)
        assert tab.seconds[0, n - 1] == pytest.approx(0.5 * mem1 + 0.5 * mem + fj)
        assert tab.seconds[1, n - 1] == pytest.approx(0.5 * 2 * mem1 + 0.5 * (mem1 / n + mem) + fj)
        assert tab.seconds[2, n - 1] == pytest.approx(mem1 * (0.5 + 0.5 / n) + mem + fj)
    big = 4 * t.llc_bytes
    slow = big / t.dram_bw(1)
    out = m.table([slow], [big], [GEMV_FAMILY], 4)
    want = 0.5 * slow + 0.5 * big / t.dram_bw(4)
    assert out.seconds[0, 3] == pytest.approx(want + t.forkjoin(4))
    assert out.mem_frac[0, 3] == pytest.approx(want / out.seconds[0, 3])


def test_serial_fraction_limits_the_speedup():
    tab0 = _model(s=0.0).table([1e-2], [1024], ["x"], 64)
    tab5 = _model(s=0.5).table([1e-2], [1024], ["x"], 64)
    sp0 = tab0.seconds[0, 0] / tab0.seconds[0, 63]
    sp5 = tab5.seconds[0, 0] / tab5.seconds[0, 63]
    assert sp0 > 20 and sp5 < 2  # Amdahl: at most 1 / 0.5


def test_out_of_cache_ops_saturate_the_bandwidth_and_share_it():
    m = _model()
    big = 256 << 20  # beyond the 32 MiB L3
    tab = m.table([0.05], [big], ["x"], 64)
    sat = machine("epyc-7763").dram_gbs[-1] * GB
    assert tab.seconds[0, 63] >= big / sat
    assert 0 < tab.mem_frac[0, 63] <= 1 and tab.mem_bps[0, 63] == pytest.approx(
        big / tab.seconds[0, 63])
    small = m.table([0.05], [1 << 20], ["x"], 4)
    assert small.mem_frac[0, 3] == 0 and small.mem_bps[0, 3] == 0


def test_serial_fraction_fit_recovers_a_known_value():
    host = machine("ryzen-9-5950x")
    true_s = 0.3
    pts = []
    for t1, nbytes in ((2e-3, 1 << 16), (5e-4, 1 << 18)):
        c1, m1 = costmodel.split_here(host, [t1], [nbytes])
        for n in (2, 4, 8, 16):
            tn = float(c1[0]) * (true_s + (1 - true_s) / n) + float(
                costmodel.memory_time(host, nbytes, n)) + host.forkjoin(n)
            pts.append(costmodel.Point("matmul", t1, tn, n, nbytes, "synthetic"))
    fit = costmodel.fit_serial(host, pts)["matmul"]
    assert fit.serial_fraction == pytest.approx(true_s, abs=costmodel.FIT_STEP)
    assert fit.points == 8 and fit.max_rel_err < 0.01 and fit.source == "synthetic"


def test_bare_points_are_fitted_with_the_pools_own_fork_join():
    """The scan's loops pay an empty region of the pool, not the in-run
    figure: fitted with the latter, a point that scales perfectly would read
    as faster than any serial fraction allows."""
    host = machine("ryzen-9-5950x")
    pool = {n: 0.2 * host.forkjoin(n) for n in range(2, 17)}
    true_s = 0.1
    pts = []
    for t1, nbytes in ((2e-5, 1 << 12), (8e-6, 1 << 12)):
        c1, _ = costmodel.split_here(host, [t1], [nbytes])
        for n in (2, 4, 8):
            tn = float(c1[0]) * (true_s + (1 - true_s) / n) + float(
                costmodel.memory_time(host, nbytes, n)) + pool[n]
            pts.append(costmodel.Point("mul", t1, tn, n, nbytes, "scan eltwise", bare=True))
    fit = costmodel.fit_serial(host, pts, pool)["mul"]
    assert fit.serial_fraction == pytest.approx(true_s, abs=costmodel.FIT_STEP)
    assert fit.max_rel_err < 0.01
    # the in-run figure (no pool figure given) cannot explain them
    assert costmodel.fit_serial(host, pts)["mul"].max_rel_err > 0.05


def test_candidates_and_strategy_one_come_from_the_table():
    tab = costmodel.OpTable(np.array([[4.0, 2.0, 3.0], [1.0, 1.5, 2.0]]),
                            np.zeros((2, 3)), np.zeros((2, 3)))
    assert list(tab.best_threads(3)) == [2, 1]
    assert tab.candidates(3, 2) == [[(2, 2.0), (3, 3.0)], [(1, 1.0), (2, 1.5)]]


# -- calibration ----------------------------------------------------------------------

def _cal(run2, dispatch, fj=1e-6):
    from hwtune.planner.calibrate import Calibration
    return Calibration(forkjoin={2: fj},
                       overheads={"corun": {"inline_s": 1e-7, "dispatch_s": dispatch,
                                            "section_s": 5e-8}},
                       run_s={"corun": {1: 8e-6, 2: run2}}, add_s=7e-8)


def test_calibrations_agree_within_the_relative_or_the_absolute_tolerance():
    from hwtune.planner.calibrate import agree
    assert agree(_cal(100e-6, 3e-6), _cal(110e-6, 3.3e-6))
    assert agree(_cal(1e-6, 3e-6), _cal(3.5e-6, 3e-6))       # run costs under 3 us apart
    assert not agree(_cal(100e-6, 3e-6), _cal(800e-6, 3e-6))
    assert not agree(_cal(100e-6, 3e-6), _cal(100e-6, 5e-6))
    assert not agree(_cal(100e-6, 3e-6, fj=1e-6), _cal(100e-6, 3e-6, fj=2e-6))
    pooled = _cal(100e-6, 3e-6)
    pooled.forkjoin_pool = {2: 3e-7}
    assert not agree(pooled, _cal(100e-6, 3e-6))  # figures of another kind


def test_an_agreeing_pair_is_kept_with_the_spread_of_every_attempt():
    from hwtune.planner.calibrate import Calibration, combine
    got = combine([_cal(800e-6, 3e-6), _cal(100e-6, 3e-6), _cal(110e-6, 3e-6)])
    assert got.settled and got.attempts == 3
    assert got.run_s["corun"][2] == pytest.approx(105e-6)
    assert got.spread["run_s/corun/2"] == pytest.approx(700 / 105)
    assert got.spread["dispatch_s/corun"] == 0
    back = Calibration.from_json(got.to_json())
    assert back.spread == got.spread and back.settled and back.attempts == 3


def test_without_an_agreeing_pair_every_figure_is_the_median():
    from hwtune.planner.calibrate import combine
    got = combine([_cal(800e-6, 3e-6), _cal(100e-6, 6e-6), _cal(400e-6, 12e-6)])
    assert not got.settled
    assert got.run_s["corun"][2] == pytest.approx(400e-6)
    assert got.overheads["corun"]["dispatch_s"] == pytest.approx(6e-6)


# -- the simulator binding ----------------------------------------------------------

def _adds(name: str, ops):
    """A graph of adds of 64 floats on input x: ops are (output, [inputs])
    in order; the last one's output is the graph's."""
    b = Builder(name)
    b.input("x", (64,), init="normal")
    for out, ins in ops:
        b.op(out, "add", ins)
    b.output(ops[-1][0])
    return b.build()


def _chain_and_fan():
    return _adds("sim-test", [("a", ["x", "x"]), ("b", ["a", "x"]), ("c", ["a", "x"]),
                              ("d", ["b", "c"])])


def test_simulated_makespans_follow_the_dependencies():
    g = _chain_and_fan()
    sec = np.array([[1e-3, 6e-4], [2e-3, 1.2e-3], [3e-3, 1.8e-3], [1e-3, 6e-4]])
    cost = {op.name: s for op, s in zip(g.ops, sec[:, 0])}
    with Simulator(g) as sim:
        one, ev = sim.run(executors=1, threads=1, scheduler="critical-path", seconds=sec,
                          op_cost=cost, events=True)
        assert one == pytest.approx(7e-3)
        two, ev = sim.run(executors=2, threads=1, scheduler="critical-path", seconds=sec,
                          op_cost=cost, events=True)
        assert two == pytest.approx(1e-3 + 3e-3 + 1e-3)  # b and c side by side
        by = {e.op: e for e in ev}
        assert by["b"].executor != by["c"].executor and by["d"].start_s == pytest.approx(4e-3)
        # adds of 64 floats are too small to split (the plan's estimate): one
        # thread each, as in a real run, unless counts are given
        seq2, _ = sim.run(executors=1, threads=2, scheduler="sequential", seconds=sec)
        assert seq2 == pytest.approx(sec[:, 0].sum())
        seq2, _ = sim.run(executors=1, threads=2, scheduler="sequential", seconds=sec,
                          op_threads={op.name: 2 for op in g.ops})
        assert seq2 == pytest.approx(sec[:, 1].sum())
        slow, _ = sim.run(executors=2, threads=1, scheduler="critical-path", seconds=sec,
                          op_cost=cost, overheads=Overheads(run_s=1e-4))
        assert slow == pytest.approx(two + 1e-4)
        with pytest.raises(UsageError, match="up to 2 threads"):
            sim.run(executors=1, threads=4, scheduler="sequential", seconds=sec)


def test_the_planner_times_the_graph_the_engine_runs():
    """ResNet-18's batch norms, residual adds and ReLUs are fused into its
    CONVs; the weight-folding ops the fusion adds run once at prepare, and
    the planner marks exactly the ops the engine folds."""
    from hwtune.engine.instance import NativeEngine
    from hwtune.planner.inputs import engine_graph
    from hwtune.planner.opdata import folded_ops, op_data
    from hwtune.sources import load_any
    model, _ = load_any("resnet18", None, None)
    g = engine_graph(model)
    types = {op.op for op in g.ops}
    assert "relu" not in types and "add" not in types and len(g.ops) != len(model.ops)
    with NativeEngine(g, executors=1, threads=1, scheduler="sequential", pin=False) as e:
        assert folded_ops(g) == set(e.folded()) and e.folded()
    assert {d.name for d in op_data(g) if d.folded} == folded_ops(g)
    assert not folded_ops(model)


def test_the_simulator_is_closed_once():
    sim = Simulator(_chain_and_fan())
    sim.close()
    sim.close()
    with pytest.raises(UsageError, match="closed"):
        sim.run(executors=1, threads=1, scheduler="sequential", seconds=np.ones((4, 1)))


# -- the search ------------------------------------------------------------------------

def test_splits_respect_the_engine_limit():
    assert search.splits(16) == [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]
    assert search.splits(128)[-1] == (64, 2) and search.splits(16, single_team=True) == [(1, 16)]


def test_plan_covers_every_scheduler_and_picks_the_fastest():
    p = predictor()
    try:
        rows = list(sched.schedulers().values())
        r = search.plan_cores(p, 16, rows)
        best = r["best"]
        every = [c for s in r["schedulers"].values()
                 for c in s["splits"] + (s.get("strategies") or [])]
        assert best["latency_s"] == min(c["latency_s"] for c in every)
        assert set(r["schedulers"]) == set(sched.names())
        assert [c["executors"] for c in r["schedulers"]["sequential"]["splits"]] == [1]
        assert {c["strategy"] for c in r["schedulers"]["corun"]["strategies"]} == {"strategy3"}
        s1 = r["op_threads"]["strategy1"]["ops"]
        assert set(s1) == {op.name for op in p.graph.ops}
        assert all(1 <= t <= r["op_threads"]["team_threads"] for t in s1.values())
        # Strategy 2: one count per op type
        s2 = r["op_threads"]["strategy2"]["by_type"]
        assert all(len(v) == 1 for v in s2.values())
        big = search.plan_cores(p, 128, rows)
        assert big["schedulers"]["corun"]["best"] is None
        assert "64 workers" in big["schedulers"]["corun"]["note"]
    finally:
        p.close()


def test_graphi_rows_compare_with_the_paper():
    p = predictor(model="pathnet_small", target="xeon-phi-7250")
    try:
        row = graphi.predict_row(p, graphi.PAPER[2], sched.schedulers())
    finally:
        p.close()
    assert row["label"] == "PathNet" and row["paper_speedup"] == [1.2, 2.1]
    assert [s["split"] for s in row["splits"]] == ["2x32", "4x16", "8x8", "16x4", "32x2",
                                                  "6x10"]
    assert row["speedup"] == pytest.approx(row["sequential_s"] / row["best_cp_s"])
    header, rows = graphi.table([row])
    assert rows[0][0] == "PathNet" and rows[0][4] in ("inside", "OUTSIDE")
    assert math.isfinite(row["cp_over_sq_range"][0])
    # the band: every serial fraction halved, then doubled; ops that scale
    # worse make S64 slower, so the best speedup over it grows
    lo, hi = row["serial_band"]
    assert (lo["serial_scale"], hi["serial_scale"]) == graphi.SERIAL_SCALES
    assert lo["speedup"] <= row["speedup"] * (1 + 1e-9) <= hi["speedup"] * (1 + 1e-9)
    assert rows[0][5] == f"{lo['speedup']:.2f}x / {hi['speedup']:.2f}x"


def test_the_serial_band_shows_the_fits_as_they_are_and_says_why_outside():
    # No floor: a prediction is not shaped by the range it is compared with.
    # A host whose 2-thread points fit s = 0 (at an edge or not) gets the
    # band its fits give (0 halved and doubled is 0: the band is the
    # prediction itself), and a row outside the paper's range carries the
    # reason, from S64's parts.
    assert not hasattr(graphi, "SERIAL_FLOOR")
    p = predictor(model="pathnet_small", target="xeon-phi-7250")
    fits = {k: dataclasses.replace(f, serial_fraction=0.0, median_rel_err=err)
            for (k, f), err in zip(p.model.fits.items(), itertools.cycle((0.0, 0.5)))}
    p0 = dataclasses.replace(p, model=CostModel(p.model.host, p.model.target, fits),
                             _tables={}, _sim=None)
    assert any(f.at_edge for f in fits.values()) and not all(f.at_edge for f in fits.values())
    try:
        doubled, halved = graphi.with_serial_scale(p0, 2.0), graphi.with_serial_scale(p0, 0.5)
        assert all(f.serial_fraction == 0.0 for f in doubled.model.fits.values())
        assert all(f.serial_fraction == 0.0 for f in halved.model.fits.values())
        row = graphi.predict_row(p0, graphi.PAPER[2], sched.schedulers())
        lo, hi = row["serial_band"]
        assert lo["speedup"] == pytest.approx(row["speedup"])
        assert hi["speedup"] == pytest.approx(row["speedup"])
        parts = row["s64_parts"]
        assert parts["serial"] == pytest.approx(0.0, abs=1e-12)  # every fit at 0
        assert sum(parts[k] for k in ("serial", "parallel", "memory", "forkjoin")) == \
            pytest.approx(1.0)
        plo, phi = row["paper_speedup"]
        inside = plo <= row["speedup"] <= phi
        fig6 = [x for x in row["reasons"] if x.startswith("Fig. 6")]
        assert len(fig6) == (0 if inside else 1)
        if fig6:
            assert f"{parts['parallel']:.0%} split compute" in fig6[0]
            assert f"{row['speedup']:.2f}x" in fig6[0]
        t2lo, t2hi = row["paper_cp_over_sq_range"]
        outside = [s["split"] for s in row["splits"] if s["paper_cp_over_sq"] is not None
                   and not t2lo <= s["cp_over_sq"] <= t2hi]
        t2 = [x for x in row["reasons"] if x.startswith("Table 2")]
        assert [x.split()[2] for x in t2] == outside
        for x, sp in zip(t2, [s for s in row["splits"] if s["split"] in outside]):
            assert ("over the queue's" in x) == (sp["cp_over_sq"] > 1 + graphi.LOSS_NOTE)
        for q in (doubled, halved):
            q.close()
    finally:
        p0.close()
        p.close()


def test_scan_rows_are_fitted_at_their_least_disturbed_sample():
    from hwtune.planner.machine import _least_disturbed
    assert _least_disturbed({"median_s": 3e-4, "samples": [3e-4, 2.5e-4, 9e-4]}) == 2.5e-4
    assert _least_disturbed({"median_s": 3e-4, "samples": []}) == 3e-4
    assert _least_disturbed({"median_s": 3e-4, "samples": None}) == 3e-4


def test_calibration_figures_come_from_the_fastest_sample():
    from types import SimpleNamespace
    from hwtune.planner.calibrate import fastest
    assert fastest(SimpleNamespace(samples=[3e-5, 2e-5, 9e-5], median=3e-5)) == 2e-5
    assert fastest(SimpleNamespace(samples=[], median=3e-5)) == 3e-5


def test_validation_rows_show_the_error_against_the_fastest_sample_too():
    from hwtune.report.plan_views import validation_table
    fresh = {"scheduler": "corun", "executors": 1, "threads": 2, "predicted_s": 4e-4,
             "measured_s": 8e-4, "mad_s": 1e-4, "rel_error": -0.5, "status": "ok",
             "samples": [8e-4, 5e-4, 9e-4]}
    stored = dict(fresh, samples=None, samples_json="[8e-4, 5e-4, 9e-4]")
    unmeasured = dict(fresh, measured_s=None, rel_error=None, samples=[], status="error")
    header, rows = validation_table([fresh, stored, unmeasured])
    col = dict(zip(header, zip(*rows)))
    assert col["fastest"][:2] == ("500.0 us", "500.0 us") and col["fastest"][2] == "-"
    assert col["vs fastest"] == ("-20.0%", "-20.0%", "-")
    assert col["error"][0] == "-50.0%"


# -- data another core touched last (the transfer term) ------------------------------

LAT, RATE = 2e-6, 1e9  # 256 B of 64 floats: 0.256 us at 1 GB/s


def test_a_tensor_read_on_another_core_costs_latency_plus_bytes_over_rate():
    """2x1 critical path: b and c run side by side on the two executors,
    so the one on a's other core pulls a (256 B) and d pulls whichever of b
    and c ran on its other core; x, an input, is held everywhere."""
    from hwtune.native.simulate import Transfer
    g = _chain_and_fan()
    sec = np.array([[1e-3, 6e-4], [2e-3, 1.2e-3], [3e-3, 1.8e-3], [1e-3, 6e-4]])
    cost = {op.name: s for op, s in zip(g.ops, sec[:, 0])}
    one_xfer = LAT + 256 / RATE
    with Simulator(g) as sim:
        base, _ = sim.run(executors=2, threads=1, scheduler="critical-path", seconds=sec,
                          op_cost=cost)
        got, ev = sim.run(executors=2, threads=1, scheduler="critical-path", seconds=sec,
                          op_cost=cost, transfer=Transfer(LAT, RATE), events=True)
        by = {e.op: e for e in ev}
        own = dict(zip((op.name for op in g.ops), sec[:, 0]))
        for name, ins in (("a", ()), ("b", ("a",)), ("c", ("a",)), ("d", ("b", "c"))):
            remote = sum(by[i].executor != by[name].executor for i in ins)
            assert by[name].end_s - by[name].start_s == pytest.approx(
                own[name] + remote * one_xfer, abs=1e-12), name
        # c (3 ms, the critical path) runs on the other core than a, and d
        # pulls b: two transfers on the path
        assert by["c"].executor != by["a"].executor
        assert got == pytest.approx(base + 2 * one_xfer, abs=1e-12)
        # one core: every tensor stays where it was written
        seq, _ = sim.run(executors=1, threads=1, scheduler="sequential", seconds=sec)
        seq_x, _ = sim.run(executors=1, threads=1, scheduler="sequential", seconds=sec,
                           transfer=Transfer(LAT, RATE))
        assert seq_x == seq


def test_a_team_op_pulls_only_the_slices_its_cores_do_not_hold():
    """1x2 sequential, a and d on two threads, b and c on one (core 0):
    b pulls a's half core 1 wrote (128 B), c finds a whole on core 0 (b's
    read brought it there), d's core 1 pulls its half of b and of c."""
    from hwtune.native.simulate import Transfer
    g = _chain_and_fan()
    sec = np.array([[1e-3, 6e-4], [2e-3, 1.2e-3], [3e-3, 1.8e-3], [1e-3, 6e-4]])
    threads = {"a": 2, "b": 1, "c": 1, "d": 2}
    with Simulator(g) as sim:
        base, _ = sim.run(executors=1, threads=2, scheduler="sequential", seconds=sec,
                          op_threads=threads)
        got, ev = sim.run(executors=1, threads=2, scheduler="sequential", seconds=sec,
                          op_threads=threads, transfer=Transfer(LAT, RATE), events=True)
    half = LAT + 128 / RATE
    dur = {e.op: e.end_s - e.start_s for e in ev}
    assert dur["b"] == pytest.approx(sec[1, 0] + half, abs=1e-12)
    assert dur["c"] == pytest.approx(sec[2, 0], abs=1e-12)
    assert dur["d"] == pytest.approx(sec[3, 1] + 2 * half, abs=1e-12)
    assert got == pytest.approx(base + 3 * half, abs=1e-12)


def test_a_corun_group_op_is_completed_by_its_part_0_worker():
    """corun 1x2, a on two workers, then b and d on one: a's part 1 pulls
    half of a's input y from worker 0, which wrote it, so it ends last;
    worker 0 (part 0) still completes a and goes on with b, so the chain
    stays on one core from run to run (sched_corun.c)."""
    from hwtune.native.simulate import Transfer
    g = _adds("corun-home", [("y", ["x", "x"]), ("a", ["y", "x"]), ("b", ["a", "x"]),
                             ("d", ["b", "x"])])
    sec = np.array([[1e-3, 6e-4], [2e-3, 1e-3], [1e-3, 6e-4], [1e-3, 6e-4]])
    threads = {"y": 1, "a": 2, "b": 1, "d": 1}
    with Simulator(g) as sim:
        _, ev = sim.run(executors=1, threads=2, scheduler="corun", seconds=sec,
                        op_threads=threads, op_cost={n: 1e-3 for n in threads},
                        transfer=Transfer(LAT, RATE), events=True)
    by = {e.op: e for e in ev}
    assert by["a"].threads == 2 and by["a"].executor == by["y"].executor
    # a ends with part 1, one transfer after part 0's own 1 ms
    assert by["a"].end_s - by["a"].start_s == pytest.approx(sec[1, 1] + LAT + 128 / RATE,
                                                            abs=1e-12)
    assert by["b"].executor == by["d"].executor == by["a"].executor
    assert by["b"].start_s == pytest.approx(by["a"].end_s, abs=1e-6)


def test_transfer_figures_must_not_be_negative():
    from hwtune.native.simulate import Transfer
    with Simulator(_chain_and_fan()) as sim:
        with pytest.raises(UsageError, match="transfer and wake figures must be >= 0"):
            sim.run(executors=2, threads=1, scheduler="critical-path", seconds=np.ones((4, 1)),
                    transfer=Transfer(-1e-6, RATE))


def _lone_tail():
    """a -> b and a -> c -> d -> e: b is done early, and its executor idles
    beside the chain c, d, e."""
    return _adds("sim-wake", [("a", ["x", "x"]), ("b", ["a", "x"]), ("c", ["a", "x"]),
                              ("d", ["c", "x"]), ("e", ["d", "b"])])


WAKE = 2e-5


@pytest.mark.parametrize("scheduler", ["critical-path", "shared-queue", "corun"])
def test_a_run_ends_when_its_parked_workers_have_woken(scheduler):
    """b (1 us) ends long before the chain (3 ms): its executor parks after
    park_s of polling, and the run's end waits for its wake-up; with a
    longer polling budget than its idle stretch, or a one-executor run,
    nothing is added."""
    g = _lone_tail()
    sec = np.repeat([[1e-4], [1e-6], [1e-3], [1e-3], [1e-3]], 2, axis=1)  # corun: 2 columns
    cost = {op.name: s for op, s in zip(g.ops, sec[:, 0])}
    with Simulator(g) as sim:
        def run(n, **o):
            ms, _ = sim.run(executors=n, threads=1, scheduler=scheduler, seconds=sec,
                            op_cost=cost, overheads=Overheads(**o))
            return ms
        base = run(2)
        got = run(2, park_s=1e-4, wake_s=WAKE)
        if scheduler == "shared-queue":  # it places nothing: only the end pays
            assert got == pytest.approx(base + WAKE, abs=1e-12)
        else:  # the end, and every op of the chain placed on a parked executor
            wakes = (got - base) / WAKE
            assert wakes >= 1 - 1e-9 and wakes == pytest.approx(round(wakes), abs=1e-6)
        assert run(2, park_s=1.0, wake_s=WAKE) == pytest.approx(base, abs=1e-12)
        assert run(2, park_s=1e-4, wake_s=0.0) == pytest.approx(base, abs=1e-12)
        assert run(1, park_s=0.0, wake_s=WAKE) == pytest.approx(run(1), abs=1e-12)


def _late_branch():
    """x -> a (3 ms) and x -> b (1 us); c needs a, d needs a: when a ends,
    c and d are ready at once, and one of them goes to the executor that
    idled since b."""
    return _adds("sim-late", [("a", ["x", "x"]), ("b", ["x", "x"]), ("c", ["a", "x"]),
                              ("d", ["a", "b"]), ("e", ["c", "d"])])


@pytest.mark.parametrize("scheduler", ["critical-path", "corun"])
def test_an_op_placed_on_a_parked_executor_starts_after_its_wake_up(scheduler):
    g = _late_branch()
    sec = np.repeat([[3e-3], [1e-6], [1e-3], [1e-3], [1e-4]], 2, axis=1)  # corun: 2 columns
    cost = {op.name: s for op, s in zip(g.ops, sec[:, 0])}
    with Simulator(g) as sim:
        _, plain = sim.run(executors=2, threads=1, scheduler=scheduler, seconds=sec,
                           op_cost=cost, events=True)
        _, woken = sim.run(executors=2, threads=1, scheduler=scheduler, seconds=sec,
                           op_cost=cost, overheads=Overheads(park_s=1e-4, wake_s=WAKE),
                           events=True)
    p, w = {e.op: e for e in plain}, {e.op: e for e in woken}
    # c and d start side by side when a ends: the one handed to the other
    # executor (parked since b) starts WAKE later
    handed = [o for o in ("c", "d") if p[o].executor != p["a"].executor]
    kept = [o for o in ("c", "d") if p[o].executor == p["a"].executor]
    assert len(handed) == 1 and len(kept) == 1
    assert w[handed[0]].start_s == pytest.approx(p[handed[0]].start_s + WAKE, abs=1e-12)
    assert w[kept[0]].start_s == pytest.approx(p[kept[0]].start_s, abs=1e-12)


def test_the_shared_queue_places_nothing_so_only_its_end_pays():
    """The shared queue's idle masters race for the FIFO: whichever runs
    first takes the op, so a hand-off pays no wake-up in the simulation
    (the end still does)."""
    g = _late_branch()
    sec = np.array([[3e-3], [1e-6], [1e-3], [1e-3], [1e-4]])
    with Simulator(g) as sim:
        _, plain = sim.run(executors=2, threads=1, scheduler="shared-queue", seconds=sec,
                           events=True)
        _, woken = sim.run(executors=2, threads=1, scheduler="shared-queue", seconds=sec,
                           overheads=Overheads(park_s=0.0, wake_s=WAKE), events=True)
    assert {e.op: e.start_s for e in plain} == pytest.approx({e.op: e.start_s for e in woken})


def test_wake_figures_must_not_be_negative():
    with Simulator(_chain_and_fan()) as sim:
        with pytest.raises(UsageError, match="wake figures must be >= 0"):
            sim.run(executors=2, threads=1, scheduler="critical-path", seconds=np.ones((4, 1)),
                    overheads=Overheads(park_s=1e-4, wake_s=-1e-6))


def test_a_calibration_keeps_its_wake_figures_and_gives_them_per_scheduler():
    from hwtune.planner.calibrate import PARKS_AT_ONCE, Calibration
    cal = Calibration(spin_s=5e-5, wake_s=1.2e-5, run_s={"critical-path": {1: 1e-6}})
    back = Calibration.from_json(cal.to_json())
    assert back.figures()["spin_s"] == 5e-5 and back.figures()["wake_s"] == 1.2e-5
    cp = back.overheads_for("critical-path", 2)
    assert (cp.park_s, cp.wake_s) == (5e-5, 1.2e-5)
    assert "shared-queue" in PARKS_AT_ONCE
    sq = back.overheads_for("shared-queue", 2)
    assert (sq.park_s, sq.wake_s) == (0.0, 1.2e-5)
    # another machine's engine costs: the wake-up scales with them
    far = back.overheads_for("critical-path", 2, scale=0.5)
    assert (far.park_s, far.wake_s) == (5e-5, pytest.approx(0.6e-5))


def test_the_transfer_fit_recovers_latency_and_rate():
    from hwtune.planner.calibrate import XFER_BYTES, fit_transfer
    sizes = np.array(XFER_BYTES, dtype=float)
    lat, rate = fit_transfer(sizes, 1.6e-7 + sizes / 19.5e9)
    assert lat == pytest.approx(1.6e-7) and rate == pytest.approx(19.5e9)
    # extras that do not grow with the size: a latency only
    assert fit_transfer(sizes, np.full(len(sizes), 3e-7)) == (pytest.approx(3e-7), 0.0)


def test_a_calibration_keeps_its_transfer_figures():
    from hwtune.planner.calibrate import Calibration
    cal = Calibration(xfer_s=1.6e-7, xfer_bps=19.5e9)
    back = Calibration.from_json(cal.to_json())
    assert back.transfer().latency_s == 1.6e-7 and back.transfer().bytes_per_s == 19.5e9
    assert back.figures()["xfer_bps"] == 19.5e9


def test_the_one_thread_profile_is_taken_warm_and_over_a_span(monkeypatch):
    """A profile taken right after the engine opened (2 warm-up runs, 5
    profiled: 7 ms of a small LSTM) came out 1.5x the runs it was to predict:
    profile_1t warms up for PROFILE_WARMUP_S of plain runs first and keeps
    profiling while its runs span less than PROFILE_SPAN_S (a graph of a few
    microseconds reaches PROFILE_MAX_RUNS), split over PROFILE_ENGINES
    engines opened one after another (a model's speed can be drawn once per
    engine)."""
    from hwtune.engine import trace as engine_trace
    from hwtune.engine import instance as native_engine
    from hwtune.planner import calibrate
    b = Builder("tiny")
    t = b.input("x", (4, 8))
    t = b.op("s", "sigmoid", [t])
    b.output(b.op("r", "relu", [t]))
    g = b.build()
    plain, profiled = [0], [0]
    real_run, real_profiled = native_engine.NativeEngine.run, engine_trace.profiled_runs

    def run(self, *a, **k):
        if not k.get("profile"):
            plain[0] += 1
        return real_run(self, *a, **k)

    def counted(engine, graph, runs, warmup=0):
        profiled[0] += runs
        return real_profiled(engine, graph, runs, warmup)
    opened, real_init = [], native_engine.NativeEngine.__init__

    def init(self, *a, **k):
        assert plain[0] == 0 or profiled[0] > 0  # one engine after another
        opened.append(len(opened))
        return real_init(self, *a, **k)
    monkeypatch.setattr(native_engine.NativeEngine, "run", run)
    monkeypatch.setattr(native_engine.NativeEngine, "__init__", init)
    monkeypatch.setattr(engine_trace, "profiled_runs", counted)
    took = __import__("time").perf_counter()
    out = calibrate.profile_1t(g)
    took = __import__("time").perf_counter() - took
    assert set(out) and all(v > 0 for v in out.values())
    assert took >= calibrate.PROFILE_WARMUP_S
    assert plain[0] > 2  # warm-up by time, not by a count
    per = calibrate.PROFILE_MAX_RUNS // calibrate.PROFILE_ENGINES
    assert profiled[0] == calibrate.PROFILE_ENGINES * per
    # on PROFILE_ENGINES engines, each warmed before its share of the runs
    assert opened == list(range(calibrate.PROFILE_ENGINES))
    assert took >= calibrate.PROFILE_ENGINES * calibrate.PROFILE_WARMUP_S


def test_a_schedulers_own_order_scales_its_ops_one_thread_times():
    """Predictor.order: per scheduler, per op, its 1-thread time in that
    scheduler's order over the sequential order's; its configurations are
    simulated from those times, the others' from the sequential ones."""
    rows = sched.schedulers()
    p = predictor("pathnet_small")
    try:
        base = {name: p.simulate(rows[name], 1, 1)[0] for name in ("sequential", "shared-queue")}
        p.order = {"shared-queue": np.full(len(p.ops), 1.5)}
        p._tables.clear()
        assert p.simulate(rows["sequential"], 1, 1)[0] == pytest.approx(base["sequential"])
        slow = predictor("pathnet_small")
        try:
            slow.t1 = 1.5 * slow.t1
            for n, k in ((1, 1), (1, 2), (2, 1)):
                assert p.simulate(rows["shared-queue"], n, k)[0] == pytest.approx(
                    slow.simulate(rows["shared-queue"], n, k)[0])
        finally:
            slow.close()
        assert p.simulate(rows["shared-queue"], 1, 1)[0] > 1.2 * base["shared-queue"]
        assert np.array_equal(p.t1_for("shared-queue"), 1.5 * p.t1)
        assert p.t1_for("corun") is p.t1 and p.t1_for(None) is p.t1
    finally:
        p.close()


def test_an_orders_factor_is_its_median_ratio_to_the_sequential_engine_of_each_round():
    """order_factors pairs each round's engines: a machine that runs every
    order 1.45x slow for some rounds moves no factor; an order whose op b
    runs 1.5x in every round gets b's factor and the run's, and a stays 1;
    rounds that disagree on the side (3 above, 2 below), or agree but
    scatter more than the factor stands out of them, give all ones."""
    from collections import namedtuple
    from hwtune.planner.calibrate import order_factors
    Ev = namedtuple("Ev", "op_name start_s end_s")

    def engine(state, b=1.0, runs=3, gap=0.0):
        return [[Ev("a", 0.0, 1e-3 * state),
                 Ev("b", 1e-3 * state + gap, 1e-3 * state + gap
                    + 2e-3 * state * b * (1 + 0.01 * r))] for r in range(runs)]
    states = [1.0, 1.45, 1.45, 1.0, 1.45]
    seq = [engine(s) for s in states]
    same = order_factors(seq, [engine(s * 1.01 ** (i % 2)) for i, s in enumerate(states)],
                         ["a", "b"])
    assert np.allclose(same, 1.0)  # 2 rounds slower by 1%, 3 level: no side
    # the order's b is slow in every round, whichever state the round drew
    other = [engine(s, b=1.5) for s in states]
    got = order_factors(seq, other, ["a", "b", "folded"])
    run = (1 + 2 * 1.5) / 3
    assert got[2] == pytest.approx(1.0 * got[0])  # an op no round has keeps the shared scale
    assert (1e-3 * got[0] + 2.01e-3 * got[1]) / 3.01e-3 == pytest.approx(run, rel=0.03)
    assert got[1] / got[0] == pytest.approx(1.5, rel=0.02)
    split = [engine(s * (1.1 if i < 3 else 0.9)) for i, s in enumerate(states)]
    assert np.array_equal(order_factors(seq, split, ["a", "b"]), np.ones(2))
    # every round above, but by 1-20% at random: within its own spread
    scatter = [engine(s * r) for s, r in zip(states, (1.20, 1.01, 1.06, 1.15, 1.02))]
    assert np.array_equal(order_factors(seq, scatter, ["a", "b"]), np.ones(2))
    tight = [engine(s * r) for s, r in zip(states, (1.05, 1.06, 1.05, 1.07, 1.06))]
    assert (1e-3 * order_factors(seq, tight, ["a", "b"]) @ [1.0, 2.01]) / 3.01e-3 == \
        pytest.approx(1.06, rel=0.01)
    assert np.array_equal(order_factors([], [], ["a"]), np.ones(1))
    # the scheduler's own work between the ops counts: the same ops with
    # 0.3 ms between them in every round make a run 1.1x the sequential one
    gaps = order_factors(seq, [engine(s, gap=0.3e-3 * s) for s in states], ["a", "b"])
    assert gaps[0] == pytest.approx(gaps[1], rel=0.02)
    assert (1e-3 * gaps[0] + 2.01e-3 * gaps[1]) / 3.01e-3 == pytest.approx(1.1, rel=0.01)


def test_order_scales_profile_each_out_of_order_scheduler_against_sequential(monkeypatch):
    """calibrate.order_scales profiles the sequential order and each
    scheduler that does not run it, interleaved on fresh engines; a
    scheduler that orders by levels gets its op costs; every op has a
    finite positive ratio."""
    from hwtune.engine import instance as native_engine
    from hwtune.planner import calibrate
    from hwtune.planner.opdata import op_data
    monkeypatch.setattr(calibrate, "PROFILE_WARMUP_S", 0.002)
    monkeypatch.setattr(calibrate, "PROFILE_SPAN_S", 0.003)
    b = Builder("diamond")
    x = b.input("x", (8, 64))
    a = b.op("a", "sigmoid", [x])
    c = b.op("c", "tanh", [x])
    b.output(b.op("s", "add", [a, c]))
    g = b.build()
    ops = op_data(g)
    rows = list(sched.schedulers().values())
    opened, real_init = [], native_engine.NativeEngine.__init__

    def init(self, graph, *a, **k):
        opened.append((k.get("scheduler"), k.get("op_cost") is not None))
        return real_init(self, graph, *a, **k)
    monkeypatch.setattr(native_engine.NativeEngine, "__init__", init)
    out = calibrate.order_scales(g, ops, rows, lambda row: np.ones(len(g.ops)))
    others = [r for r in rows if not r.in_order]
    assert set(out) == {r.name for r in others} and others
    for v in out.values():
        assert v.shape == (len(ops),) and np.all(np.isfinite(v)) and np.all(v > 0)
    one_round = [("sequential", False)] + [(r.name, r.needs_costs) for r in others]
    assert opened == [one_round[(i + j) % len(one_round)] for i in range(calibrate.ORDER_ROUNDS)
                      for j in range(len(one_round))]  # rotated round by round
    assert calibrate.order_scales(g, ops, [r for r in rows if r.in_order], None) == {}


def test_probed_figures_feed_the_fits_and_the_fork_join():
    """beside.BesideProbes: the medians of the probed scaling rows replace
    the stored scan's times, so a GEMM that scaled 1.25x on 2 threads while
    the validation ran (not the scan's 1.96x) predicts a slower 1x2; the
    fork-join of a run is the larger of the pool's and the chain's."""
    from hwtune import machine as machine_info
    from hwtune.native import sched
    from hwtune.planner import inputs
    from hwtune.planner.beside import BesideProbes
    from hwtune.planner.machine import HostFigures
    from plan_fixture import CALIBRATION
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0,
                       dram={1: 20.0, 2: 30.0}, l2={1: 90.0, 2: 180.0},
                       gemm=[{"M": 64, "K": 512, "N": 512, "threads": t, "time_s": s,
                              "inner": 1} for t, s in ((1, 9.0e-4), (2, 4.6e-4))])
    probes = BesideProbes(figs, 2)
    try:
        probes.gemm = {(64, 512, 512, 1): [9.0e-4, 9.1e-4, 8.9e-4],
                       (64, 512, 512, 2): [7.2e-4, 7.3e-4, 4.6e-4]}
        probes.fj_pool = {2: [2e-7, 3e-7, 2e-7]}
        probes.fj_chain = {2: [1.5e-6, 1.2e-6, 9e-7]}
        probes.probes = 3
        got = probes.figures()
        assert [r["time_s"] for r in got.gemm] == [9.0e-4, 7.2e-4]
        assert figs.gemm[1]["time_s"] == 4.6e-4  # the stored scan is not changed
        cal = probes.calibration(CALIBRATION)
        assert cal.forkjoin == {2: 1.2e-6} and cal.forkjoin_pool == {2: 2e-7}
        assert cal.overheads == CALIBRATION.overheads
        assert (cal.xfer_s, cal.xfer_bps) == (CALIBRATION.xfer_s, CALIBRATION.xfer_bps)
        # transfers probed at every size: fitted as latency + bytes / rate
        from hwtune.planner.calibrate import XFER_BYTES
        probes.xfer = {b: [1e-7 + b / 2e10, 5e-8 + b / 2e10, 9e-7 + b / 2e10]
                       for b in XFER_BYTES}
        moved = probes.calibration(CALIBRATION)
        assert moved.xfer_s == pytest.approx(1e-7, rel=1e-6)
        assert moved.xfer_bps == pytest.approx(2e10, rel=1e-6)
    finally:
        probes.close()
    from hwtune.graph import load_model
    from hwtune.planner.opdata import op_data
    from hwtune.sources import bundled_models
    fp = machine_info.fingerprint()
    g = load_model(str(bundled_models()["lstm_small"]))
    ops = op_data(g)
    t1 = np.array([d.flops / 20e9 + 1e-6 for d in ops])
    row = sched.schedulers()["sequential"]
    lat = {}
    for name, (f, c) in {"stored": (figs, CALIBRATION), "probed": (got, cal)}.items():
        p, _ = inputs.assemble(fp, f, c, g, ops, t1)
        try:
            lat[name] = (p.simulate(row, 1, 1)[0], p.simulate(row, 1, 2)[0])
        finally:
            p.close()
    assert lat["probed"][0] == pytest.approx(lat["stored"][0], rel=1e-9)
    assert lat["probed"][1] > 1.2 * lat["stored"][1]


def test_probes_are_at_least_min_gap_apart(monkeypatch):
    """A validation of a sub-millisecond model has thousands of chunks: a
    probe before each would take most of its time, so a probe within
    MIN_GAP_S of the last one is skipped."""
    from hwtune.planner import beside
    from hwtune.planner.machine import HostFigures
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0,
                       gemm=[{"M": 8, "K": 16, "N": 16, "threads": 1, "time_s": 1e-6}])
    probes = beside.BesideProbes(figs, 1)
    try:
        monkeypatch.setattr(beside, "MIN_GAP_S", 60.0)
        probes.take()
        probes.take()
        assert probes.probes == 1 and len(probes.gemm[(8, 16, 16, 1)]) == 1
        monkeypatch.setattr(beside, "MIN_GAP_S", 0.0)
        probes.take()
        assert probes.probes == 2 and len(probes.gemm[(8, 16, 16, 1)]) == 2
        # the gap counts from the last probe's end: a probe longer than the
        # gap is not followed by another at once
        import time
        from hwtune.native import bench
        real = bench.gemm_samples

        def slow(*a, **k):
            time.sleep(0.3)
            return real(*a, **k)
        monkeypatch.setattr(bench, "gemm_samples", slow)
        probes.take()
        monkeypatch.setattr(beside, "MIN_GAP_S", 0.2)
        probes.take()
        assert probes.probes == 3
    finally:
        probes.close()


def test_a_probe_ramps_up_the_team_and_warms_each_row_before_timing_it(monkeypatch):
    """A probe times each row's calls only after PROBE_WARM_S of untimed
    ones (by the stored row's time, at least PROBE_WARMUP) and, for the
    rows on more than one thread, after PROBE_RAMP_S of work on that many
    threads: the 1-thread rows first, then the ramp, then the 2-thread rows.
    Each probe adds one figure per row: its PROBE_CALLS calls' median."""
    import os
    from hwtune.native import bench
    from hwtune.planner import beside
    from hwtune.planner.machine import HostFigures
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    rows = [{"M": 8, "K": 16, "N": 16, "threads": t, "time_s": 1e-4} for t in (2, 1)]
    rows.append({"M": 4, "K": 64, "N": 64, "threads": 2, "time_s": 1e-3})
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0, gemm=rows)
    calls = []
    real = bench.gemm_samples

    def spy(pool, t, M, K, N, **kw):
        calls.append((t, M, kw.get("warmup"), kw.get("reps")))
        return real(pool, t, M, K, N, **kw)
    monkeypatch.setattr(bench, "gemm_samples", spy)
    monkeypatch.setattr(beside, "MIN_GAP_S", 0.0)
    probes = beside.BesideProbes(figs, 2)
    try:
        probes.take()
        probes.take()
    finally:
        probes.close()
    warm_small = max(beside.PROBE_WARMUP, int(np.ceil(beside.PROBE_WARM_S / 1e-4)))
    assert warm_small == 20
    first = (1, 8, warm_small, beside.PROBE_CALLS)
    starts = [i for i, c in enumerate(calls) if c == first]
    assert starts[0] == 0 and len(starts) == 2
    for one in (calls[:starts[1]], calls[starts[1]:]):
        timed = [c for c in one if c[3] == beside.PROBE_CALLS]
        assert timed == [first, (2, 8, warm_small, beside.PROBE_CALLS),
                         (2, 4, beside.PROBE_WARMUP, beside.PROBE_CALLS)]
        ramp = one[1:one.index(timed[1])]
        assert ramp and all(c == (2, 8, 0, 1) for c in ramp)
    for key in ((8, 16, 16, 1), (8, 16, 16, 2), (4, 64, 64, 2)):
        assert len(probes.gemm[key]) == 2


def test_in_cache_traffic_runs_at_the_measured_triad_curve():
    """In-cache bytes move at the in-L2 triad measured for that many busy
    cores (this VM's 2-thread triad ran 1.23-1.74x the 1-thread one, not
    2x); linear between measured counts, per core past the last; without a
    curve (a TOML description), n times one core's rate."""
    from dataclasses import replace
    from hwtune.planner.machine import per_core_curve
    assert per_core_curve({1: 10.0, 4: 30.0}, 6) == pytest.approx(
        (0.0, 10.0, 10 + 20 / 3, 10 + 40 / 3, 30.0, 37.5, 45.0))
    assert per_core_curve({}, 4) == ()
    m = replace(machine("ryzen-9-5950x"), l3_gbs=())  # the L3 level at the in-L2 rate
    assert m.l2_gbs == () and m.l2_bw(3) == pytest.approx(3 * m.l2_gbs_core * GB)
    curved = replace(m, l2_gbs=per_core_curve({1: m.l2_gbs_core, 2: 1.3 * m.l2_gbs_core},
                                               m.cores))
    assert curved.l2_bw(1) == pytest.approx(m.l2_gbs_core * GB)
    assert curved.l2_bw(2) == pytest.approx(1.3 * m.l2_gbs_core * GB)
    # an op that is all in-cache traffic: 1.3x on 2 threads, not 2x
    t1 = 1e-5  # 10 us of traffic on one core, in the last-level cache
    nb = [m.l2_gbs_core * GB * t1]
    assert nb[0] <= m.llc_bytes
    t = costmodel.CostModel(curved, curved, {}).table([t1], nb, ["add"], 2).seconds
    flat = costmodel.CostModel(m, m, {}).table([t1], nb, ["add"], 2).seconds
    assert t[0, 0] == pytest.approx(flat[0, 0])
    assert t[0, 1] - curved.forkjoin(2) == pytest.approx(t1 / 1.3, rel=1e-6)
    assert flat[0, 1] - m.forkjoin(2) == pytest.approx(t1 / 2, rel=1e-6)


def test_bytes_live_in_l2_l3_or_memory_and_move_at_that_levels_triad():
    """One core's L2, the last-level cache, or memory by size; an op past the
    last-level cache that moved its bytes faster than one core's memory
    bandwidth lives in the last-level cache; last-level traffic moves at the
    in-L3 triad curve, at the in-L2 one where none was measured."""
    from dataclasses import replace
    m = replace(machine("ryzen-9-5950x"), l3_gbs=())
    l2, llc = m.l2_bytes, m.llc_bytes
    nb = [l2, l2 + 1, llc, llc + 1, llc + 1]
    assert list(costmodel.levels(m, nb)) == [costmodel.L2, costmodel.L3, costmodel.L3,
                                             costmodel.DRAM, costmodel.DRAM]
    dram1 = m.dram_bw(1)
    fast, slow = (llc + 1) / (1.5 * dram1), (llc + 1) / (0.9 * dram1)
    got = costmodel.levels(m, nb, [1.0, 1.0, 1.0, fast, slow], dram1)
    assert list(got[3:]) == [costmodel.L3, costmodel.DRAM]
    assert m.l3_gbs == () and m.l3_bw(2) == m.l2_bw(2)
    l3 = replace(m, l3_gbs=(0.0, 0.5 * m.l2_gbs_core, 0.9 * m.l2_gbs_core))
    assert l3.l3_bw(2) == pytest.approx(0.9 * m.l2_gbs_core * GB)
    assert l3.l3_bw(4) == pytest.approx(1.8 * m.l2_gbs_core * GB)   # per core past the curve
    t1 = 1e-3
    nbytes = [4 * l2, l2 // 2]   # in L3; in L2
    tab = costmodel.CostModel(l3, l3, {}).table([t1, t1], nbytes, ["add", "add"], 2)
    mem1_l3 = nbytes[0] / l3.l3_bw(1)
    assert costmodel.split_here(l3, [t1], [nbytes[0]])[1][0] == pytest.approx(mem1_l3)
    c1 = t1 - mem1_l3
    assert tab.seconds[0, 1] == pytest.approx(c1 / 2 + nbytes[0] / l3.l3_bw(2) + l3.forkjoin(2))
    mem1_l2 = nbytes[1] / l3.l2_bw(1)
    assert tab.seconds[1, 1] == pytest.approx((t1 - mem1_l2) / 2 + nbytes[1] / l3.l2_bw(2)
                                              + l3.forkjoin(2))
    assert list(tab.mem_frac[:, 1]) == [0.0, 0.0]   # neither is out of cache
    # past the last-level cache but moved at 1.5x one core's memory rate
    big = llc + (1 << 20)
    tab = costmodel.CostModel(l3, l3, {}).table([big / (1.5 * dram1)], [big], ["add"], 2)
    assert tab.mem_frac[0, 1] == 0.0


def test_probed_triads_replace_the_scans_bandwidths():
    from hwtune.planner.beside import BesideProbes
    from hwtune.planner.machine import HostFigures
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0,
                       dram={1: 20.0, 2: 30.0}, l2={1: 77.0, 2: 134.0},
                       l3={1: 60.0, 2: 110.0},
                       triads=[{"where": "l2", "threads": 2, "n": 43690},
                               {"where": "l3", "threads": 1, "n": 699050},
                               {"where": "dram", "threads": 1, "n": 1 << 20}])
    probes = BesideProbes(figs, 2)
    try:
        probes.triad = {("l2", 2, 43690): [100.0, 95.0, 130.0],
                        ("l3", 1, 699050): [50.0, 55.0, 58.0],
                        ("dram", 1, 1 << 20): [19.0, 21.0, 18.0]}
        got = probes.figures()
        assert got.l2 == {1: 77.0, 2: 100.0} and got.dram == {1: 19.0, 2: 30.0}
        assert got.l3 == {1: 55.0, 2: 110.0}
        assert figs.l2[2] == 134.0  # the stored scan is not changed
        assert probes.summary()["triad l2 n=43690 2t (GB/s)"] == (95.0, 100.0, 130.0)
    finally:
        probes.close()


def test_a_gemv_in_the_last_level_cache_moves_at_the_scans_gemv_rate_not_the_triads():
    """The scan's largest GEMV shape living in the last-level cache gives this
    host's read-stream curve (bytes per call over its time); GEMV ops there
    move their bytes at it, every other op at the in-L3 triad's; the GEMV's
    own 2-thread point is then predicted from it, whatever the triad did."""
    from dataclasses import replace
    from hwtune.planner.machine import HostFigures, host_machine, read_stream
    from hwtune.planner.opdata import GEMV_FAMILY
    fp = {"usable_cpus": 2, "caches": {"L2": {"size_bytes": 512 << 10, "groups": None},
                                       "L3": {"size_bytes": 32 << 20, "groups": None}}}
    gemv = (1, 1024, 4096)
    nb = 4 * (1024 + 1024 * 4096 + 4096)
    rows = [{"M": 1, "K": 256, "N": 1024, "threads": 1, "time_s": 16e-6},   # 1 MiB: smaller
            {"M": 1, "K": 256, "N": 1024, "threads": 2, "time_s": 22e-6},
            {"M": gemv[0], "K": gemv[1], "N": gemv[2], "threads": 1, "time_s": 400e-6},
            {"M": gemv[0], "K": gemv[1], "N": gemv[2], "threads": 2, "time_s": 220e-6},
            {"M": 64, "K": 512, "N": 512, "threads": 1, "time_s": 400e-6}]      # not a GEMV
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0, dram={1: 20.0, 2: 30.0},
                       l2={1: 100.0, 2: 180.0}, l3={1: 55.0, 2: 66.0}, gemm=rows)
    got = read_stream(figs, 512 << 10, 32 << 20)
    assert got == {1: pytest.approx(nb / 400e-6 / GB), 2: pytest.approx(nb / 220e-6 / GB)}
    assert read_stream(figs, 512 << 10, 8 << 20) == {1: pytest.approx(4 * 263424 / 16e-6 / GB),
                                                     2: pytest.approx(4 * 263424 / 22e-6 / GB)}
    assert read_stream(figs, 512 << 10, 512 << 10) == {}  # none lives in that LLC
    host = host_machine(fp, figs, {2: 2e-6})
    assert host.l3_read_bw(2) == pytest.approx(nb / 220e-6)
    assert host.l3_read_bw(4) == pytest.approx(2 * nb / 220e-6)  # per core past the curve
    assert host.l3_bw(2) == pytest.approx(66.0 * GB)
    assert replace(host, l3_read_gbs=()).l3_read_bw(2) == host.l3_bw(2)  # a description
    t1 = 1.25 * max(nb / host.l3_read_bw(1), nb / host.l3_bw(1))   # both in the LLC
    tab = costmodel.CostModel(host, host, {}).table([t1, t1], [nb, nb], [GEMV_FAMILY, "add"], 2)
    for i, bw in ((0, host.l3_read_bw), (1, host.l3_bw)):
        c1 = t1 - nb / bw(1)
        assert tab.seconds[i, 1] == pytest.approx(c1 / 2 + nb / bw(2) + 2e-6)
    # the scan's GEMV point is predicted at its own time and pool fork-join
    fits = costmodel.fit_serial(host, costmodel.scan_points(figs), {2: 2e-6})
    f = fits[costmodel.gemv_fit_key(nb)]
    assert f.median_rel_err == pytest.approx(2e-6 / 220e-6, rel=1e-3) and not f.at_edge


def test_gemv_max_m_is_the_kernels():
    """The planner's GEMV_MAX_M is the GEMM kernel's HWT_GEMV_MAX_M."""
    import pathlib
    import re
    from hwtune.planner.opdata import GEMV_MAX_M
    header = pathlib.Path(__file__).resolve().parents[1] / "kernels/gemm/gemm_internal.h"
    m = re.search(r"#define HWT_GEMV_MAX_M (\d+)", header.read_text())
    assert m and int(m.group(1)) == GEMV_MAX_M


def _scan_gemm(*rows):
    """A scan's figures holding only GEMM scaling rows: ((M, K, N), threads,
    seconds) each."""
    from hwtune.planner.machine import HostFigures
    return HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0,
                       gemm=[{"M": M, "K": K, "N": N, "threads": t, "time_s": s}
                             for (M, K, N), t, s in rows])


def test_matmuls_on_the_gemv_path_take_its_own_fit():
    """A matmul of at most GEMV_MAX_M rows of op(a) is fitted as GEMV_FAMILY:
    the scan's GEMV shape gives those points, a model's batch-1 step takes
    that fit, and without GEMV points it takes the GEMM's."""
    from hwtune.planner.opdata import GEMV_FAMILY, GEMV_MAX_M, op_data
    b = Builder("gemv-or-not")
    w = b.param("w", [256, 1024])
    x1 = b.input("x1", [1, 256])
    xt = b.input("xt", [256, GEMV_MAX_M])
    x64 = b.input("x64", [64, 256])
    y1 = b.op("one_row", "matmul", [x1, w])
    yt = b.op("transposed", "matmul", [xt, w], transpose_a=True)
    y64 = b.op("many_rows", "matmul", [x64, w])
    b.op("not_a_matmul", "add", [y1, y1])
    b.output(yt, y64, "not_a_matmul")
    ops = {d.name: d for d in op_data(b.build())}
    assert ops["one_row"].fit_type == GEMV_FAMILY and ops["one_row"].type == "matmul"
    assert ops["transposed"].fit_type == GEMV_FAMILY
    assert ops["many_rows"].fit_type == "matmul" and ops["not_a_matmul"].fit_type == "add"

    figs = _scan_gemm(((64, 512, 512), 1, 9e-4), ((64, 512, 512), 2, 4.6e-4),
                      ((1, 256, 1024), 1, 4.3e-5), ((1, 256, 1024), 2, 3.6e-5))
    kinds = {(p.op_type, p.t1) for p in costmodel.scan_points(figs)}
    gemv_bytes = 4 * (256 + 256 * 1024 + 1024)
    assert kinds == {("matmul", 9e-4), (costmodel.gemm_fit_key(2.0 * 64 * 512 * 512), 9e-4),
                     (costmodel.gemv_fit_key(gemv_bytes), 4.3e-5)}

    host = machine("ryzen-9-5950x")
    fits = {"matmul": costmodel.SerialFit("matmul", 0.05, 1, 0, 0, "given"),
            GEMV_FAMILY: costmodel.SerialFit(GEMV_FAMILY, 0.6, 1, 0, 0, "given")}
    t1, nb = [2e-3], [1 << 16]
    own = costmodel.CostModel(host, host, fits).table(t1, nb, [GEMV_FAMILY], 2).seconds
    gemm = costmodel.CostModel(host, host, fits).table(t1, nb, ["matmul"], 2).seconds
    assert own[0, 1] > 1.3 * gemm[0, 1]
    del fits[GEMV_FAMILY]
    fallback = costmodel.CostModel(host, host, fits).table(t1, nb, [GEMV_FAMILY], 2).seconds
    held = 0.05 * (nb[0] / host.l2_bw(1) - nb[0] / host.l2_bw(2))  # a GEMV's serial traffic
    assert fallback[0, 1] == pytest.approx(gemm[0, 1] + held)


def test_a_gemv_op_takes_the_fit_of_the_scan_shape_nearest_its_size():
    """Each scan GEMV shape is fitted under its own size key; an op on the
    GEMV path takes the fit of the shape nearest its bytes (log scale), one
    the op profiles fitted as GEMV_FAMILY itself before any, and a model's
    GEMV of a size between two shapes the nearer one's."""
    from hwtune.planner.opdata import GEMV_FAMILY
    small, large = 4 * (256 + 256 * 1024 + 1024), 4 * (1024 + 1024 * 4096 + 4096)
    key = costmodel.gemv_fit_key
    assert costmodel.gemv_fit_bytes(key(large)) == pytest.approx(large, rel=1e-3)
    assert costmodel.gemv_fit_bytes(GEMV_FAMILY) is None
    assert costmodel.gemv_fit_bytes("matmul") is None
    assert costmodel.gemv_fit_bytes(GEMV_FAMILY + " x MiB") is None
    # a scan where the small GEMV does not scale on two threads and the
    # large one does: fitted apart, they disagree
    figs = _scan_gemm(((1, 256, 1024), 1, 25e-6), ((1, 256, 1024), 2, 25e-6),
                      ((1, 1024, 4096), 1, 5e-4), ((1, 1024, 4096), 2, 2.6e-4))
    host = machine("ryzen-9-5950x")
    fits = costmodel.fit_serial(host, costmodel.scan_points(figs))
    assert fits[key(small)].serial_fraction > fits[key(large)].serial_fraction + 0.3
    cm = costmodel.CostModel(host, host, fits)
    assert cm.serial_fraction(GEMV_FAMILY, None, large * 1.5) == fits[key(large)].serial_fraction
    assert cm.serial_fraction(GEMV_FAMILY, None, small / 2) == fits[key(small)].serial_fraction
    # 3 MiB is nearer 1 MiB than 16 MiB on a log scale, 5 MiB nearer 16
    assert cm.serial_fraction(GEMV_FAMILY, None, 3 << 20) == fits[key(small)].serial_fraction
    assert cm.serial_fraction(GEMV_FAMILY, None, 5 << 20) == fits[key(large)].serial_fraction
    assert cm.serial_fraction(GEMV_FAMILY) == fits[key(small)].serial_fraction
    t = cm.table([5e-4, 5e-4], [small, large], [GEMV_FAMILY, GEMV_FAMILY], 2).seconds
    assert t[1, 1] < 0.8 * t[0, 1]
    own = costmodel.SerialFit(GEMV_FAMILY, 0.25, 3, 0, 0, "op profiles")
    cm = costmodel.CostModel(host, host, {**fits, GEMV_FAMILY: own})
    assert cm.serial_fraction(GEMV_FAMILY, None, large) == 0.25


def test_a_matmul_and_a_conv_take_the_fit_of_the_scan_gemm_nearest_their_flops():
    """Each blocked scan GEMM shape is fitted under its own FLOPs key as
    well as under the pooled "matmul": a matmul takes the fit of the shape
    nearest its FLOPs (log scale), and so does a compute-like type without
    a fit of its own (conv2d); a "matmul" fit from op profiles serves every
    size; with one shape nothing changes."""
    small, large = 2.0 * 64 * 512 * 512, 2.0 * 64 * 512 * 2048
    key = costmodel.gemm_fit_key
    assert costmodel.gemm_fit_flops(key(large)) == pytest.approx(large, rel=1e-3)
    assert costmodel.gemm_fit_flops("matmul") is None
    assert costmodel.gemm_fit_flops(costmodel.gemv_fit_key(1 << 20)) is None
    assert costmodel.gemm_fit_flops("matmul x MFLOP") is None
    # the small shape gains 1.5x on two threads, the large one 1.9x
    figs = _scan_gemm(((64, 512, 512), 1, 3.9e-4), ((64, 512, 512), 2, 2.6e-4),
                      ((64, 512, 2048), 1, 1.8e-3), ((64, 512, 2048), 2, 9.6e-4))
    host = machine("ryzen-9-5950x")
    fits = costmodel.fit_serial(host, costmodel.scan_points(figs))
    s_small, s_large = fits[key(small)].serial_fraction, fits[key(large)].serial_fraction
    assert s_small > s_large + 0.15
    assert s_large <= fits["matmul"].serial_fraction <= s_small
    cm = costmodel.CostModel(host, host, fits)
    assert cm.serial_fraction("matmul", None, None, large * 4) == s_large
    assert cm.serial_fraction("matmul", None, None, small / 4) == s_small
    # 60 MFLOP is nearer 33.6 than 134 on a log scale, 70 nearer 134
    assert cm.serial_fraction("matmul", None, None, 60e6) == s_small
    assert cm.serial_fraction("matmul", None, None, 70e6) == s_large
    assert cm.serial_fraction("matmul") == fits["matmul"].serial_fraction
    assert cm.serial_fraction("conv2d", 9.0, 1 << 20, 2e8) == s_large
    # memory-like types take the element-wise ops' fit (none in this scan)
    assert s_large > 0 and cm.serial_fraction("pool2d", 0.2, 1 << 20, 2e8) == 0.0
    t = cm.table([1e-3, 1e-3], [1 << 20, 1 << 20], ["matmul", "matmul"], 2,
                 flops=[small, large]).seconds
    assert t[1, 1] < 0.9 * t[0, 1]
    own = costmodel.SerialFit("matmul", 0.25, 3, 0, 0, "scan gemm + op profiles")
    cm = costmodel.CostModel(host, host, {**fits, "matmul": own})
    assert cm.serial_fraction("matmul", None, None, large) == 0.25
    assert cm.serial_fraction("conv2d", 9.0, 1 << 20, large) == 0.25
    one = costmodel.fit_serial(host, costmodel.scan_points(
        _scan_gemm(((64, 512, 512), 1, 3.9e-4), ((64, 512, 512), 2, 2.6e-4))))
    cm = costmodel.CostModel(host, host, one)
    assert cm.serial_fraction("matmul", None, None, large) == one["matmul"].serial_fraction


def test_the_models_one_thread_profile_is_taken_beside_too(monkeypatch):
    """Given the graph, every probe also profiles it on one thread, on an
    engine opened for the probe (a profile of one moment put a model's 1x1
    20-25% off in a validation, one of one engine 38-56%):
    one_thread() gives every op that runs its time over all probes, and
    t1_array falls back to the first profile for an op it lacks."""
    from hwtune.engine.runner import workload_keys
    from hwtune.planner import beside, inputs
    from hwtune.planner.machine import HostFigures
    from hwtune.planner.opdata import op_data
    b = Builder("beside-profile")
    w = b.param("w", [64, 128])
    x = b.input("x", [3, 64])
    y = b.op("mm", "matmul", [x, w])
    b.op("act", "relu", [y])
    b.output("act")
    g = b.build()
    figs = HostFigures(run_id=1, isa="avx2", peak_gflops_core=40.0)
    monkeypatch.setattr(beside, "MIN_GAP_S", 0.0)
    monkeypatch.setattr(beside, "PROFILE_WARM_S", 0.01)
    from hwtune.engine import instance as native_engine
    opened, closed = [], []
    real_init, real_close = native_engine.NativeEngine.__init__, native_engine.NativeEngine.close

    def init(self, *a, **k):
        opened.append(self)
        return real_init(self, *a, **k)

    def close(self):
        closed.append(self)
        return real_close(self)
    monkeypatch.setattr(native_engine.NativeEngine, "__init__", init)
    monkeypatch.setattr(native_engine.NativeEngine, "close", close)
    probes = beside.BesideProbes(figs, 1, graph=g)
    try:
        probes.take()
        assert len(opened) == 1 and closed == opened  # closed before the samples
        probes.take()
        assert probes.probes == 2 and len(probes.profiled) >= 2
        # each probe profiles on an engine of its own, as each chunk of
        # samples runs on one opened for it
        assert len(opened) == 2 and opened[0] is not opened[1] and closed == opened
        t1w = probes.one_thread()
        assert set(t1w) == set(workload_keys(g)) and all(s > 0 for s in t1w.values())
        lo, med, hi = probes.summary()["model run, 1 thread (op total)"]
        assert 0 < lo <= med <= hi
        assert sum(t1w.values()) == pytest.approx(med, rel=1e-9)  # one op per workload
    finally:
        probes.close()
    # once a profile took PROFILE_LONG_S, a probe profiles only while the
    # profiles took at most PROFILE_SHARE of the time since the first
    # probe: at 0, none after the long one does
    monkeypatch.setattr(beside, "PROFILE_SHARE", 0.0)
    capped = beside.BesideProbes(figs, 1, graph=g)
    try:
        capped.take()
        capped.take()
        runs = len(capped.profiled)
        assert runs >= 2  # no profile was long yet
        monkeypatch.setattr(beside, "PROFILE_LONG_S", 0.0)
        capped.take()
        runs = len(capped.profiled)
        capped.take()
        capped.take()
        assert capped.probes == 5 and len(capped.profiled) == runs
    finally:
        capped.close()
    bare = beside.BesideProbes(figs, 1)
    try:
        assert bare.one_thread() == {}
    finally:
        bare.close()
    ops = op_data(g)
    first = np.array([1.0, 2.0])
    got = inputs.t1_array(ops, {ops[1].workload: 5.0}, first)
    assert list(got) == [1.0, 5.0]


def test_validation_samples_start_after_ten_ms_of_untimed_runs():
    """An engine's first milliseconds run slow (validate.REWARM_S): a
    sub-millisecond model gets untimed runs for REWARM_S before its
    samples, a slow one the one untimed run."""
    from hwtune.planner import validate
    assert validate.rewarm_runs(0.2e-3) * 0.2e-3 >= validate.REWARM_S
    assert validate.rewarm_runs(0.2e-3) == 50
    assert validate.rewarm_runs(0.5) == validate.REWARM == 1
    assert validate.rewarm_runs(0.004) == 3



def test_a_paired_ratio_is_the_median_of_each_rounds_ratio_to_the_1x1_of_that_round():
    """The machine's drift between rounds cancels: a configuration whose
    chunks ran 1.2x the 1x1's of the same round in every round gets 1.2
    whatever each round's state, where the medians over all samples mix the
    states differently."""
    from hwtune.planner import validate
    assert validate.chunk_medians([1, 2, 3, 10, 20], [3, 0, 2]) == [2.0, None, 15.0]
    state = [1.0, 2.0, 1.0, 3.0, 1.0]  # each round's slowdown
    base = validate.Row("sequential", 1, 1, predicted_s=1.0e-3, status="ok",
                        samples=[s * 1e-3 for s in state for _ in range(2)], chunks=[2] * 5)
    team = validate.Row("sequential", 1, 2, predicted_s=0.9e-3, status="ok",
                        samples=[s * 1.2e-3 for s in state for _ in range(2)], chunks=[2] * 5)
    short = validate.Row("corun", 2, 1, predicted_s=1.0e-3, status="ok",
                         samples=[1e-3, 1e-3], chunks=[1, 1])
    failed = validate.Row("critical-path", 1, 2, predicted_s=1.0e-3, status="error")
    # a round without samples keeps the others in their rounds
    gap = validate.Row("shared-queue", 2, 1, predicted_s=1.0e-3, status="ok",
                       samples=[s * 1.5e-3 for i, s in enumerate(state) if i != 1 for _ in "ab"],
                       chunks=[2, 0, 2, 2, 2])
    validate.paired_ratios([team, base, short, failed, gap])
    assert gap.paired_ratio == pytest.approx(1.5)
    assert base.paired_ratio == pytest.approx(1.0) and base.paired_error == pytest.approx(0.0)
    assert team.paired_ratio == pytest.approx(1.2)
    assert team.paired_error == pytest.approx(0.9 / 1.2 - 1.0)
    assert short.paired_ratio is None and failed.paired_ratio is None  # < 3 rounds; no samples
    s = validate.paired_summary([r.to_json() for r in (base, team, short)])
    assert s["configs"] == 1 and s["max_abs_error"] == pytest.approx(0.25)
    # no 1x1 row: nothing is paired
    lone = validate.Row("sequential", 1, 2, predicted_s=1e-3, status="ok", samples=[1e-3] * 3,
                        chunks=[1, 1, 1])
    validate.paired_ratios([lone])
    assert lone.paired_ratio is None


def test_a_fit_stopped_at_an_edge_gives_way_to_its_family_past_this_hosts_cores():
    """A ReLU fitted at serial fraction 1.0 that still misses its 2-thread
    point measured no serial fraction: on this host's thread counts it keeps
    the fit, past them the pooled element-wise fit scales it. A fit inside
    (0, 1), or at an edge that explains its points, is kept at every count."""
    import dataclasses
    from plan_fixture import machine
    host = dataclasses.replace(machine("ryzen-9-5950x"), cores=2)
    fit = costmodel.SerialFit
    fits = {"relu": fit("relu", 1.0, 1, 0.046, 0.046, "scan eltwise"),
            "tanh": fit("tanh", 1.0, 1, 0.001, 0.001, "scan eltwise"),
            "sigmoid": fit("sigmoid", 0.3, 1, 0.05, 0.05, "scan eltwise"),
            costmodel.ELTWISE_FAMILY: fit(costmodel.ELTWISE_FAMILY, 0.02, 5, 0.01, 0.09,
                                          "scan eltwise")}
    assert fits["relu"].at_edge and not fits["tanh"].at_edge and not fits["sigmoid"].at_edge
    cm = costmodel.CostModel(host, machine("epyc-7763"), fits)
    # compute-bound 1-thread times (1 ms over 4 KiB) so that s rules
    tab = cm.table([1e-3] * 3, [4096] * 3, ["relu", "tanh", "sigmoid"], 8,
                   flops=[1e3] * 3).seconds
    fj = np.array([cm.target.forkjoin(t) for t in range(1, 9)])
    compute = tab - fj[None, :]
    relu, tanh, sig = compute / compute[:, :1]
    assert relu[1] == pytest.approx(1.0, rel=0.02)            # 2 threads: its fit
    assert relu[7] == pytest.approx(0.02 + 0.98 / 8, rel=0.05)  # 8: the family's
    assert tanh[7] == pytest.approx(1.0, rel=0.02)            # explained edge: kept
    assert sig[7] == pytest.approx(0.3 + 0.7 / 8, rel=0.05)   # inside (0, 1): kept
