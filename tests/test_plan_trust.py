"""What `hwtune plan --validate` counts and charges (issue #44): a row
whose samples were disturbed is measured again and, if still disturbed,
flagged rather than silently counted; the model's plain whole 1-thread
run, an input taken on the inputs' own cores, charges what lies between
its simulated and its measured run to every op."""

import dataclasses

import numpy as np
import pytest

from hwtune.graph.generators.builder import Builder
from hwtune.native import sched
from hwtune.planner import calibrate, inputs, validate
from hwtune.planner.validate import BASE, DISTURBED_MAD, Row

from plan_fixture import predictor, validation_doc


def _row(scheduler, n, k, measured, mad, chunks=(1, 1, 1)):
    r = Row(scheduler, n, k, predicted_s=1.0, measured_s=measured, mad_s=mad)
    r.samples, r.chunks = [measured] * sum(chunks), list(chunks)
    return r


def test_a_disturbed_row_is_measured_again_and_keeps_the_pass_that_spread_less():
    quiet = _row(*BASE, 1.0, 0.01)
    noisy = _row("sequential", 1, 2, 0.8, 0.2)            # MAD 25%: disturbed
    steady = _row("corun", 1, 2, 0.6, 0.01)
    calm_again = _row("sequential", 1, 2, 0.55, 0.01)     # its second pass: 2%
    base_again = _row(*BASE, 1.1, 0.02)
    asked = []

    def measure(which):
        asked.append(which)
        return [{0: base_again, 1: calm_again}[i] for i in which]
    out = [quiet, noisy, steady]
    base_of = validate.remeasure(out, measure)
    assert asked == [[0, 1]]                  # the 1x1 beside it, as reference and base
    assert out[1] is calm_again and out[1].remeasured and not out[1].disturbed
    assert "kept the second" in out[1].note
    assert out[2] is steady and not steady.remeasured
    assert out[0] is quiet and quiet.remeasured  # the first pass spread less
    # each row pairs with the 1x1 of the rounds its samples come from
    assert base_of(calm_again) is base_again and base_of(steady) is quiet
    validate.paired_ratios(out, base_of)
    assert out[1].paired_ratio == pytest.approx(0.55 / 1.1)
    assert steady.paired_ratio == pytest.approx(0.6)


def test_a_row_disturbed_in_both_passes_stays_flagged_and_counted():
    base, noisy = _row(*BASE, 1.0, 0.01), _row("sequential", 1, 2, 0.8, 0.2)
    worse = _row("sequential", 1, 2, 0.9, 0.3)
    out = [base, noisy]
    validate.remeasure(out, lambda which: [_row(*BASE, 1.0, 0.01), worse][:len(which)])
    assert out[1] is noisy and noisy.disturbed and noisy.remeasured
    assert "kept the first" in noisy.note
    js = [r.to_json() for r in out]
    assert js[1]["disturbed"] and validate.summary(js)["disturbed"] == 1
    assert validate.summary(js)["configs"] == 2        # counted in the figure
    assert validate.undisturbed_summary(js)["configs"] == 1


def test_nothing_is_measured_again_when_no_row_is_disturbed():
    out = [_row(*BASE, 1.0, 0.01), _row("corun", 1, 2, 0.6, 0.6 * DISTURBED_MAD)]
    assert validate.remeasure(out, lambda which: pytest.fail("measured again")) is None
    assert not any(r.remeasured or r.disturbed for r in out)


def test_a_disturbed_row_is_named_in_the_table_and_under_it():
    from hwtune.report import export
    doc = validation_doc()
    rows = doc["validation"]["rows"]
    rows.append(dict(rows[0], scheduler="corun", threads=2, measured_s=0.01, mad_s=0.003,
                     rel_error=0.2, disturbed=True, remeasured=True))
    doc["validation"]["summary"] = validate.summary(rows)
    doc["validation"]["summary_undisturbed"] = validate.undisturbed_summary(rows)
    text = " ".join(export.render("plan", doc, "markdown").split())
    assert "ok, disturbed" in text
    assert ("1 configuration(s) disturbed while measured (MAD above 10% of the median in "
            "two passes), counted in the figure above; without them: median |error| 4.5%"
            in text)


def _same_machine():
    return predictor(target="ryzen-9-5950x")


def test_the_whole_run_charges_its_gap_to_every_op_at_every_thread_count():
    p, host_p = _same_machine(), _same_machine()
    try:
        seq = sched.schedulers()["sequential"]
        before = p.table(4).seconds.copy()
        simulated, _ = host_p.simulate(seq, 1, 1)
        w = inputs.run_gap(p, host_p, 1.1 * simulated)
        n = len(p.ops)
        assert w["ops"] == n and w["measured_s"] == pytest.approx(1.1 * simulated)
        assert w["gap_per_op_s"] == pytest.approx(0.1 * simulated / n)
        p._tables.clear()
        after = p.table(4).seconds
        assert np.allclose(after - before, w["gap_per_op_s"])  # not split over a team
        again, _ = p.simulate(seq, 1, 1)
        assert again == pytest.approx(1.1 * simulated, rel=1e-3)
    finally:
        p.close()
        host_p.close()


def test_a_whole_run_within_the_spread_or_missing_charges_nothing():
    p, host_p = _same_machine(), _same_machine()
    try:
        simulated, _ = host_p.simulate(sched.schedulers()["sequential"], 1, 1)
        near = simulated * (1 + 0.5 * inputs.RUN_GAP_MIN)
        assert inputs.run_gap(p, host_p, near)["gap_per_op_s"] == 0.0 and p.run_gap_s == 0.0
        assert inputs.run_gap(p, host_p, None)["gap_per_op_s"] == 0.0
    finally:
        p.close()
        host_p.close()


def test_a_folded_op_is_charged_nothing():
    p = _same_machine()
    try:
        p.ops = [dataclasses.replace(p.ops[0], folded=True)] + list(p.ops[1:])
        p.run_gap_s = 2e-6
        plus = p.table(2).seconds
        p.run_gap_s, p._tables = 0.0, {}
        base = p.table(2).seconds
        assert np.allclose(plus[0], base[0]) and np.allclose(plus[1:] - base[1:], 2e-6)
    finally:
        p.close()


def test_the_profile_times_its_plain_warm_up_runs_past_the_engines_opening():
    b = Builder("tiny")
    t = b.input("x", (4, 8))
    b.output(b.op("r", "relu", [b.op("s", "sigmoid", [t])]))
    g = b.build()
    plain = []
    calibrate.fresh_engine_profile(g, warm_s=0.02, warm_runs=1, runs=1, span_s=0.0,
                                   max_runs=1, plain=plain)
    assert plain and all(0 < x < 0.01 for x in plain)
    assert calibrate.whole_run_s(plain) == pytest.approx(float(np.median(plain)))
    assert calibrate.whole_run_s([]) is None


def test_the_whole_run_is_stored_with_the_profiles_and_read_back(tmp_path):
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.planner.opdata import op_data
    b = Builder("tiny")
    t = b.input("x", (4, 8))
    b.output(b.op("r", "relu", [b.op("s", "sigmoid", [t])]))
    g = b.build()
    ops = op_data(g)
    with ResultsDB.open(str(tmp_path / "r.db")) as db:
        hk = db.upsert_host(machine.fingerprint())
        run = db.start_run(hk, "plan", {"model": "tiny"})
        inputs.one_thread_times(db, hk, g, ops, fresh=True, progress=lambda m: None,
                                run_id=run)
        got = inputs.stored_whole_run(db, hk, ops, run)   # the running run's own
        assert got and got > 0
        db.finish_run(run, "complete")
        assert inputs.stored_whole_run(db, hk, ops) == got
        assert inputs.stored_whole_run(db, hk, ops[:1]) is None   # another graph's


def test_the_validation_table_gives_each_model_its_verdict_and_goes_on_past_a_failure(
        monkeypatch, capsys):
    """bench_plan.py validate: per model PASS or MISS against the goal (and
    'loaded' when other processes took the CPUs meanwhile), its disturbed
    rows, a model whose command failed listed with its error line."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_plan

    def rows(errors, disturbed=()):
        return [{"scheduler": "sequential", "executors": 1, "threads": k, "predicted_s": 1 + e,
                 "measured_s": 1.0, "mad_s": 0.01, "rel_error": e, "samples": [1.0],
                 "status": "ok", "disturbed": i in disturbed}
                for i, (k, e) in enumerate(zip((1, 2, 2), errors))]

    def doc(rs, others):
        return {"host": {"load_1min": 0.5},
                "validation": {"rows": rs, "summary": validate.summary(rs),
                               "others_cpu_share": others}}
    docs = {"good": doc(rows((0.02, -0.05, 0.08)), 0.01),
            "bad": doc(rows((0.02, -0.3, 0.08), disturbed=(1,)), 0.5)}

    def run(cmd, **kw):
        name = cmd[cmd.index("plan") + 1]
        if name == "broken":
            return subprocess.CompletedProcess(cmd, 2, "", "Error: no scan of this host\n")
        return subprocess.CompletedProcess(cmd, 0, json.dumps(docs[name]), "")
    monkeypatch.setattr(bench_plan.subprocess, "run", run)
    bench_plan.validate("x.db", ["good", "broken", "bad"], from_cores=1)
    out = capsys.readouterr().out
    table = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:]]
             for ln in out.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert table["good"][:5] == ["3", "5.0%", "8.0%", "PASS", "0"]
    assert table["bad"][:5] == ["3", "8.0%", "30.0%", "MISS, loaded", "1"]
    assert table["broken"][3] == "error: Error: no scan of this host"
    assert "models meeting it: 1 of 3; failed: broken" in out
    assert "(their verdicts say 'loaded': rerun on an idle machine): bad" in out
