"""`hwtune plan --validate --from-cores K` (inputs taken on K CPUs into a
scratch database, predicted at all of the host's), the prediction ranges
from stored validations (planner/intervals.py), and the cost model's
per-part checks (planner/partcheck.py), on small inputs."""

import os

import numpy as np
import pytest

from hwtune import machine
from hwtune.db import ResultsDB
from hwtune.errors import UsageError
from hwtune.native import sched
from hwtune.native.threads import allowed_cpus
from hwtune.planner import fromcores, intervals, partcheck
from hwtune.sources import load_any

from plan_fixture import CALIBRATION, predictor
from test_plan_cli import SMALL, _seed

TWO = len(os.sched_getaffinity(0)) >= 2


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_restricted_runs_the_process_and_its_pools_on_k_cpus_then_restores():
    before = os.sched_getaffinity(0)
    cpus = fromcores.pick(1)
    with fromcores.restricted(cpus) as mask:
        assert mask == cpus and os.sched_getaffinity(0) == set(cpus)
        assert allowed_cpus() == cpus  # the engine's pools place threads among these
        assert machine.fingerprint()["usable_cpus"] == 1
    assert os.sched_getaffinity(0) == before
    with pytest.raises(UsageError, match="invalid --from-cores 0"):
        fromcores.pick(0)
    with pytest.raises(UsageError, match=f"invalid --from-cores {len(before) + 1}"):
        fromcores.pick(len(before) + 1)


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_inputs_on_one_cpu_go_to_a_scratch_database_and_predict_all_cores(tmp_path,
                                                                          monkeypatch):
    """The scan and the calibration are given (seeded as a 1-CPU host would
    store them; measured for real, they take minutes under load); the
    model's 1-thread profiles and order factors are measured, under the
    mask. The user's database gets nothing; the Predictor describes this
    host's CPU with all its cores."""
    import hwtune.planner.inputs as inputs_mod
    import hwtune.scan.runner as runner
    user = _seed(tmp_path / "user.db")
    with ResultsDB.open(user) as db:
        runs_before = len(db.runs(db.upsert_host(machine.fingerprint()), "scan"))
    seen = {}

    def fake_scan(db, opts, **kw):
        seen["cpus"] = sorted(os.sched_getaffinity(0))
        seen["quick"] = opts.quick
        _seed_into(db)

    def fake_calibrate(cores, progress=None):
        seen["cores"] = cores
        return CALIBRATION

    monkeypatch.setattr(runner, "run_scan", fake_scan)
    monkeypatch.setattr(inputs_mod, "calibrate", fake_calibrate)
    graph, _ = load_any(SMALL, None, None)
    keep = tmp_path / "k1.db"
    p, fits, info = fromcores.inputs_on(1, graph, "h", list(sched.schedulers().values()),
                                        host_cores=2, keep=str(keep))
    try:
        assert seen == {"cpus": fromcores.pick(1), "quick": True, "cores": 1}
        assert info["from_cores"] == 1 and info["host_cores"] == 2
        assert p.host.cores == 1 and p.target.cores == 2
        assert p.t1.sum() > 0  # profiled under the mask
        latency, _ = p.simulate(sched.schedulers()["sequential"], 1, 2)
        assert latency > 0
    finally:
        p.close()
    assert os.sched_getaffinity(0) == set(range(os.cpu_count())) or len(
        os.sched_getaffinity(0)) >= 2
    with ResultsDB.open(user) as db:  # the user's database: untouched
        assert len(db.runs(db.upsert_host(machine.fingerprint()), "scan")) == runs_before
    assert keep.exists()


def _seed_into(db):
    """The seeded scan of test_plan_cli, for the host db sees now (1 CPU)."""
    from hwtune.native.isa import selected_isa
    hk = db.upsert_host(machine.fingerprint())
    run = db.start_run(hk, "scan", {})
    isa = selected_isa()

    def m(bench, op, value, unit, median=None, params=None):
        db.add_measurement(run, bench=bench, op=op, params=params or {}, kernel_variant=isa,
                           threads=1, samples=[median] if median else [1.0], median_s=median,
                           mad_s=0.0, rel_spread=0.0, value=value, unit=unit)
    m("fma_peak", "fma", 100.0, "GFLOPS")
    m("triad", "triad", 22.0, "GB/s", params={"where": "dram", "n": 1 << 24})
    m("triad", "triad", 96.0, "GB/s", params={"where": "l2", "n": 1 << 15})
    m("gemm", "gemm", 70.0, "GFLOPS", median=4.5e-4, params={"M": 64, "K": 512, "N": 512})
    m("eltwise", "mul", 7.0, "GFLOPS", median=4.3e-6, params={"n": 32768})
    db.finish_run(run, "complete")


def test_family_ranges_mix_by_the_models_shares():
    p = predictor()
    try:
        shares = intervals.family_shares(p.ops, p.t1)
    finally:
        p.close()
    assert sum(shares.values()) == pytest.approx(1.0)
    records = [{"model": "a", "shares": {intervals.GEMM: 0.9, intervals.MEMORY: 0.1},
                "errors": [-0.05, 0.10]},
               {"model": "b", "shares": {intervals.GEMM: 0.3, intervals.MEMORY: 0.7},
                "errors": [0.2, -0.3]}]
    ranges = intervals.family_ranges(records)
    assert ranges[intervals.GEMM] == {"lo": -0.3, "hi": 0.2, "models": ["a", "b"]}
    assert ranges[intervals.MEMORY] == {"lo": -0.3, "hi": 0.2, "models": ["b"]}
    assert intervals.GEMV not in ranges
    iv = intervals.interval({intervals.GEMM: 0.5, intervals.MEMORY: 0.3, intervals.GEMV: 0.2},
                            ranges)
    assert iv["missing"] == [intervals.GEMV]
    assert iv["lo"] == pytest.approx(-0.3) and iv["hi"] == pytest.approx(0.2)
    lo, hi = intervals.latency_range(1.0, iv)
    assert lo == pytest.approx(1 / 1.2) and hi == pytest.approx(1 / 0.7)
    none = intervals.interval({intervals.GEMV: 1.0}, ranges)
    assert none["lo"] is None and intervals.latency_range(1.0, none) is None


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_the_best_table_shows_each_prediction_with_its_range(fmt):
    from hwtune.report import export
    from plan_fixture import plan_doc
    doc = plan_doc()
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "no validation" in text  # an older document: no intervals at all
    for r in doc["cores"]:
        r["best"]["interval_s"] = [0.5e-3, 0.75e-3]
    doc["intervals"] = {"shares": {intervals.GEMM: 0.6, intervals.MEMORY: 0.4},
                        "ranges": {intervals.GEMM: {"lo": -0.1, "hi": 0.2, "models": ["m"]}},
                        "error_lo": -0.1, "error_hi": 0.2, "missing": [intervals.MEMORY],
                        "records": [{"model": "m", "run_id": 3, "configs": 11,
                                     "from_cores": 1}]}
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "500.0-750.0 us" in text
    assert "inputs on 1 CPUs for some" in text and "GEMM-like -10.0% .. +20.0% (m)" in text
    assert "ranges leave out memory-bound" in text


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_every_cost_model_part_is_checked_on_its_own_micro_benchmark(tmp_path, monkeypatch):
    monkeypatch.setattr(partcheck, "REPS", 3)
    monkeypatch.setattr(partcheck, "WARMUP", 1)
    monkeypatch.setattr(partcheck, "COMPUTE_GEMM", (32, 128, 128))
    monkeypatch.setattr(partcheck, "MEMORY_N", {"dram": 1 << 20, "l2": 4096})
    monkeypatch.setattr(partcheck, "SERIAL_GEMMS", ((1, 128, 256), (64, 128, 128)))
    path = _seed(tmp_path / "p.db")
    with ResultsDB.open(path) as db:
        fp = machine.fingerprint()
        checks = partcheck.run_all(db, db.upsert_host(fp), fp)
    parts = {c.part for c in checks}
    from hwtune.native.isa import supported_isas
    assert parts >= {"memory", "forkjoin", "serial"}
    assert ("compute" in parts) == (len(supported_isas()) > 1)
    for c in checks:
        assert c.predicted_s > 0 and c.measured_s > 0 and np.isfinite(c.error)
        assert c.to_json()["error"] == pytest.approx((c.predicted_s - c.measured_s)
                                                     / c.measured_s)
    s = partcheck.summary(checks)
    assert s["memory"]["checks"] == 2 * len(os.sched_getaffinity(0))
    assert s["serial"]["checks"] == 3 * (len(os.sched_getaffinity(0)) - 1)  # 2 GEMMs + mul


def test_compute_check_scales_the_compute_part_by_the_peaks(monkeypatch):
    """compute at the per-core peak: the other ISA's time is predicted as
    the selected ISA's compute part times peak(selected) / peak(other) plus
    the same memory part."""
    from hwtune.native.threads import Pool
    from plan_fixture import machine as described
    monkeypatch.setattr(partcheck, "REPS", 3)
    monkeypatch.setattr(partcheck, "WARMUP", 1)
    monkeypatch.setattr(partcheck, "COMPUTE_GEMM", (32, 128, 128))
    times = {"fast": 1e-3, "slow": 3e-3}
    import hwtune.native.bench as bench
    monkeypatch.setattr(bench, "gemm_samples",
                        lambda pool, t, M, K, N, isa=None, **kw: np.full(3, times[isa]))
    host = described("ryzen-9-5950x")
    pool = Pool(executors=1, threads=1)
    try:
        (c,) = partcheck.check_compute(pool, host, ["fast", "slow"], "fast",
                                       {"fast": 100.0, "slow": 25.0}.get)
    finally:
        pool.close()
    from hwtune.planner import costmodel
    from hwtune.planner.machine import gemm_bytes
    c1, m1 = costmodel.split_here(host, np.array([1e-3]), np.array([gemm_bytes(32, 128, 128)]))
    assert c.predicted_s == pytest.approx(float(c1[0]) * 4 + float(m1[0]))
    assert c.measured_s == 3e-3 and c.bench == "gemm 32x128x128 fast -> slow"


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_validate_from_one_core_predicts_at_all_cores_and_records_it(tmp_path, monkeypatch):
    """The command's path: inputs on 1 CPU (scan and calibration given, as
    above), every configuration of both CPUs predicted from them; the
    measuring itself is replaced by a stand-in that records what it was
    given and measures each configuration at 1.1x its prediction."""
    import json
    import hwtune.planner.inputs as inputs_mod
    import hwtune.planner.validate as validate_mod
    import hwtune.scan.runner as runner
    from click.testing import CliRunner
    from hwtune.cli.main import cli
    monkeypatch.setattr(runner, "run_scan", lambda db, opts, **kw: _seed_into(db))
    monkeypatch.setattr(inputs_mod, "calibrate", lambda cores, progress=None: CALIBRATION)
    given = {}

    def measured(p, rows, cores, **kw):
        given.update(host=p.host.cores, target=p.target.cores, cores=cores,
                     beside=kw.get("beside"), mask=len(os.sched_getaffinity(0)))
        out = []
        for row, n, k in validate_mod.configs(rows, cores):
            pred, _ = p.simulate(row, n, k)
            out.append(validate_mod.Row(row.name, n, k, pred, measured_s=1.1 * pred))
        return out
    monkeypatch.setattr(validate_mod, "validate", measured)
    user = _seed(tmp_path / "u.db")
    r = CliRunner().invoke(cli, ["plan", SMALL, "--db", user, "--validate", "--from-cores", "1",
                                 "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    n = len(os.sched_getaffinity(0))
    assert given == {"host": 1, "target": n, "cores": n, "beside": None, "mask": n}
    assert doc["from_cores"]["from_cores"] == 1 and doc["from_cores"]["host_cores"] == n
    assert doc["machine"]["cores"] == n and doc["fits"] == []  # no 2-thread point seen
    rows = doc["validation"]["rows"]
    assert max(x["executors"] * x["threads"] for x in rows) == n
    assert all(x["rel_error"] == pytest.approx(1 / 1.1 - 1) for x in rows)
    # the plan afterwards takes its range from this validation, named as such
    again = CliRunner().invoke(cli, ["plan", SMALL, "--db", user, "--cores", "4", "--json"])
    assert again.exit_code == 0, again.output
    ivs = json.loads(again.stdout)["intervals"]
    assert ivs["records"][0]["from_cores"] == 1
    assert ivs["error_lo"] == pytest.approx(1 / 1.1 - 1)


def test_a_from_cores_document_names_what_its_inputs_did_not_measure():
    from hwtune.report import export
    from plan_fixture import validation_doc
    doc = validation_doc()
    doc["from_cores"] = {"from_cores": 1, "cpus": [0], "host_cores": 2, "inputs_db": None,
                         "host_key": "h", "isa": "avx2"}
    doc["fits"] = []
    doc["machine"]["forkjoin_s"] = [0.0, 0.0, 3e-8]
    doc["calibration"] = dict(doc["calibration"], xfer_s=0.0, wake_s=0.0)
    text = " ".join(export.render("plan", doc, "markdown").split())
    assert "taken on 1 of this host's 2 CPUs (CPU 0)" in text
    assert "unmeasured: no multi-thread point in the inputs" in text
    assert "fork-join not measured: 0.03 us at 2 threads" in text
    assert "no core-to-core transfer or wake-up term" in text
    assert "a 2-executor run's own cost taken as one executor's" in text
    doc.pop("from_cores")
    assert "unmeasured" not in export.render("plan", doc, "markdown")


def _one_core(p):
    """p's inputs as a 1-CPU host would store them: its host with one core
    (no fork-join), no fits, a calibration with no 2-thread figure; the
    target unchanged."""
    from dataclasses import replace
    from hwtune.planner import costmodel
    from hwtune.planner.calibrate import Calibration
    host1 = replace(p.host, cores=1, forkjoin_s=(0.0, 0.0), dram_gbs=p.host.dram_gbs[:2])
    cal1 = Calibration(overheads={s: dict(o, dispatch_s=0.0)
                                  for s, o in CALIBRATION.overheads.items()},
                       run_s={s: {1: r[1]} for s, r in CALIBRATION.run_s.items()},
                       add_s=CALIBRATION.add_s)
    return replace(p, model=costmodel.CostModel(host1, p.target, {}), calibration=cal1,
                   host=host1)


def test_attribution_fills_in_one_part_at_a_time_from_the_hosts_own_inputs():
    """--from-cores's diagnostic: each row predicted again with the
    inter-core figures, the bandwidth curves or the serial fractions of the
    host's own all-CPU inputs, one at a time; only the part filled in
    changes."""
    from dataclasses import replace
    from hwtune.planner import attribute
    from plan_fixture import FITS
    base = predictor()
    p = _one_core(base)
    host_all = replace(base.host, forkjoin_s=(0.0, 0.0, 5e-6),
                       dram_gbs=tuple(g / 4 for g in base.host.dram_gbs))
    cal = attribute.inter_core(p.calibration, CALIBRATION)
    assert cal.forkjoin == CALIBRATION.forkjoin and cal.xfer_s == CALIBRATION.xfer_s
    assert cal.run_s["corun"] == {1: CALIBRATION.run_s["corun"][1],
                                  2: CALIBRATION.run_s["corun"][2]}
    assert cal.overheads["corun"]["dispatch_s"] == CALIBRATION.overheads["corun"]["dispatch_s"]
    assert cal.overheads["corun"]["section_s"] == p.calibration.overheads["corun"]["section_s"]
    v = attribute.variants(p, host_all, FITS, CALIBRATION)
    rows = [{"scheduler": s, "executors": n, "threads": k, "measured_s": 1e-3}
            for s, n, k in (("sequential", 1, 1), ("sequential", 1, 2),
                            ("critical-path", 2, 1))]
    try:
        assert v["inter-core"].target.forkjoin(2) == 5e-6
        assert v["inter-core"].target.dram_gbs == p.target.dram_gbs
        assert v["bandwidth"].target.dram_gbs == host_all.dram_gbs
        assert v["bandwidth"].target.forkjoin_s == p.target.forkjoin_s
        assert v["serial"].model.fits == FITS and p.model.fits == {}
        both = v["all three"]
        assert both.target.forkjoin(2) == 5e-6 and both.target.dram_gbs == host_all.dram_gbs
        assert both.model.fits == FITS and both.calibration.xfer_s == CALIBRATION.xfer_s
        attribute.predict_rows(v, rows, list(sched.schedulers().values()))
        one = {r["threads"]: p.simulate(sched.schedulers()["sequential"], 1, r["threads"])[0]
               for r in rows[:2]}
    finally:
        for x in v.values():
            x.close()
        p.close()
        base.close()
    seq1, seq2 = rows[0]["predicted_with"], rows[1]["predicted_with"]
    assert seq1["inter-core"] == pytest.approx(one[1])  # one thread: nothing crosses
    assert seq2["inter-core"] > one[2] + 100 * 4e-6  # 5 us a fork-join, on every op
    assert seq2["serial"] > one[2]  # fractions of 0.1-0.2 instead of 0
    assert seq2["all three"] > seq2["inter-core"]
    s = attribute.summary(rows)
    assert set(s) == set(attribute.PARTS) and all(x["configs"] == 3 for x in s.values())


def test_a_from_cores_document_says_which_part_a_miss_comes_from():
    from hwtune.report import export
    from plan_fixture import validation_doc
    doc = validation_doc()
    doc["validation"]["attribution"] = {
        "source": "scan run 7 and the stored plan calibration",
        "parts": {"inter-core": {"configs": 2, "median_abs_error": 0.05, "max_abs_error": 0.1},
                  "bandwidth": {"configs": 2, "median_abs_error": 0.4, "max_abs_error": 0.6},
                  "serial": {"configs": 0, "median_abs_error": None, "max_abs_error": None},
                  "all three": {"configs": 2, "median_abs_error": 0.03, "max_abs_error": 0.05}}}
    text = " ".join(export.render("plan", doc, "markdown").split())
    assert "one part from this host's own inputs on all its CPUs (scan run 7" in text
    assert "inter-core: median |error| 5.0%, worst 10.0%; bandwidth: median" in text
    assert "all three: median |error| 3.0%, worst 5.0%" in text
    doc["validation"]["attribution"] = {"source": None, "note": "no stored scan"}
    text = " ".join(export.render("plan", doc, "markdown").split())
    assert "which part a miss comes from: not shown (no stored scan)" in text


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_parts_from_one_core_predict_every_thread_count_from_the_one_cpu_inputs(tmp_path,
                                                                                 monkeypatch):
    """bench_plan.py parts --from-cores 1: the scan and the calibration are
    taken under a 1-CPU mask (seeded here, as a 1-CPU host stores them),
    and every part is predicted at 2+ threads from them, not from the
    user's stored all-CPU inputs: the fork-join check charges the scaled
    host's extrapolated region (inputs.FORKJOIN_LINE_S), not the user's
    calibration."""
    import hwtune.planner.inputs as inputs_mod
    import hwtune.scan.runner as runner
    from hwtune.planner.calibrate import Calibration
    monkeypatch.setattr(partcheck, "REPS", 3)
    monkeypatch.setattr(partcheck, "WARMUP", 1)
    monkeypatch.setattr(partcheck, "COMPUTE_GEMM", (32, 128, 128))
    monkeypatch.setattr(partcheck, "MEMORY_N", {"dram": 1 << 20, "l2": 4096})
    monkeypatch.setattr(partcheck, "SERIAL_GEMMS", ((1, 128, 256), (64, 128, 128)))
    seen = {}

    def fake_scan(db, opts, **kw):
        seen["cpus"] = sorted(os.sched_getaffinity(0))
        _seed_into(db)

    def fake_calibrate(cores, progress=None):
        seen["cores"] = cores
        return Calibration(overheads=CALIBRATION.overheads,
                           run_s={s: {1: r[1]} for s, r in CALIBRATION.run_s.items()})
    monkeypatch.setattr(runner, "run_scan", fake_scan)
    monkeypatch.setattr(inputs_mod, "calibrate", fake_calibrate)
    path = _seed(tmp_path / "p.db")  # the user's: a 2-CPU calibration would be CALIBRATION's
    with ResultsDB.open(path) as db:
        fp = machine.fingerprint()
        checks = partcheck.run_all(db, db.upsert_host(fp), fp, from_cores=1)
    assert seen == {"cpus": fromcores.pick(1), "cores": 1}
    n = len(os.sched_getaffinity(0))
    fj = [c for c in checks if c.part == "forkjoin"]
    assert [c.threads for c in fj] == list(range(2, n + 1))
    # the 1-CPU host has no region at all; the scaled host's starts at two
    # line transfers and adds one per thread (not the user's 0.2 us region)
    one = [c for c in checks if c.part == "memory" and c.threads == 1]
    assert one and all(c.predicted_s > 0 for c in one)
    for c in fj:
        assert c.predicted_s < 1e-6 + inputs_mod.FORKJOIN_LINE_S * c.threads
        assert c.predicted_s != pytest.approx(CALIBRATION.forkjoin_pool[2], rel=0.01)
    serial = [c for c in checks if c.part == "serial"]
    assert serial and all("s=0.000" in c.bench for c in serial)  # no 2-thread point: s = 0


def test_a_one_core_host_scaled_starts_its_region_at_two_line_transfers():
    """The pool's 2-thread region moves the fork's word to the worker and
    the worker's done word back; each further thread adds one line. A host
    measured on 2+ cores extends its own measured region instead."""
    from dataclasses import replace
    from hwtune.planner import inputs as inputs_mod
    from plan_fixture import machine as described
    line = inputs_mod.FORKJOIN_LINE_S
    one = replace(described("ryzen-9-5950x"), cores=1, forkjoin_s=(0.0, 0.0))
    big = inputs_mod.scaled_host(one, 4)
    assert big.forkjoin(1) == 0.0
    assert big.forkjoin(2) == pytest.approx(2 * line)
    assert big.forkjoin(4) == pytest.approx(4 * line)
    two = replace(one, cores=2, forkjoin_s=(0.0, 0.0, 3e-7))
    assert inputs_mod.scaled_host(two, 4).forkjoin(3) == pytest.approx(3e-7 + line)


def test_per_op_type_check_sums_the_predictions_parts_beside_the_measured_times():
    """bench_plan.py ops: per op type, the ops' measured times on 1 and t
    threads summed beside the cost model's parts at t threads (they add up
    to the prediction, which is the table's column at t)."""
    from hwtune.planner import opcheck
    p = predictor()
    try:
        measured = {1: {d.name: 2e-6 for d in p.ops}, 2: {d.name: 1e-6 for d in p.ops[1:]}}
        rows = opcheck.by_type(p, measured, 2)
        tab = p.table(2)
    finally:
        p.close()
    assert sum(r.ops for r in rows) == len(p.ops) - 1  # the unmeasured op left out
    all_ = opcheck.total(rows)
    assert all_.measured_s == pytest.approx(1e-6 * (len(p.ops) - 1))
    assert all_.predicted_s == pytest.approx(float(tab.seconds[1:, 1].sum()))
    for r in rows:
        assert r.predicted_s == pytest.approx(sum(r.parts.values()))
        assert r.error == pytest.approx(r.predicted_s / r.measured_s - 1)
    assert [r.measured_s for r in rows] == sorted((r.measured_s for r in rows), reverse=True)


@pytest.mark.skipif(not TWO, reason="needs two CPUs")
def test_per_op_type_check_profiles_every_op_on_one_and_t_threads():
    from hwtune.planner import opcheck
    graph, _ = load_any("deepcpu_lstm_i64_h64", None, None)
    got = opcheck.profile(graph, 2, rounds=1, warm_s=0.0, runs=1)
    assert set(got) == {1, 2}
    assert set(got[1]) == set(got[2]) and len(got[1]) > 100
    assert all(x > 0 for t in got for x in got[t].values())
