"""`hwtune plan`: predictions for bigger machines, every output format, bad
input as one `error:` line with exit 2, and --validate measuring this host
and storing the figures the report shows.

The database is seeded through ResultsDB with a scan of this host (its
FMA peak and bandwidth) and a calibration (plan_fixture.CALIBRATION), so
only the models' 1-thread profiles and --validate's runs are measured."""

import json
import sqlite3

import pytest
from click.testing import CliRunner

from hwtune import machine
from hwtune.cli.main import cli
from hwtune.db import ResultsDB
from hwtune.native import sched
from hwtune.native.isa import selected_isa

from plan_fixture import CALIBRATION

SMALL = "deepcpu_lstm_i64_h64"  # 1304 ops, ~1 ms a run on one core here


def _seed(path, *, scan=True):
    with ResultsDB.open(str(path)) as db:
        hk = db.upsert_host(machine.fingerprint())
        if scan:
            run = db.start_run(hk, "scan", {})
            isa = selected_isa()

            def m(bench, op, threads, value, unit, median=None, params=None):
                db.add_measurement(run, bench=bench, op=op, params=params or {},
                                   kernel_variant=isa, threads=threads,
                                   samples=[median] if median else [1.0],
                                   median_s=median, mad_s=0.0, rel_spread=0.0, value=value,
                                   unit=unit)
            m("fma_peak", "fma", 1, 100.0, "GFLOPS")
            for t, (dram, l2) in {1: (22.0, 96.0), 2: (30.0, 180.0)}.items():
                m("triad", "triad", t, dram, "GB/s", params={"where": "dram", "n": 1 << 24})
                m("triad", "triad", t, l2, "GB/s", params={"where": "l2", "n": 1 << 15})
            for t, sec in {1: 4.5e-4, 2: 2.6e-4}.items():
                m("gemm", "gemm", t, 70.0 * t, "GFLOPS", median=sec,
                  params={"M": 64, "K": 512, "N": 512})
            for t, sec in {1: 4.3e-6, 2: 2.3e-6}.items():
                m("eltwise", "mul", t, 7.0 * t, "GFLOPS", median=sec, params={"n": 32768})
            db.finish_run(run, "complete")
        run = db.start_run(hk, "plan", {})
        db.add_fact(run, "plan_calibration", CALIBRATION.to_json())
        db.finish_run(run, "complete")
    return str(path)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    return _seed(tmp_path_factory.mktemp("plan") / "r.db")


def _plan(*args):
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def test_predicts_every_core_count_with_a_chart(seeded):
    r = _plan(SMALL, "--db", seeded, "--cores", "4,8,16")
    assert r.exit_code == 0, r.output
    out = r.output
    assert "Best configuration per core count" in out
    for c in ("4 cores", "8 cores", "16 cores"):
        assert f"{c}: predicted latency per scheduler and split" in out
    assert "Predicted latency vs cores" in out and "per-op thread counts" in out
    for name in sched.names():
        assert name in out
    assert "serial fraction" in out
    # no validation stored for this host: the predictions say they have no range
    flat = " ".join(out.split())
    assert "ranges: no validation of this model's op families stored" in flat


def test_json_is_the_whole_document(seeded):
    r = _plan(SMALL, "--db", seeded, "--cores", "8,16", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["mode"] == "predict" and [c["cores"] for c in doc["cores"]] == [8, 16]
    for c in doc["cores"]:
        assert set(c["schedulers"]) == set(sched.names())
        best = c["best"]
        assert best["executors"] * best["threads"] == c["cores"]
        assert best["latency_s"] > 0
    assert {f["op_type"] for f in doc["fits"]} >= {"matmul", "mul"}
    assert set(doc["chart"]) == set(sched.names())
    with sqlite3.connect(seeded) as c:
        types = {r[0] for r in c.execute("SELECT op_type FROM plan_cost_params")}
        assert {"matmul", "mul"} <= types


@pytest.mark.parametrize("fmt,marker", [("markdown", "## Best configuration per core count"),
                                        ("html", "<svg")])
def test_markdown_and_html(seeded, tmp_path, fmt, marker):
    out = tmp_path / f"plan.{fmt}"
    r = _plan(SMALL, "--db", seeded, "--cores", "4,8", "--format", fmt, "-o", str(out))
    assert r.exit_code == 0, r.output
    assert marker in out.read_text()


def test_a_bundled_machine_by_name(seeded):
    r = _plan(SMALL, "--db", seeded, "--cores", "16,68", "--machine", "xeon-phi-7250",
              "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["machine"]["cores"] == 68 and "xeon-phi-7250.toml" in doc["machine"]["source"]
    # the engine runs at most 64 workers: corun is not simulated at 68
    assert doc["cores"][1]["schedulers"]["corun"]["best"] is None


@pytest.mark.parametrize("args,message", [
    (["--cores", "8,x"], "error: invalid --cores '8,x'"),
    (["--machine", "no-such-machine"], "error: invalid --machine 'no-such-machine'"),
    (["--machine", "ryzen-9-5950x", "--cores", "32"], "error: invalid --cores 32: AMD Ryzen"),
    (["--validate", "--machine", "epyc-7763"], "error: --validate measures this host"),
    (["--from-cores", "1"], "error: --from-cores takes a validation's inputs"),
    (["--validate", "--from-cores", "0"], "error: invalid --from-cores 0"),
    (["--validate", "--from-cores", "4097"], "error: invalid --from-cores 4097"),
    (["--validate", "--from-cores", "1", "--explain"], "error: --explain probes the machine"),
    (["--validate", "--keep-inputs", "x.db"], "error: --keep-inputs keeps --from-cores"),
])
def test_bad_input_is_one_error_line(seeded, args, message):
    r = CliRunner().invoke(cli, ["plan", SMALL, "--db", seeded, *args])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_without_a_scan_it_says_what_to_run(tmp_path):
    path = _seed(tmp_path / "r.db", scan=False)
    r = CliRunner().invoke(cli, ["plan", SMALL, "--db", path])
    assert r.exit_code == 2
    assert "error: no scan of this host in the database: run `hwtune scan --quick`" in r.output


def test_a_missing_model(seeded):
    r = CliRunner().invoke(cli, ["plan", "no_such_model", "--db", seeded])
    assert r.exit_code == 2 and "error: cannot read no_such_model" in r.output


def test_validate_measures_every_configuration_and_the_report_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HWTUNE_PLAN_PROBE_GAP_S", "5")  # a few probes, not ~160
    path = _seed(tmp_path / "v.db")
    r = _plan(SMALL, "--db", path, "--validate", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = doc["validation"]["rows"]
    configs = {(x["scheduler"], x["executors"], x["threads"]) for x in rows}
    assert ("sequential", 1, 1) in configs and ("critical-path", 1, 1) in configs
    assert all(x["predicted_s"] > 0 for x in rows)
    measured = [x for x in rows if x["status"] == "ok"]
    assert measured and all(x["measured_s"] > 0 and x["samples"] for x in measured)
    for x in measured:
        assert x["rel_error"] == pytest.approx((x["predicted_s"] - x["measured_s"])
                                               / x["measured_s"])
    assert doc["validation"]["summary"]["configs"] == len(measured)
    # every measured row is paired with the 1x1 of the same rounds
    assert all(sum(x["chunks"]) == len(x["samples"]) for x in measured)
    base = next(x for x in rows if (x["scheduler"], x["executors"], x["threads"])
                == ("sequential", 1, 1))
    assert base["paired_ratio"] == pytest.approx(1.0)
    assert base["paired_error"] == pytest.approx(0.0)
    assert all(x["paired_ratio"] > 0 for x in measured)
    assert doc["validation"]["summary_paired"]["configs"] == len(measured) - 1
    assert doc["fit_data"] == "scan"  # 1-thread profiles: no multi-thread op data
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT count(*) FROM plan_validations").fetchone()[0] == len(rows)
    rep = CliRunner().invoke(cli, ["report", "--db", path, "--format", "markdown"])
    assert rep.exit_code == 0, rep.output
    assert "## Plan: predicted vs measured on this host" in rep.output
    assert "deepcpu-lstm-i64-h64" in rep.output
    # each out-of-order scheduler's 1-thread profile was taken, and a plan
    # of the same model afterwards reuses it without profiling again
    orders = doc["order_vs_sequential"]
    assert set(orders) == {r.name for r in sched.schedulers().values() if not r.in_order}
    assert all(v > 0 for v in orders.values())
    again = _plan(SMALL, "--db", path, "--cores", "4", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["order_vs_sequential"] == orders
    txt = _plan(SMALL, "--db", path, "--cores", "4")
    assert txt.exit_code == 0 and "own order vs sequential: " in " ".join(txt.output.split())
    # the validation's errors give the plan's predictions a range on this host
    ivs = json.loads(again.stdout)["intervals"]
    assert [r["model"] for r in ivs["records"]] == [doc["model"]]
    errs = [x["rel_error"] for x in measured]
    for fam, rng in ivs["ranges"].items():
        assert rng["lo"] == pytest.approx(min(errs)) and rng["hi"] == pytest.approx(max(errs))
    best = json.loads(again.stdout)["cores"][0]["best"]
    lo, hi = best["interval_s"]
    assert lo <= hi
    assert lo == pytest.approx(best["latency_s"] / (1 + ivs["error_hi"]))
    assert "ranges: from the errors of this host's last validations (1 models" in \
        " ".join(txt.output.split())


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_an_unsettled_calibration_is_a_warning_naming_the_flag(fmt):
    from hwtune.report import export
    from plan_fixture import plan_doc
    doc = plan_doc()
    doc["calibration"] = dict(doc["calibration"], attempts=4, settled=False,
                              spread={"run_s/corun/2": 6.5, "dispatch_s/corun": 0.1})
    text = " ".join(export.render("plan", doc, fmt).split())  # terminal: wrapped lines
    assert "4 attempts, largest spread 650% (run_s/corun/2)" in text
    assert "no two engine calibrations agreed" in text and "--fresh" in text
    doc["calibration"]["settled"] = True
    assert "no two engine calibrations agreed" not in export.render("plan", doc, fmt)


def test_validate_predicts_from_the_stored_inputs_and_explain_is_apart(tmp_path, monkeypatch):
    """One prediction path: --validate predicts every row from what `hwtune
    plan` predicts from (the stored scan, the stored 1-thread profiles), so
    a plan of the 1-thread configurations gives the same figures. --explain
    probes the scan's scaling rows, the fork-join and the model's 1-thread
    profile beside the samples and predicts again from their medians: a
    diagnostic kept apart (predicted_beside_s, its own summary), which never
    changes predicted_s or the error reported."""
    monkeypatch.setenv("HWTUNE_PLAN_PROBE_GAP_S", "5")  # a few probes, not ~160
    path = _seed(tmp_path / "b.db")
    r = _plan(SMALL, "--db", path, "--validate", "--json")
    assert r.exit_code == 0, r.output
    plain = json.loads(r.stdout)["validation"]
    assert "explain" not in plain
    assert all(x["predicted_beside_s"] is None for x in plain["rows"])
    # a plan of this host's cores, from the same stored inputs, predicts the
    # sequential 1x1 as the validation did
    pl = _plan(SMALL, "--db", path, "--cores", "1", "--json")
    assert pl.exit_code == 0, pl.output
    seq = json.loads(pl.stdout)["cores"][0]["schedulers"]["sequential"]["best"]
    base = next(x for x in plain["rows"] if (x["scheduler"], x["executors"], x["threads"])
                == ("sequential", 1, 1))
    assert seq["latency_s"] == pytest.approx(base["predicted_s"], rel=1e-9)

    r = _plan(SMALL, "--db", path, "--validate", "--explain", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["validation"]
    rows, ex = v["rows"], v["explain"]
    # the stored inputs were not measured again: the same predictions
    assert [x["predicted_s"] for x in rows] == pytest.approx(
        [x["predicted_s"] for x in plain["rows"]], rel=1e-12)
    assert ex["beside"]["probes"] >= 1
    assert "gemm 64x512x512 2t" in ex["beside"] and "mul n=32768 1t" in ex["beside"]
    lo, med, hi = ex["beside"]["forkjoin chain 2t"]
    assert lo <= med <= hi
    assert "transfer 64 KiB" in ex["beside"]
    assert all(x["predicted_beside_s"] > 0 for x in rows)
    lo, med, hi = ex["beside"]["model run, 1 thread (op total)"]
    assert 0 < lo <= med <= hi
    # the 1-thread rows are predicted again from the probed op total: the
    # sequential 1x1 charges the same beyond its op total either way (a
    # bound like "at most 1.5x the probed runs' slowest" failed in CI: the
    # gap per op both charge comes from the stored whole 1-thread run, a
    # measurement apart from the probes, taken there beside a build)
    one = {x["scheduler"]: x for x in rows if x["executors"] * x["threads"] == 1}
    assert len(one) == 4 and ex["op_total_stored_s"] > 0
    seq1 = one["sequential"]
    assert seq1["predicted_beside_s"] - med == pytest.approx(
        seq1["predicted_s"] - ex["op_total_stored_s"], rel=1e-6, abs=1e-12)
    # the seeded scan's 2-thread figures are not this host's: the probes move
    # the diagnostic's 2-thread predictions, never the reported ones
    assert any(x["predicted_beside_s"] != pytest.approx(x["predicted_s"], rel=1e-6)
               for x in rows if x["threads"] == 2)
    assert ex["summary"]["configs"] == v["summary"]["configs"]
    for x in rows:
        if x["measured_s"]:
            assert x["rel_error"] == pytest.approx((x["predicted_s"] - x["measured_s"])
                                                   / x["measured_s"])
    bad = CliRunner().invoke(cli, ["plan", SMALL, "--db", path, "--explain"])
    assert bad.exit_code == 2 and "--explain explains a validation" in bad.output


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_the_beside_diagnostic_is_shown_apart(fmt):
    from hwtune.report import export
    from hwtune.planner.validate import summary
    from plan_fixture import validation_doc
    doc = validation_doc()
    rows = doc["validation"]["rows"]
    rows[0]["predicted_beside_s"] = 0.0165
    doc["validation"]["explain"] = {"summary": summary(rows, "predicted_beside_s"),
                                    "beside": {"probes": 55}}
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "median |error| 4.5%" in text  # the figure: the stored inputs' prediction
    assert "diagnostic, not the figure (--explain)" in text
    assert "(55 probes): median |error| 25.0%" in text
    assert "16.5" in text
    assert "1-thread op total" not in text  # no probed profile: nothing to set beside
    doc["validation"]["explain"].update(op_total_stored_s=0.0121, beside={
        "probes": 55, "model run, 1 thread (op total)": (0.0118, 0.0125, 0.0139)})
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "1-thread op total: 12.500 ms probed beside (median), 12.100 ms stored" in text


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_the_paired_ratio_to_the_1x1_is_shown_beside(fmt):
    from hwtune.report import export
    from hwtune.planner.validate import paired_summary
    from plan_fixture import validation_doc
    doc = validation_doc()
    rows = doc["validation"]["rows"]
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "paired" not in text  # a validation from before the pairing
    rows[0].update(paired_ratio=1.0, paired_error=0.0)
    rows[1].update(paired_ratio=0.61, paired_error=-0.1234)
    doc["validation"]["summary_paired"] = paired_summary(rows)
    text = " ".join(export.render("plan", doc, fmt).split())
    assert "paired" in text and "0.610x" in text
    assert fmt == "terminal" or "-12.3%" in text  # the terminal's 80 columns wrap it
    assert "same rounds" in text and "worst 12.3% over 1 configurations" in text


def test_train_plans_the_training_step(seeded):
    """--train plans the model's training step (forward, loss, backward,
    update), as Graphi timed its models: more ops than the forward pass."""
    fwd = _plan(SMALL, "--db", seeded, "--set", "seq=4", "--cores", "4", "--json")
    step = _plan(SMALL, "--db", seeded, "--set", "seq=4", "--cores", "4", "--train", "--json")
    assert fwd.exit_code == 0 and step.exit_code == 0, step.output
    f, s = json.loads(fwd.stdout), json.loads(step.stdout)
    assert s["model"] == f["model"] + ".train" and s["ops"] > 2 * f["ops"]
    assert s["cores"][0]["best"]["latency_s"] > f["cores"][0]["best"]["latency_s"] > 0
